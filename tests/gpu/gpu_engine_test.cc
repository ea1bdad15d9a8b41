// The sharing engine's end-to-end checks with the ring in CUDA memory
// (issue 4, checks 1 and 3): a batchcast-server process with --device cuda:0,
// consumers in separate processes (tests/e2e/bc_test_consumer) and in this process, every
// byte copied back to the host and checked against the synthetic formula.
// Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "../e2e/harness.h"
#include "batchcast/client/consumer.h"
#include "batchcast/cuda/kernels.h"
#include "batchcast/cuda/runtime.h"
#include "core/src/protocol.h"
#include "batchcast/core/runtime_dir.h"
#include "batchcast/core/sampler.h"
#include "batchcast/core/synthetic.h"
#include "batchcast/server/server.h"
#include "gpu_util.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using testing::HostBytes;
using testing::Process;
using testing::ReadJson;
using testing::TempDir;
using testing::UniqueName;
using Ms = std::chrono::milliseconds;

using testing::NowMs;
using testing::Stats;

// A server with its ring on cuda:0.
std::unique_ptr<Process> StartServer(const std::string& name, std::vector<std::string> extra,
                                     const std::string& log = "") {
  extra.insert(extra.begin(), {"--device", "cuda:0"});
  nlohmann::json st;
  auto p = testing::StartServerProcess(BC_SERVER_BIN, name, extra, log, &st);
  EXPECT_EQ(st.value("device", ""), "cuda:0") << st.dump();
  return p;
}

std::unique_ptr<Process> StartConsumer(const std::string& name, const std::string& out,
                                       std::vector<std::string> extra) {
  return testing::StartConsumerProcess(BC_GPU_CONSUMER_BIN, name, out, extra);
}

std::unique_ptr<Consumer> Connect(const std::string& name, uint32_t batch, JoinPolicy join,
                                  CudaStreamRef stream = {}) {
  return testing::ConnectConsumer(name, batch, join, 2, stream);
}

// Copies the batch to the host (on its delivery stream) and checks every byte.
bool BatchMatchesFormula(const Batch& b, CudaStreamRef stream = {}) {
  auto image = b.field("image");
  auto label = b.field("label");
  if (!image.ok() || !label.ok()) return false;
  EXPECT_EQ(image->device.kind, MemoryKind::kCuda);
  EXPECT_EQ(image->device.index, 0);
  EXPECT_EQ(label->device.kind, MemoryKind::kCuda);
  const std::vector<uint8_t> img = HostBytes(*image, stream);
  const std::vector<uint8_t> lab = HostBytes(*label, stream);
  const size_t per = image->bytes / b.size();
  for (size_t i = 0; i < b.size(); ++i) {
    const int64_t idx = b.indices()[i];
    if (synthetic::FirstMismatch(idx, {img.data() + i * per, per}) >= 0) return false;
    int64_t l;
    std::memcpy(&l, lab.data() + 8 * i, 8);
    if (l != synthetic::Label(idx)) return false;
  }
  return true;
}

struct Record {
  double t;
  uint64_t end;
};

void ReadBatches(Consumer* c, int batches, Ms sleep, std::vector<Record>* out, std::mutex* mu,
                 Status* error = nullptr, bool verify = true) {
  for (int i = 0; i < batches;) {
    auto b = c->Next();
    if (!b.ok()) {
      if (error) *error = b.status();
      return;
    }
    if (b->end_of_epoch()) continue;
    if (verify) EXPECT_TRUE(BatchMatchesFormula(*b));
    {
      std::lock_guard lock(*mu);
      out->push_back({NowMs(), b->first_seq() + b->size()});
    }
    ++i;
    if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
  }
}

