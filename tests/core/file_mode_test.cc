// FileModeText (core/src/file_mode.h): the permission bits as messages print them.
#include "core/src/file_mode.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace batchcast {
namespace {

TEST(FileModeText, FourOctalDigitsOfThePermissionBits) {
  EXPECT_EQ(FileModeText(0600), "0600");
  EXPECT_EQ(FileModeText(0644), "0644");
  EXPECT_EQ(FileModeText(01777), "1777");
  EXPECT_EQ(FileModeText(0), "0000");
}

TEST(FileModeText, TheFileTypeIsLeftOut) {
  EXPECT_EQ(FileModeText(S_IFREG | 0640), "0640");
  EXPECT_EQ(FileModeText(S_IFDIR | 0700), "0700");
}

}  // namespace
}  // namespace batchcast
