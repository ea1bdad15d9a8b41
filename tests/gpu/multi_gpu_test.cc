// Several GPUs of one node: a consumer whose current
// device is not the ring's gets every batch size right, and a server with a
// ring per GPU (--device cuda:0,1) serves each consumer from its own GPU's
// ring. Needs 2 GPUs (skipped otherwise, "needs 2 GPUs"); contents are
// checked against the synthetic formula (the CPU reference).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../e2e/device_util.h"
#include "../e2e/harness.h"
#include "batchcast/client/consumer.h"
#include "batchcast/cuda/runtime.h"

#define BC_REQUIRE_GPUS(n)                                                 \
  do {                                                                     \
    auto _n = ::batchcast::cuda::DeviceCount();                            \
    if (!_n.ok() || *_n < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs"; \
  } while (0)

namespace batchcast {
namespace {

using testing::StartServerProcess;
using testing::UniqueName;

std::vector<std::string> SyntheticArgs(const std::string& device) {
  return {"--device",     device, "--synthetic", "100000", "--size",          "32",
          "--batch-size", "64",   "--window",    "8",      "--min-consumers", "1"};
}

// A consumer of `name` telling the server `device` ("" = the thread's current one).
std::unique_ptr<Consumer> Connect(const std::string& name, uint32_t batch,
                                  const std::string& device, CudaStreamRef stream = {}) {
  ConsumerOptions o;
  o.endpoint = name;
  o.batch_size = batch;
  o.timeout = std::chrono::seconds(30);
  o.device = device;
  o.cuda_stream = stream;
  auto c = Consumer::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// Reads `batches` batches of `c` and checks each: fields on `want`, every
// sample's bytes and label those of its index. The readback runs with the
// ring's device current (the test thread's is the consumer's, kept otherwise).
void ReadAndCheck(Consumer* c, int batches, Device want, uint32_t batch_size,
                  CudaStreamRef stream = {}) {
  int seen = 0;
  int gathered = 0;
  while (seen < batches) {
    auto b = c->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (b->end_of_epoch()) continue;
    ASSERT_EQ(b->size(), batch_size);
    for (const char* field : {"image", "label"}) {
      auto f = b->field(field);
      ASSERT_TRUE(f.ok());
      EXPECT_EQ(f->device, want) << field;
    }
    if (!b->zero_copy()) ++gathered;
    cuda::DeviceGuard g(want.index);
    Result<int64_t> bad = testing::FormulaMismatches(*b, stream);
    ASSERT_TRUE(bad.ok()) << bad.status().ToString();
    ASSERT_EQ(*bad, 0) << "batch " << seen << " of batch size " << batch_size;
    ++seen;
  }
  if (64 % batch_size != 0) {
    EXPECT_GT(gathered, 0) << "no batch spanned two slots";
  }
}

class MultiGpu : public ::testing::Test {
 protected:
  void SetUp() override { BC_REQUIRE_GPUS(2); }
};

// Item 1: server on cuda:0, the consumer's current device cuda:1, every batch
// size (zero-copy and gathered across slots): correct data, fields on cuda:0.
TEST_F(MultiGpu, ConsumerOnAnotherGpuGetsEveryBatchSize) {
  const std::string name = UniqueName("xgpu");
  auto server = StartServerProcess(BC_SERVER_BIN, name, SyntheticArgs("cuda:0"));
  ASSERT_TRUE(server);
  cuda::DeviceGuard on_1(1);
  ASSERT_TRUE(on_1.status().ok());
  for (uint32_t batch : {1u, 50u, 64u, 100u}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto c = Connect(name, batch, "");  // HELLO says cuda:1
    ASSERT_TRUE(c);
    EXPECT_EQ(c->device(), Device::Cuda(0));
    ASSERT_NO_FATAL_FAILURE(ReadAndCheck(c.get(), 12, Device::Cuda(0), batch));
    auto current = cuda::CurrentDevice();
    ASSERT_TRUE(current.ok());
    EXPECT_EQ(*current, 1) << "the library changed the caller's current device";
  }
  // The same with a delivery stream of the ring's device.
  auto stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok());
  auto c = Connect(name, 50, "", stream->ref());
  ASSERT_TRUE(c);
  ASSERT_NO_FATAL_FAILURE(ReadAndCheck(c.get(), 12, Device::Cuda(0), 50, stream->ref()));
}

// Item 4: a ring per GPU; each consumer is served from its own GPU's ring,
// with the same stream (the same samples for the same seqs) on both.
TEST_F(MultiGpu, TwoGpuServerServesEachConsumerFromItsOwnGpu) {
  const std::string name = UniqueName("twogpu");
  nlohmann::json st;
  auto server = StartServerProcess(BC_SERVER_BIN, name, SyntheticArgs("cuda:0,1"), "", &st);
  ASSERT_TRUE(server);
  EXPECT_EQ(st.value("device", ""), "cuda:0,1") << st.dump();
  for (uint32_t batch : {50u, 64u}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto on0 = Connect(name, batch, "cuda:0");
    auto on1 = Connect(name, batch, "cuda:1");
    ASSERT_TRUE(on0 && on1);
    EXPECT_EQ(on0->device(), Device::Cuda(0));
    EXPECT_EQ(on1->device(), Device::Cuda(1));
    EXPECT_NE(on0->consumer_id(), on1->consumer_id());
    ASSERT_NO_FATAL_FAILURE(ReadAndCheck(on0.get(), 20, Device::Cuda(0), batch));
    ASSERT_NO_FATAL_FAILURE(ReadAndCheck(on1.get(), 20, Device::Cuda(1), batch));
  }
  // The current device picks the ring when the consumer names none.
  {
    cuda::DeviceGuard on_1(1);
    auto c = Connect(name, 32, "");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->device(), Device::Cuda(1));
    ASSERT_NO_FATAL_FAILURE(ReadAndCheck(c.get(), 8, Device::Cuda(1), 32));
  }
  auto stats = QueryStats(name, std::chrono::seconds(5));
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const nlohmann::json j = nlohmann::json::parse(*stats);
  ASSERT_TRUE(j.contains("rings")) << j.dump();
  ASSERT_EQ(j["rings"].size(), 2u);
  EXPECT_EQ(j["rings"][0]["device"], "cuda:0");
  EXPECT_EQ(j["rings"][1]["device"], "cuda:1");
  EXPECT_GT(j["rings"][0]["batches_written"].get<uint64_t>(), 0u);
  EXPECT_GT(j["rings"][1]["batches_written"].get<uint64_t>(), 0u);
}

// A GPU whose ring has no consumer produces nothing.
TEST_F(MultiGpu, GpuWithoutConsumersStaysIdle) {
  const std::string name = UniqueName("idlegpu");
  auto server = StartServerProcess(BC_SERVER_BIN, name, SyntheticArgs("cuda:0,1"));
  ASSERT_TRUE(server);
  auto c = Connect(name, 64, "cuda:0");
  ASSERT_TRUE(c);
  ASSERT_NO_FATAL_FAILURE(ReadAndCheck(c.get(), 20, Device::Cuda(0), 64));
  auto stats = QueryStats(name, std::chrono::seconds(5));
  ASSERT_TRUE(stats.ok());
  const nlohmann::json j = nlohmann::json::parse(*stats);
  ASSERT_EQ(j["rings"].size(), 2u);
  EXPECT_GT(j["rings"][0]["batches_written"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["rings"][1]["batches_written"].get<uint64_t>(), 0u);
}

}  // namespace
}  // namespace batchcast