// 1. Exactly once, three batch sizes (zero-copy and gathered batches), three
// consumer processes each on its own CUDA stream.
TEST(GpuEngine, ExactlyOnceThreeProcesses) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("gonce");
  const std::string dir = TempDir();
  auto server = StartServer(name, {"--synthetic", "1000", "--size", "16", "--batch-size", "64",
                                   "--window", "4", "--min-consumers", "3", "--epochs", "2",
                                   "--seed", "7"});
  std::vector<uint32_t> sizes = {32, 48, 100};
  std::vector<std::unique_ptr<Process>> consumers;
  for (uint32_t b : sizes) {
    consumers.push_back(StartConsumer(name, dir + "/c" + std::to_string(b) + ".json",
                                      {"--batch-size", std::to_string(b), "--join", "next_epoch",
                                       "--epochs", "2", "--no-drop-last"}));
  }
  auto sampler = Sampler::Make(1000, SamplerOptions{7, true, 0, 1});
  ASSERT_TRUE(sampler.ok());
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int rc = consumers[k]->Wait(120s);
    nlohmann::json r = ReadJson(dir + "/c" + std::to_string(sizes[k]) + ".json");
    ASSERT_EQ(rc, 0) << "consumer " << sizes[k] << ": " << r.dump().substr(0, 2000);
    ASSERT_FALSE(r.contains("error")) << r["error"];
    EXPECT_EQ(r["mismatches"], 0) << "bytes differ from the formula";
    EXPECT_EQ(r["cuda_errors"], 0);
    EXPECT_EQ(r["device"], 0);
    ASSERT_EQ(r["epochs"].size(), 2u);
    for (uint64_t e = 0; e < 2; ++e) {
      std::vector<int64_t> got = r["epochs"][e].get<std::vector<int64_t>>();
      EXPECT_EQ(got, sampler->EpochOrder(e)) << "batch " << sizes[k] << " epoch " << e;
    }
    if (sizes[k] != 32) EXPECT_GT(r["gathered"].get<int>(), 0) << "no multi-slot batch tested";
    if (sizes[k] <= 64) EXPECT_GT(r["zero_copy"].get<int>(), 0);
  }
  EXPECT_EQ(server->Wait(20s), 0);
}

// 2a. block: the fastest never gets more than `window` slots ahead of the slowest.
TEST(GpuEngine, WindowBoundsTheFastestUnderBlock) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("gwindow");
  const int window = 4, producer_batch = 16, slow_batch = 16;
  auto server = StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size",
                                   std::to_string(producer_batch), "--window",
                                   std::to_string(window), "--min-consumers", "2"});
  auto fast = Connect(name, 16, JoinPolicy::kImmediate);
  auto slow = Connect(name, slow_batch, JoinPolicy::kImmediate);
  ASSERT_TRUE(fast && slow);
  std::mutex mu;
  std::vector<Record> f, s;
  std::thread tf(ReadBatches, fast.get(), 150, 0ms, &f, &mu, nullptr, true);
  std::thread ts(ReadBatches, slow.get(), 40, 10ms, &s, &mu, nullptr, true);
  ts.join();
  slow.reset();
  tf.join();
  const uint64_t bound = uint64_t{window} * producer_batch + 3 * slow_batch;
  uint64_t worst = 0;
  for (const Record& r : f) {
    if (s.empty() || r.t > s.back().t) break;
    uint64_t slow_end = 0;
    for (const Record& q : s) {
      if (q.t <= r.t) slow_end = q.end;
    }
    if (r.end > slow_end) worst = std::max(worst, r.end - slow_end);
  }
  EXPECT_LE(worst, bound) << "fast consumer ran ahead of the window";
  EXPECT_GT(worst, 0u);
}

// 2b. skip and evict.
TEST(GpuEngine, SkipAndEvictPolicies) {
  BC_REQUIRE_GPU();
  {
    const std::string name = UniqueName("gskip");
    auto server = StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size", "16",
                                     "--window", "8", "--min-consumers", "2", "--lag-policy",
                                     "skip", "--lag-timeout", "0.2"});
    auto fast = Connect(name, 16, JoinPolicy::kImmediate);
    auto slow = Connect(name, 16, JoinPolicy::kImmediate);
    ASSERT_TRUE(fast && slow);
    std::mutex mu;
    std::vector<Record> f;
    std::atomic<uint64_t> slow_skipped{0};
    std::thread ts([&] {
      for (int i = 0; i < 4; ++i) {
        auto b = slow->Next();
        ASSERT_TRUE(b.ok()) << b.status().ToString();
        if (b->end_of_epoch()) continue;
        EXPECT_TRUE(BatchMatchesFormula(*b));
        slow_skipped = b->skipped();
        std::this_thread::sleep_for(600ms);
      }
    });
    ReadBatches(fast.get(), 300, 1ms, &f, &mu);
    ts.join();
    double max_gap = 0;
    for (size_t i = 1; i < f.size(); ++i) max_gap = std::max(max_gap, f[i].t - f[i - 1].t);
    EXPECT_LT(max_gap, 600) << "the fast consumer was held past lag_timeout";
    EXPECT_GT(slow_skipped.load(), 0u);
    EXPECT_GT(Stats(name)["skip_events"].get<int>(), 0);
  }
  {
    const std::string name = UniqueName("gevict");
    auto server = StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size", "16",
                                     "--window", "4", "--min-consumers", "2", "--lag-policy",
                                     "evict", "--lag-timeout", "0.2"});
    auto fast = Connect(name, 16, JoinPolicy::kImmediate);
    auto slow = Connect(name, 16, JoinPolicy::kImmediate);
    ASSERT_TRUE(fast && slow);
    auto first = slow->Next();
    ASSERT_TRUE(first.ok());
    first = Batch();
    std::mutex mu;
    std::vector<Record> f;
    ReadBatches(fast.get(), 200, 0ms, &f, &mu);
    EXPECT_EQ(f.size(), 200u);
    Status error;
    for (int i = 0; i < 20 && error.ok(); ++i) {
      auto b = slow->Next();
      if (!b.ok()) error = b.status();
    }
    ASSERT_FALSE(error.ok());
    EXPECT_EQ(error.code(), StatusCode::kResourceExhausted) << error.ToString();
  }
}

