// Several GPUs of one node: a consumer whose current device is not the
// ring's gets every batch size right, and a server with a ring per GPU
// (--device cuda:0,1) shares one stream between the rings (Note [Placement],
// server/src/scheduler.h): each consumer reads its own GPU's ring zero-copy
// and copies what was placed on the other; a group spans the GPUs; counts
// are the server's. Needs 2 GPUs (skipped otherwise, "needs 2 GPUs");
// contents are checked against the synthetic formula (the CPU reference,
// which the one-GPU server's pixels equal).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
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

// A consumer of `name` telling the server `device` ("" = the thread's current
// one), in group `group` as `rank` of `world` (none when world is 0).
std::unique_ptr<Consumer> Connect(const std::string& name, uint32_t batch,
                                  const std::string& device, CudaStreamRef stream = {},
                                  const std::string& group = "", uint32_t rank = 0,
                                  uint32_t world = 0) {
  ConsumerOptions o;
  o.endpoint = name;
  o.batch_size = batch;
  o.timeout = std::chrono::seconds(30);
  o.device = device;
  o.cuda_stream = stream;
  o.group = group;
  if (world > 0) {
    o.rank = rank;
    o.world_size = world;
  }
  auto c = Consumer::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// What ReadAndCheck saw.
struct Seen {
  int batches = 0;
  int gathered = 0;
  std::vector<int64_t> indices;
};

// Reads `batches` batches of `c` and checks each: fields on `want`, every
// sample's bytes and label those of its index. The readback runs with the
// ring's device current (the test thread's is the consumer's, kept otherwise).
Seen ReadAndCheck(Consumer* c, int batches, Device want, uint32_t batch_size,
                  CudaStreamRef stream = {}) {
  Seen out;
  int seen = 0;
  int gathered = 0;
  while (seen < batches) {
    auto b = c->Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return out;
    if (b->end_of_epoch()) continue;
    EXPECT_EQ(b->size(), batch_size);
    for (const char* field : {"image", "label"}) {
      auto f = b->field(field);
      EXPECT_TRUE(f.ok());
      if (f.ok()) {
        EXPECT_EQ(f->device, want) << field;
      }
    }
    if (!b->zero_copy()) ++gathered;
    out.indices.insert(out.indices.end(), b->indices().begin(), b->indices().end());
    cuda::DeviceGuard g(want.index);
    Result<int64_t> bad = testing::FormulaMismatches(*b, stream);
    EXPECT_TRUE(bad.ok()) << bad.status().ToString();
    EXPECT_EQ(bad.ok() ? *bad : -1, 0) << "batch " << seen << " of batch size " << batch_size;
    ++seen;
  }
  if (64 % batch_size != 0) {
    EXPECT_GT(gathered, 0) << "no batch spanned two slots";
  }
  out.batches = seen;
  out.gathered = gathered;
  return out;
}

// ReadAndCheck of each consumer at once, one thread each (they share one
// stream, so one that read ahead waits for the others).
std::vector<Seen> ReadTogether(const std::vector<Consumer*>& consumers, int batches,
                               const std::vector<Device>& want, uint32_t batch_size) {
  std::vector<Seen> seen(consumers.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < consumers.size(); ++i) {
    threads.emplace_back([&, i] {
      cuda::DeviceGuard on(want[i].index);  // the trainer's device
      seen[i] = ReadAndCheck(consumers[i], batches, want[i], batch_size);
    });
  }
  for (std::thread& t : threads) t.join();
  return seen;
}

// The samples two consumers read together.
std::set<int64_t> Union(const Seen& a, const Seen& b) {
  std::set<int64_t> both(a.indices.begin(), a.indices.end());
  both.insert(b.indices.begin(), b.indices.end());
  return both;
}

nlohmann::json ServerStats(const std::string& name) {
  auto stats = QueryStats(name, std::chrono::seconds(5));
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return stats.ok() ? nlohmann::json::parse(*stats) : nlohmann::json::object();
}

class MultiGpu : public ::testing::Test {
 protected:
  void SetUp() override { BC_REQUIRE_GPUS(2); }
  // Starts a server with a ring on each of cuda:0 and cuda:1 (synthetic
  // samples), named after `prefix`; its name, "" when it did not start.
  std::string StartTwoRings(const std::string& prefix) {
    const std::string name = UniqueName(prefix);
    server_ = StartServerProcess(BC_SERVER_BIN, name, SyntheticArgs("cuda:0,1"));
    return server_ ? name : "";
  }
  std::unique_ptr<testing::Process> server_;
};

// A server on cuda:0, the consumer's current device cuda:1, every batch
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

// A ring per GPU sharing one stream: each consumer gets every batch size
// right, zero-copy from its own GPU's ring and copied from the other's, with
// its fields on its own GPU; each batch was decoded once.
TEST_F(MultiGpu, TwoGpuServerReadsLocalZeroCopyAndCopiesFromThePeer) {
  const std::string name = UniqueName("twogpu");
  nlohmann::json st;
  auto server = StartServerProcess(BC_SERVER_BIN, name, SyntheticArgs("cuda:0,1"), "", &st);
  ASSERT_TRUE(server);
  EXPECT_EQ(st.value("device", ""), "cuda:0,1") << st.dump();
  for (uint32_t batch : {1u, 50u, 64u, 100u}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto on0 = Connect(name, batch, "cuda:0");
    auto on1 = Connect(name, batch, "cuda:1");
    ASSERT_TRUE(on0 && on1);
    EXPECT_EQ(on0->device(), Device::Cuda(0));
    EXPECT_EQ(on1->device(), Device::Cuda(1));
    EXPECT_NE(on0->consumer_id(), on1->consumer_id());
    const std::vector<Seen> seen =
        ReadTogether({on0.get(), on1.get()}, 20, {Device::Cuda(0), Device::Cuda(1)}, batch);
    // Both rings write the stream (the plan's first cycle takes them in
    // turn): each consumer copied some batches (20 batches of 50 or more
    // samples span producer batches of both rings).
    if (batch >= 50) {
      for (const Seen& s : seen) EXPECT_GT(s.gathered, 0);
    }
    EXPECT_EQ(seen[0].indices.size(), seen[1].indices.size());
  }
  // The current device picks the home ring when the consumer names none.
  {
    cuda::DeviceGuard on_1(1);
    auto c = Connect(name, 32, "");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->device(), Device::Cuda(1));
    ReadAndCheck(c.get(), 8, Device::Cuda(1), 32);
  }
  const nlohmann::json j = ServerStats(name);
  ASSERT_TRUE(j.contains("rings")) << j.dump();
  ASSERT_EQ(j["rings"].size(), 2u);
  EXPECT_EQ(j["rings"][0]["device"], "cuda:0");
  EXPECT_EQ(j["rings"][1]["device"], "cuda:1");
  for (const nlohmann::json& r : j["rings"]) {
    EXPECT_GT(r["samples_decoded"].get<uint64_t>(), 0u);
    EXPECT_GT(r["batches_local"].get<uint64_t>(), 0u);
    EXPECT_GT(r["batches_from_peers"].get<uint64_t>(), 0u);
    EXPECT_GT(r["peer_bytes"].get<uint64_t>(), 0u);
  }
  EXPECT_EQ(j["rings"][0]["samples_decoded"].get<uint64_t>() +
                j["rings"][1]["samples_decoded"].get<uint64_t>(),
            j["samples_published"].get<uint64_t>())
      << "each sample decoded once";
}

