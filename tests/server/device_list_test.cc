// The --device option with several GPUs and which ring serves a consumer
// (Note [Rings per GPU], server/src/device_list.h): pure rules, no GPU.
#include "server/src/device_list.h"

#include <gtest/gtest.h>

#include "batchcast/server/option_table.h"

namespace batchcast {
namespace {

ServerOptions Parsed(std::string_view text) {
  ServerOptions o;
  Status s = SetServerOption(o, "device", text);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return o;
}

TEST(DeviceList, OneDeviceKeepsTheSingleRingOptions) {
  ServerOptions cpu = Parsed("cpu");
  EXPECT_EQ(cpu.source.device, Device::Cpu());
  EXPECT_TRUE(cpu.gpus.empty());
  EXPECT_FALSE(cpu.all_gpus);
  EXPECT_EQ(*RingDevices(cpu, Result<int>(0)), std::vector<int>{-1});
  ServerOptions one = Parsed("cuda:3");
  EXPECT_EQ(one.source.device, Device::Cuda(3));
  EXPECT_TRUE(one.gpus.empty());
  EXPECT_EQ(*RingDevices(one, Result<int>(0)), std::vector<int>{3});
  EXPECT_EQ(FindServerOption("device")->get(one), "cuda:3");
}

TEST(DeviceList, AListGivesARingPerGpuInOrder) {
  ServerOptions o = Parsed("cuda:1,0,3");
  EXPECT_EQ(o.source.device, Device::Cuda(1));  // the first one
  EXPECT_EQ(o.gpus, (std::vector<int>{1, 0, 3}));
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_EQ(*RingDevices(o, UnavailableError("not asked")), (std::vector<int>{1, 0, 3}));
  EXPECT_EQ(FindServerOption("device")->get(o), "cuda:1,0,3");
  // Parsing the printed value gives the same options (CLI and Python).
  ServerOptions again = Parsed(FindServerOption("device")->get(o));
  EXPECT_EQ(again.gpus, o.gpus);
}

TEST(DeviceList, AllIsEveryVisibleGpuAndAClearErrorWithoutOne) {
  ServerOptions o = Parsed("cuda:all");
  EXPECT_TRUE(o.all_gpus);
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_EQ(FindServerOption("device")->get(o), "cuda:all");
  EXPECT_EQ(*RingDevices(o, Result<int>(4)), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(*RingDevices(o, Result<int>(1)), std::vector<int>{0});
  Result<std::vector<int>> none = RingDevices(o, UnavailableError("no CUDA device is visible"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("cuda:all: no GPU is visible"), std::string::npos);
  EXPECT_NE(none.status().message().find("no CUDA device is visible"), std::string::npos);
  EXPECT_FALSE(RingDevices(o, Result<int>(0)).ok());
}

TEST(DeviceList, BadListsAreRefusedNamingTheOption) {
  for (const char* bad : {"cuda:0,0", "cuda:0,", "cuda:,1", "cuda:0,x", "cuda:0;1", "gpu:0,1",
                          "cuda:-1,2", "cuda:0,99999999999", "cuda:al"}) {
    ServerOptions o;
    Status s = SetServerOption(o, "device", bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--device"), std::string::npos) << s.message();
  }
}

TEST(DeviceList, ValidateRefusesInconsistentFields) {
  ServerOptions o;
  o.gpus = {0, 1};  // source.device left at cpu
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o.source.device = Device::Cuda(0);
  EXPECT_TRUE(o.Validate().ok());
  o.gpus = {0, 1, 0};
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(DeviceList, HostRingsAreOneToSixtyFourOnACpuServer) {
  ServerOptions o;
  for (uint32_t n : {1u, 2u, 64u}) {
    o.host_rings = n;
    EXPECT_TRUE(o.Validate().ok()) << n;
  }
  for (uint32_t n : {0u, 65u}) {
    o.host_rings = n;
    EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument) << n;
  }
  o.host_rings = 2;
  o.source.device = Device::Cuda(0);
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument) << "host rings with a GPU ring";
}

TEST(DeviceList, EachConsumerIsServedFromTheRingOfItsGpu) {
  const std::vector<int> rings = {0, 1, 3};
  EXPECT_EQ(*RingForConsumer("cuda:0", rings), 0u);
  EXPECT_EQ(*RingForConsumer("cuda:1", rings), 1u);
  EXPECT_EQ(*RingForConsumer("cuda:3", rings), 2u);
  // No GPU, or a GPU without a ring: the first ring.
  EXPECT_EQ(*RingForConsumer("", rings), 0u);
  EXPECT_EQ(*RingForConsumer("cpu", rings), 0u);
  EXPECT_EQ(*RingForConsumer("cuda:2", rings), 0u);
  // One ring (host or GPU) serves everyone: a consumer on another GPU too.
  EXPECT_EQ(*RingForConsumer("cuda:1", std::vector<int>{0}), 0u);
  EXPECT_EQ(*RingForConsumer("cuda:1", std::vector<int>{-1}), 0u);
  EXPECT_EQ(RingForConsumer("tpu:0", rings).status().code(), StatusCode::kInvalidArgument);
}

// The window by default: 8 slots, and 4 per ring on a server of several
// (their rings share it); one that is set stays.
TEST(DeviceList, TheDefaultWindowGrowsWithTheRings) {
  ServerOptions o;
  EXPECT_EQ(o.window, 0u);
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_EQ(o.window_for(1), 8u);
  EXPECT_EQ(o.window_for(2), 8u);
  EXPECT_EQ(o.window_for(4), 16u);
  EXPECT_EQ(o.window_for(8), 32u);
  o.window = 6;
  EXPECT_EQ(o.window_for(4), 6u);
  o.window = 1;
  EXPECT_FALSE(o.Validate().ok());
}

}  // namespace
}  // namespace batchcast