// 3. Leases: a held batch never changes, seen by host copies (block: the holder
// keeps reading; skip: it stops reading).
TEST(GpuEngine, HeldBatchNeverChanges) {
  BC_REQUIRE_GPU();
  for (const char* policy : {"block", "skip"}) {
    SCOPED_TRACE(policy);
    const std::string name = UniqueName("glease");
    auto server = StartServer(name, {"--synthetic", "100000", "--size", "16", "--batch-size",
                                     "16", "--window", "4", "--min-consumers", "2",
                                     "--lag-policy", policy, "--lag-timeout", "0.1"});
    auto holder = Connect(name, 16, JoinPolicy::kImmediate);
    auto other = Connect(name, 16, JoinPolicy::kImmediate);
    ASSERT_TRUE(holder && other);
    auto held = holder->Next();
    ASSERT_TRUE(held.ok());
    ASSERT_TRUE(held->zero_copy());
    auto image = held->field("image");
    ASSERT_TRUE(image.ok());
    const std::vector<uint8_t> copy = HostBytes(*image);
    std::atomic<bool> done{false};
    std::mutex mu;
    std::vector<Record> o;
    std::thread t([&] {
      ReadBatches(other.get(), 400, 0ms, &o, &mu);
      done = true;
    });
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < until && !done) {
      if (std::string(policy) == "block") {
        auto b = holder->Next();
        ASSERT_TRUE(b.ok());
      } else {
        std::this_thread::sleep_for(10ms);
      }
      ASSERT_EQ(copy, HostBytes(*image)) << "held batch changed";
    }
    t.join();
    EXPECT_EQ(o.size(), 400u);
    EXPECT_GT(o.back().end, 4u * 16 * 4) << "the others did not run far past the held slot";
    EXPECT_TRUE(BatchMatchesFormula(*held));
  }
}

