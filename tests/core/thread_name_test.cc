#include "core/src/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <string_view>
#include <thread>

namespace batchcast {
namespace {

// The calling thread's name as the kernel shows it to top, ps and /proc.
std::string OwnComm() {
  std::ifstream f("/proc/self/task/" + std::to_string(syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// The name a new thread has after SetThreadName(name).
std::string NameInNewThread(std::string_view name) {
  std::string seen;
  std::thread t([&] {
    SetThreadName(name);
    seen = OwnComm();
  });
  t.join();
  return seen;
}

TEST(ThreadName, NamesTheCallingThreadOnly) {
  const std::string before = OwnComm();
  EXPECT_EQ(NameInNewThread("bc-test"), "bc-test");
  EXPECT_EQ(OwnComm(), before);
}

TEST(ThreadName, LongNamesAreCutToFifteenCharacters) {
  EXPECT_EQ(NameInNewThread("bc-a-name-much-longer-than-linux-keeps"), "bc-a-name-much-");
}

}  // namespace
}  // namespace batchcast
