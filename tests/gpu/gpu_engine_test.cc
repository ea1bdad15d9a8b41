// The end-to-end checks only a device ring has: kernels on
// a consumer's own stream that read a held batch, and leases that end only
// after the GPU work queued on that stream. The scenarios every ring shares
// run once per ring device in tests/e2e/engine_test.cc (Ring/Engine.*/cuda0).
// Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "../e2e/ring_device.h"
#include "batchcast/client/consumer.h"
#include "batchcast/cuda/kernels.h"
#include "batchcast/cuda/runtime.h"
#include "core/src/synthetic.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using testing::NowMs;
using testing::Record;
using testing::Stats;
using testing::UniqueName;

class GpuEngine : public ::testing::Test {
 protected:
  void SetUp() override { BC_REQUIRE_GPU(); }
  const testing::Ring ring_{Device::Cuda(0)};
};

// A consumer that holds a batch and keeps launching a
// checksum kernel on its own stream that reads it never sees it change while
// the producer and another consumer run far ahead.
TEST_F(GpuEngine, ChecksumKernelOnHeldBatchNeverChanges) {
  const std::string name = UniqueName("gcheck");
  auto server = ring_.StartServer(name, {"--synthetic", "100000", "--size", "32", "--batch-size",
                                         "16", "--window", "4", "--min-consumers", "2"});
  auto stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const CudaStreamRef s = stream->ref();
  auto holder = ring_.Connect(name, 16, JoinPolicy::kImmediate, 2, s);
  auto other = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(holder && other);
  Batch held;
  FieldView image;
  ASSERT_NO_FATAL_FAILURE(ring_.HoldNext(holder.get(), &held, &image));
  constexpr int kReads = 200;
  auto sums = cuda::DeviceBuffer::Create(0, sizeof(uint64_t) * kReads);
  ASSERT_TRUE(sums.ok());
  auto* dev_sums = reinterpret_cast<uint64_t*>(sums->data());
  // The expected value, from the formula.
  std::vector<uint8_t> expect(image.bytes);
  const size_t per = image.bytes / held.size();
  for (size_t i = 0; i < held.size(); ++i) {
    synthetic::FillImage(held.indices()[i], {expect.data() + i * per, per});
  }
  const uint64_t want = cuda::HostChecksum(expect.data(), expect.size());
  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<Record> o;
  std::thread t([&] {
    ring_.ReadBatches(other.get(), 400, 0ms, &o, &mu, nullptr, /*verify=*/false);
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
      ASSERT_TRUE(cuda::ChecksumAsync(image.data, image.bytes, dev_sums + launched, s).ok());
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
TEST_F(GpuEngine, LeaseOutlivesBatchUntilQueuedKernelsComplete) {
  const std::string name = UniqueName("gqueued");
  auto server = ring_.StartServer(name, {"--synthetic", "100000", "--size", "32", "--batch-size",
                                         "16", "--window", "4", "--min-consumers", "1"});
  auto stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok());
  const CudaStreamRef s = stream->ref();
  auto other = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  auto holder = ring_.Connect(name, 16, JoinPolicy::kImmediate, 2, s);
  ASSERT_TRUE(holder && other);
  Batch held;
  FieldView image;
  ASSERT_NO_FATAL_FAILURE(ring_.HoldNext(holder.get(), &held, &image));
  const std::vector<uint8_t> before = testing::HostBytes(image, s);
  const uint64_t want = cuda::HostChecksum(before.data(), before.size());
  constexpr int kReads = 20;
  auto sums = cuda::DeviceBuffer::Create(0, sizeof(uint64_t) * kReads);
  ASSERT_TRUE(sums.ok());
  auto* dev_sums = reinterpret_cast<uint64_t*>(sums->data());
  // ~1 s of queued reads of the batch.
  for (int k = 0; k < kReads; ++k) {
    ASSERT_TRUE(cuda::SpinAsync(50000, s).ok());
    ASSERT_TRUE(cuda::ChecksumAsync(image.data, image.bytes, dev_sums + k, s).ok());
  }
  std::mutex mu;
  std::vector<Record> o;
  std::thread t([&] { ring_.ReadBatches(other.get(), 300, 0ms, &o, &mu, nullptr, false); });
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

// Note [Server stream priority]: a high-priority stream gets the device's
// greatest priority (CUDA: lower numbers are higher), a normal one the default.
TEST_F(GpuEngine, HighPriorityStreamHasTheGreatestPriority) {
  auto normal = cuda::Stream::Create(0);
  auto high = cuda::Stream::Create(0, StreamPriority::kHigh);
  ASSERT_TRUE(normal.ok() && high.ok()) << high.status().ToString();
  auto p_normal = normal->Priority();
  auto p_high = high->Priority();
  ASSERT_TRUE(p_normal.ok() && p_high.ok()) << p_high.status().ToString();
  EXPECT_EQ(*p_normal, 0);
  EXPECT_LT(*p_high, *p_normal) << "an H100 offers priorities below 0";
}

// A server whose GPU work runs on high-priority streams (--gpu-priority high)
// serves the same samples: every batch of a consumer matches the formula.
TEST_F(GpuEngine, HighPriorityServerServesTheFormula) {
  const std::string name = UniqueName("gprio");
  auto server = ring_.StartServer(name, {"--synthetic", "1000", "--size", "32", "--batch-size",
                                         "16", "--window", "4", "--gpu-priority", "high"});
  auto consumer = ring_.Connect(name, 24, JoinPolicy::kImmediate);
  ASSERT_TRUE(consumer);
  for (int i = 0; i < 30; ++i) {
    auto b = consumer->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (b->end_of_epoch()) continue;
    ASSERT_TRUE(ring_.BatchMatchesFormula(*b)) << "batch " << i;
  }
}

}  // namespace
}  // namespace batchcast