// A DDP job with a rank per GPU and B equal to the producer batch: one group
// over both GPUs, an exact split, and no byte moved between the GPUs.
TEST_F(MultiGpu, AGroupWithARankPerGpuReadsOnlyItsOwnRing) {
  const std::string name = StartTwoRings("gpugroup");
  ASSERT_FALSE(name.empty());
  auto r0 = Connect(name, 64, "cuda:0", {}, "ddp", 0, 2);
  auto r1 = Connect(name, 64, "cuda:1", {}, "ddp", 1, 2);
  ASSERT_TRUE(r0 && r1);
  const std::vector<Seen> seen =
      ReadTogether({r0.get(), r1.get()}, 20, {Device::Cuda(0), Device::Cuda(1)}, 64);
  EXPECT_EQ(seen[0].gathered, 0);
  EXPECT_EQ(seen[1].gathered, 0);
  EXPECT_EQ(Union(seen[0], seen[1]).size(), seen[0].indices.size() + seen[1].indices.size())
      << "ranks overlap";
  const nlohmann::json j = ServerStats(name);
  EXPECT_EQ(j["groups"].size(), 1u) << j.dump();
  EXPECT_EQ(j["rings"][0]["peer_bytes"], 0);
  EXPECT_EQ(j["rings"][1]["peer_bytes"], 0);
}

// Two DDP jobs over the same two GPUs: each gets the whole stream, from one decode.
TEST_F(MultiGpu, TwoGroupsShareOneDecode) {
  const std::string name = StartTwoRings("twogroups");
  ASSERT_FALSE(name.empty());
  auto a0 = Connect(name, 64, "cuda:0", {}, "a", 0, 2);
  auto a1 = Connect(name, 64, "cuda:1", {}, "a", 1, 2);
  auto b0 = Connect(name, 64, "cuda:0", {}, "b", 0, 2);
  auto b1 = Connect(name, 64, "cuda:1", {}, "b", 1, 2);
  ASSERT_TRUE(a0 && a1 && b0 && b1);
  const std::vector<Seen> seen =
      ReadTogether({a0.get(), a1.get(), b0.get(), b1.get()}, 16,
                   {Device::Cuda(0), Device::Cuda(1), Device::Cuda(0), Device::Cuda(1)}, 64);
  EXPECT_EQ(Union(seen[0], seen[1]), Union(seen[2], seen[3])) << "both jobs read the same stream";
  const nlohmann::json j = ServerStats(name);
  EXPECT_EQ(j["groups"].size(), 2u);
  EXPECT_LE(j["samples_published"].get<uint64_t>(), 2 * 16 * 64 + 8 * 64) << "decoded twice";
}

// min_consumers counts the server's consumers: 2 with one per GPU starts.
TEST_F(MultiGpu, MinConsumersCountsConsumersOnEveryGpu) {
  const std::string name = UniqueName("mingpu");
  std::vector<std::string> args = SyntheticArgs("cuda:0,1");
  args.back() = "2";  // --min-consumers 2
  auto server = StartServerProcess(BC_SERVER_BIN, name, args);
  ASSERT_TRUE(server);
  auto on0 = Connect(name, 64, "cuda:0");
  auto on1 = Connect(name, 64, "cuda:1");
  ASSERT_TRUE(on0 && on1);
  ReadTogether({on0.get(), on1.get()}, 10, {Device::Cuda(0), Device::Cuda(1)}, 64);
}

// A GPU whose ring has no consumer produces nothing.
TEST_F(MultiGpu, GpuWithoutConsumersStaysIdle) {
  const std::string name = StartTwoRings("idlegpu");
  ASSERT_FALSE(name.empty());
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
