#include "core/src/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
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

TEST(ThreadName, NamesTheCallingThreadOnly) {
  const std::string before = OwnComm();
  std::string seen;
  std::thread t([&] {
    SetThreadName("bc-test");
    seen = OwnComm();
  });
  t.join();
  EXPECT_EQ(seen, "bc-test");
  EXPECT_EQ(OwnComm(), before);
}

TEST(ThreadName, LongNamesAreCutToFifteenCharacters) {
  std::string seen;
  std::thread t([&] {
    SetThreadName("bc-a-name-much-longer-than-linux-keeps");
    seen = OwnComm();
  });
  t.join();
  EXPECT_EQ(seen, "bc-a-name-much-");
}

}  // namespace
}  // namespace batchcast