// Issue 4, check 3: a consumer that holds a batch and keeps launching a
// checksum kernel on its own stream that reads it never sees it change while
// the producer and another consumer run far ahead.
TEST(GpuEngine, ChecksumKernelOnHeldBatchNeverChanges) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("gcheck");
  auto server = StartServer(name, {"--synthetic", "100000", "--size", "32", "--batch-size", "16",
                                   "--window", "4", "--min-consumers", "2"});
  auto stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const CudaStreamRef s = stream->ref();
  auto holder = Connect(name, 16, JoinPolicy::kImmediate, s);
  auto other = Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(holder && other);
  auto held = holder->Next();
  ASSERT_TRUE(held.ok());
  auto image = held->field("image");
  ASSERT_TRUE(image.ok());
  constexpr int kReads = 200;
  auto sums = cuda::DeviceBuffer::Create(0, sizeof(uint64_t) * kReads);
  ASSERT_TRUE(sums.ok());
  auto* dev_sums = reinterpret_cast<uint64_t*>(sums->data());
  // The expected value, from the formula.
  std::vector<uint8_t> expect(image->bytes);
  const size_t per = image->bytes / held->size();
  for (size_t i = 0; i < held->size(); ++i) {
    synthetic::FillImage(held->indices()[i], {expect.data() + i * per, per});
  }
  const uint64_t want = cuda::HostChecksum(expect.data(), expect.size());
  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<Record> o;
  std::thread t([&] {
    ReadBatches(other.get(), 400, 0ms, &o, &mu, nullptr, /*verify=*/false);
    done = true;
  });
  int launched = 0;
  while (!done) {
    // The holder keeps reading too (block policy: otherwise its cursor stops
    // the others), its other batches on the same stream.
    auto b = holder->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (launched < kReads) {
      ASSERT_TRUE(cuda::SpinAsync(200, s).ok());
      ASSERT_TRUE(cuda::ChecksumAsync(image->data, image->bytes, dev_sums + launched, s).ok());
      ++launched;
    }
  }
  t.join();
  ASSERT_GT(launched, 100) << "too few reads overlapped the others";
  std::vector<uint64_t> got(kReads);
  ASSERT_TRUE(cuda::CopyAsync(got.data(), dev_sums, sizeof(uint64_t) * kReads, s).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  for (int k = 0; k < launched; ++k) ASSERT_EQ(got[k], want) << "read " << k << " saw other bytes";
  EXPECT_EQ(o.size(), 400u);
  EXPECT_GT(o.back().end, 4u * 16 * 4);
}

// Leases end only after the GPU work queued on the consumer's stream: a batch
// dropped (and its consumer gone) while kernels that read it are still queued
// keeps its slot until they complete.
TEST(GpuEngine, LeaseOutlivesBatchUntilQueuedKernelsComplete) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("gqueued");
  auto server = StartServer(name, {"--synthetic", "100000", "--size", "32", "--batch-size", "16",
                                   "--window", "4", "--min-consumers", "1"});
  auto stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok());
  const CudaStreamRef s = stream->ref();
  auto other = Connect(name, 16, JoinPolicy::kImmediate);
  auto holder = Connect(name, 16, JoinPolicy::kImmediate, s);
  ASSERT_TRUE(holder && other);
  auto held = holder->Next();
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(held->zero_copy());
  auto image = held->field("image");
  ASSERT_TRUE(image.ok());
  const std::vector<uint8_t> before = HostBytes(*image, s);
  const uint64_t want = cuda::HostChecksum(before.data(), before.size());
  constexpr int kReads = 20;
  auto sums = cuda::DeviceBuffer::Create(0, sizeof(uint64_t) * kReads);
  ASSERT_TRUE(sums.ok());
  auto* dev_sums = reinterpret_cast<uint64_t*>(sums->data());
  // ~1 s of queued reads of the batch.
  for (int k = 0; k < kReads; ++k) {
    ASSERT_TRUE(cuda::SpinAsync(50000, s).ok());
    ASSERT_TRUE(cuda::ChecksumAsync(image->data, image->bytes, dev_sums + k, s).ok());
  }
  std::mutex mu;
  std::vector<Record> o;
  std::thread t([&] { ReadBatches(other.get(), 300, 0ms, &o, &mu, nullptr, false); });
  std::this_thread::sleep_for(50ms);
  const double dropped = NowMs();
  holder.reset();  // BYE: the held batch's lease stays
  held = Batch();  // its lease ends once the reads above are done
  const double drop_took = NowMs() - dropped;
  t.join();
  std::vector<uint64_t> got(kReads);
  ASSERT_TRUE(cuda::Copy(got.data(), dev_sums, sizeof(uint64_t) * kReads).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  for (int k = 0; k < kReads; ++k) ASSERT_EQ(got[k], want) << "read " << k << " saw other bytes";
  EXPECT_EQ(o.size(), 300u);
  // The last holder of the connection waits for the queued work at teardown.
  RecordProperty("drop_ms", std::to_string(drop_took));
  other.reset();
  std::this_thread::sleep_for(200ms);
  auto st = Stats(name);
  EXPECT_EQ(st["slots"]["leased"].get<int>(), 0) << st.dump();
}

