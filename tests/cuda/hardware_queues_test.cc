// Note [Hardware queues]: how the value a CUDA start gets is read. No GPU needed.
#include "batchcast/cuda/hardware_queues.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <string_view>

namespace batchcast::cuda {
namespace {

constexpr const char* kVar = "CUDA_DEVICE_MAX_CONNECTIONS";

// Restores the variable as the test found it.
class HardwareQueuesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* v = getenv(kVar);
    had_ = v != nullptr;
    if (had_) saved_ = v;
    unsetenv(kVar);
  }
  void TearDown() override {
    if (had_) {
      setenv(kVar, saved_.c_str(), 1);
    } else {
      unsetenv(kVar);
    }
  }

 private:
  bool had_ = false;
  std::string saved_;
};

TEST_F(HardwareQueuesTest, UnsetIsCudasDefaultAndValuesInRangeAreRead) {
  EXPECT_EQ(HardwareQueues(), 8);
  for (int n : {1, 16, 32}) {
    setenv(kVar, std::to_string(n).c_str(), 1);
    EXPECT_EQ(HardwareQueues(), n);
  }
}

TEST_F(HardwareQueuesTest, ValuesCudaDoesNotTakeCountAsTheDefault) {
  for (const char* bad : {"", "0", "33", "-4", "8x", "many", " 4", "4 "}) {
    setenv(kVar, bad, 1);
    EXPECT_EQ(HardwareQueues(), kDefaultHardwareQueues) << "'" << bad << "'";
  }
}

TEST(HardwareQueuesFor, ReadsAValueAsTheVariableIsRead) {
  // batchcast._core.hardware_queues (Python's warning) reads values here.
  EXPECT_EQ(HardwareQueuesFor(std::nullopt), kDefaultHardwareQueues);
  EXPECT_EQ(HardwareQueuesFor("32"), kMaxHardwareQueues);
  EXPECT_EQ(HardwareQueuesFor("1"), 1);
  using namespace std::string_view_literals;
  for (std::string_view bad : {""sv, "0"sv, "33"sv, " 4"sv, "4 "sv, "4\0x"sv, "x"sv}) {
    EXPECT_EQ(HardwareQueuesFor(bad), kDefaultHardwareQueues) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace batchcast::cuda
