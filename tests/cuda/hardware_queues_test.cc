// Note [Hardware queues]: what batchcast-server and `import batchcast` ask
// for, and how the value a context gets is read. No GPU needed.
#include "batchcast/cuda/hardware_queues.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

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

TEST_F(HardwareQueuesTest, UnsetIsCudasDefaultAndPreferringSetsThirtyTwo) {
  EXPECT_EQ(HardwareQueues(), 8);
  PreferManyHardwareQueues();
  ASSERT_NE(getenv(kVar), nullptr);
  EXPECT_STREQ(getenv(kVar), "32");
  EXPECT_EQ(HardwareQueues(), kMaxHardwareQueues);
}

TEST_F(HardwareQueuesTest, AValueTheUserSetIsKept) {
  setenv(kVar, "1", 1);  // Megatron-LM's setting
  PreferManyHardwareQueues();
  EXPECT_STREQ(getenv(kVar), "1");
  EXPECT_EQ(HardwareQueues(), 1);
}

TEST_F(HardwareQueuesTest, ValuesCudaDoesNotTakeCountAsTheDefault) {
  for (const char* bad : {"", "0", "33", "-4", "8x", "many"}) {
    setenv(kVar, bad, 1);
    EXPECT_EQ(HardwareQueues(), kDefaultHardwareQueues) << "'" << bad << "'";
  }
  setenv(kVar, "16", 1);
  EXPECT_EQ(HardwareQueues(), 16);
}

}  // namespace
}  // namespace batchcast::cuda