// 4. Late join with immediate.
TEST(GpuEngine, LateImmediateJoin) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("glate");
  auto server = StartServer(name, {"--synthetic", "640", "--size", "8", "--batch-size", "32",
                                   "--window", "4"});
  auto first = Connect(name, 32, JoinPolicy::kImmediate);
  ASSERT_TRUE(first);
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop) {
      auto b = first->Next();
      if (!b.ok()) return;
      std::this_thread::sleep_for(1ms);
    }
  });
  std::this_thread::sleep_for(300ms);
  auto late = Connect(name, 40, JoinPolicy::kImmediate);
  ASSERT_TRUE(late);
  uint64_t batches = 0;
  while (true) {
    auto n = late->Next();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (n->end_of_epoch()) break;
    EXPECT_TRUE(BatchMatchesFormula(*n));
    ++batches;
  }
  EXPECT_EQ(batches, late->batches_per_epoch());
  stop = true;
  t.join();
}

// 5a. kill -9 of a consumer process holding a device batch.
TEST(GpuEngine, KilledConsumerIsReclaimed) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("gkillc");
  const std::string dir = TempDir();
  auto server = StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size", "16",
                                   "--window", "4", "--min-consumers", "2"});
  auto victim = StartConsumer(name, dir + "/victim.json",
                              {"--batch-size", "16", "--hold-at", "3", "--hold-ms", "60000",
                               "--epochs", "1000"});
  auto survivor = Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(survivor);
  std::mutex mu;
  std::vector<Record> before;
  ReadBatches(survivor.get(), 2, 0ms, &before, &mu);
  ASSERT_TRUE(victim->WaitForLine("HOLDING", 20s));
  victim->Kill(SIGKILL);
  const double killed = NowMs();
  std::vector<Record> after;
  ReadBatches(survivor.get(), 50, 0ms, &after, &mu);
  ASSERT_EQ(after.size(), 50u);
  EXPECT_LT(after.front().t - killed, 2000) << "survivor resumed too late";
  auto st = Stats(name);
  EXPECT_EQ(st["consumers_lost"].get<int>(), 1);
  survivor.reset();
  std::this_thread::sleep_for(200ms);
  st = Stats(name);
  EXPECT_EQ(st["slots"]["leased"].get<int>(), 0) << st.dump();
}

// 5b/c. kill -9 of the server: consumer processes fail within 2 s; a restarted
// server (new device allocation, new handles) serves again.
TEST(GpuEngine, KilledServerFailsConsumersAndRestarts) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("gkills");
  const std::string dir = TempDir();
  auto server = StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size", "16",
                                   "--window", "4", "--min-consumers", "2"});
  std::vector<std::unique_ptr<Process>> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.push_back(StartConsumer(name, dir + "/c" + std::to_string(i) + ".json",
                                      {"--batch-size", "16", "--epochs", "100000", "--sleep-ms",
                                       "2"}));
  }
  ASSERT_TRUE(consumers[0]->WaitForLine("READY", 20s));
  ASSERT_TRUE(consumers[1]->WaitForLine("READY", 20s));
  server->Kill(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  for (auto& c : consumers) EXPECT_EQ(c->Wait(10s), 4) << "consumer did not fail";
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 3000ms);
  for (int i = 0; i < 2; ++i) {
    auto r = ReadJson(dir + "/c" + std::to_string(i) + ".json");
    EXPECT_EQ(r["error_code"], "Unavailable") << r.dump();
    EXPECT_EQ(r["mismatches"], 0);
    EXPECT_EQ(r["cuda_errors"], 0);
  }
  auto again = StartServer(name, {"--synthetic", "1000", "--size", "8", "--batch-size", "16",
                                  "--window", "4"});
  auto c = Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(c);
  auto b = c->Next();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(BatchMatchesFormula(*b));
}

// 6. Hostile peers do not disturb a device-ring server.
TEST(GpuEngine, HostilePeersDoNotDisturbOthers) {
  BC_REQUIRE_GPU();
  const std::string name = UniqueName("ghostile");
  auto server = StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size", "16",
                                   "--window", "8", "--max-leases", "4"});
  auto good = Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(good);
  std::mutex mu;
  std::vector<Record> got;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop) {
      auto b = good->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (b->end_of_epoch()) continue;
      ASSERT_TRUE(BatchMatchesFormula(*b));
      std::lock_guard lock(mu);
      got.push_back({NowMs(), b->first_seq() + b->size()});
    }
  });
  auto endpoint = ResolveEndpoint(name);
  ASSERT_TRUE(endpoint.ok());
  zmq::context_t ctx;
  std::mt19937 rng(42);
  {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(*endpoint);
    for (int i = 0; i < 300; ++i) {
      std::string r(rng() % 200, '\0');
      for (char& ch : r) ch = static_cast<char>(rng());
      if (i % 2 == 0 && r.size() >= 6) {
        r[0] = 'B';
        r[1] = 'C';
        r[2] = 1;
        r[3] = 0;
        r[4] = static_cast<char>(1 + rng() % 11);
      }
      s.send(zmq::buffer(r), zmq::send_flags::dontwait);
    }
    std::this_thread::sleep_for(300ms);
  }
  {
    // Takes batches, never releases nor heartbeats: dropped after the timeout.
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(*endpoint);
    s.send(zmq::buffer(proto::Encode(
               proto::Hello{"hostile", 1, 16, true, JoinPolicy::kImmediate, 2, ""})),
           zmq::send_flags::dontwait);
    for (uint64_t i = 1; i <= 20; ++i) {
      s.send(zmq::buffer(proto::Encode(proto::Next{i})), zmq::send_flags::dontwait);
    }
    std::this_thread::sleep_for(3500ms);
  }
  stop = true;
  reader.join();
  ASSERT_FALSE(got.empty());
  double max_gap = 0;
  for (size_t i = 1; i < got.size(); ++i) max_gap = std::max(max_gap, got[i].t - got[i - 1].t);
  EXPECT_LT(max_gap, 2600) << "the good consumer was stalled";
  auto st = Stats(name);
  EXPECT_EQ(st["consumers_lost"].get<int>(), 1);
}

// An external producer writing device slots (what batchcast.Producer does with
// device="cuda:0"): CommitBatch records the slot event on its stream.
TEST(GpuEngine, ExternalProducerOnDevice) {
  BC_REQUIRE_GPU();
  ServerOptions o;
  o.name = UniqueName("gexternal");
  o.batch_size = 10;
  o.window = 4;
  o.source.device = Device::Cuda(0);
  std::vector<FieldSpec> fields = {{"x", DType::kInt64, {2}, MemoryKind::kHost}};
  auto server = Server::StartExternal(o, fields, 25);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto pstream = cuda::Stream::Create(0);
  ASSERT_TRUE(pstream.ok());
  std::thread producer([&] {
    std::vector<int64_t> host(20);
    for (uint32_t epoch = 0; epoch < 2; ++epoch) {
      for (int64_t off = 0; off < 25; off += 10) {
        std::vector<int64_t> idx;
        for (int64_t i = off; i < std::min<int64_t>(25, off + 10); ++i) idx.push_back(i);
        auto slot = (*server)->BeginBatch(epoch, idx, 10s);
        ASSERT_TRUE(slot.ok()) << slot.status().ToString();
        ASSERT_EQ(slot->device.kind, MemoryKind::kCuda);
        for (size_t i = 0; i < idx.size(); ++i) {
          host[2 * i] = idx[i];
          host[2 * i + 1] = epoch;
        }
        ASSERT_TRUE(cuda::CopyAsync(slot->field_data[0], host.data(), idx.size() * 16,
                                    pstream->ref())
                        .ok());
        ASSERT_TRUE(pstream->Synchronize().ok());  // `host` is reused
        ASSERT_TRUE((*server)->CommitBatch(*slot, pstream->ref()).ok());
      }
    }
    (*server)->EndStream();
  });
  // A consumer in the server's process maps the ring without CUDA IPC.
  auto c = Connect(o.name, 5, JoinPolicy::kNextEpoch);
  ASSERT_TRUE(c);
  for (int epoch = 0; epoch < 2; ++epoch) {
    int64_t expect = 0;
    while (true) {
      auto b = c->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (b->end_of_epoch()) break;
      auto x = b->field("x");
      ASSERT_TRUE(x.ok());
      ASSERT_EQ(x->device.kind, MemoryKind::kCuda);
      std::vector<uint8_t> bytes = HostBytes(*x);
      const auto* v = reinterpret_cast<const int64_t*>(bytes.data());
      for (size_t i = 0; i < b->size(); ++i) {
        EXPECT_EQ(v[2 * i], expect++);
        EXPECT_EQ(v[2 * i + 1], epoch);
      }
    }
    EXPECT_EQ(expect, 25);
  }
  producer.join();
  c.reset();
  EXPECT_TRUE((*server)->WaitFor(5s));
}

}  // namespace
}  // namespace batchcast
