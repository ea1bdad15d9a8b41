// RunSplitDecode (sources/src/split_decode.h, Note [Concurrent fallback
// decode]) with a fake hardware decoder: the fallback decodes run while the
// hardware batch is in flight, every sample is decoded exactly once, a
// refused batch goes to the CPU, and the kept samples stay in order. No GPU,
// no sleeps: overlap is shown by the fake hardware waiting for the fallback
// work (with a deadline that only a regression reaches).
#include "sources/src/split_decode.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <numeric>
#include <set>
#include <vector>

namespace batchcast {
namespace {

using namespace std::chrono_literals;

// Samples i with hw[i] go to the engine; bad ones are dropped by Route.
class FakeOps : public SplitDecodeOps {
 public:
  FakeOps(std::vector<bool> hw, std::set<size_t> bad)
      : hw_(std::move(hw)),
        bad_(std::move(bad)),
        samples_(hw_.size()),
        routes_(hw_.size()),
        modes_(hw_.size()) {}

  bool HardwareCandidate(size_t i) const override { return hw_[i]; }
  Status Route(int, size_t i, RouteFor mode) override {
    routes_[i].fetch_add(1);
    modes_[i] = mode;
    GpuSample& s = samples_[i];
    const bool force_cpu = mode == RouteFor::kForceCpu;
    if (bad_.count(i) != 0) {
      s.route = DecodeRoute::kDropped;
    } else if (hw_[i] && !force_cpu) {
      s.route = DecodeRoute::kNvJpeg;  // read only
    } else if (mode == RouteFor::kHardware && transcodable.count(i) != 0) {
      s.route = DecodeRoute::kNvJpeg;  // transcoded: joins the hardware batch
    } else {
      s.route = DecodeRoute::kCpuCropped;  // a CPU decode
      std::unique_lock l(mu_);
      // With wait_for_cpu, a CPU decode also waits for the hardware call to
      // be in flight: a handshake that only concurrent work completes.
      if (wait_for_cpu > 0) cv_.wait_for(l, 10s, [&] { return hw_in_flight_.load(); });
      if (hw_in_flight_.load()) ++overlapped_;
      ++cpu_done_;
      cv_.notify_all();
    }
    return Status::Ok();
  }
  // "Takes time": returns once `wait_for_cpu` fallback decodes are done (or
  // after a deadline a regression would reach), so that the fallback work
  // must run while it is in flight.
  Status DecodeHardware(std::span<const size_t> ids) override {
    hw_batches_.push_back(std::vector<size_t>(ids.begin(), ids.end()));
    if (during_hw) during_hw();
    {
      std::unique_lock l(mu_);
      hw_in_flight_ = true;
      cv_.notify_all();
      waited_out_ = !cv_.wait_for(l, 10s, [&] { return cpu_done_ >= wait_for_cpu; });
      hw_in_flight_ = false;
    }
    for (size_t i : ids) {
      if (refuse.count(i) != 0) return DataLossError("refused file " + std::to_string(i));
    }
    return Status::Ok();
  }
  const GpuSample& sample(size_t i) const override { return samples_[i]; }

  std::set<size_t> refuse;        // a batch with one of these is refused (DataLoss)
  std::set<size_t> transcodable;  // CPU files that join the hardware batch when they can
  int wait_for_cpu = 0;
  std::function<void()> during_hw;  // runs inside the hardware call

  // Waits (with a deadline only a regression reaches) until `n` CPU decodes
  // of this batch are done; false on the deadline.
  bool WaitForCpuDecodes(int n) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, 10s, [&] { return cpu_done_ >= n; });
  }

  std::vector<bool> hw_;
  std::set<size_t> bad_;
  std::vector<GpuSample> samples_;
  std::vector<std::atomic<int>> routes_;
  std::vector<RouteFor> modes_;  // the last Route's mode per sample
  std::vector<std::vector<size_t>> hw_batches_;
  std::atomic<bool> hw_in_flight_{false};
  std::atomic<int> overlapped_{0};
  bool waited_out_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  int cpu_done_ = 0;
};

// FakeOps whose sample 4 fails to route (a bad file with on_error=fail).
class FailingRoute : public FakeOps {
 public:
  using FakeOps::FakeOps;
  Status Route(int w, size_t i, RouteFor f) override {
    if (i == 4) return DataLossError("bad file, on_error=fail");
    return FakeOps::Route(w, i, f);
  }
};

// 16 samples, every 4th (0, 4, 8, 12) refused by the scan: CPU.
std::vector<bool> EveryFourthOnCpu(size_t n) {
  std::vector<bool> hw(n);
  for (size_t i = 0; i < n; ++i) hw[i] = i % 4 != 0;
  return hw;
}

TEST(SplitDecode, FallbackDecodesRunWhileTheHardwareBatchIsInFlight) {
  ThreadPool pool(3);  // the pipeline thread + 2 fallback decoders
  FakeOps ops(EveryFourthOnCpu(16), {});
  ops.wait_for_cpu = 4;  // the hardware returns only once all 4 CPU decodes are done
  StageTimes times({{"read", 3}, {"hw_decode", 1}, {"fallback_decode", 3}});
  auto r = RunSplitDecode(pool, 16, ops, &times);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The hardware call returned only after all 4 CPU decodes were done: they
  // ran beside it (the helpers start with it), not after it.
  EXPECT_FALSE(ops.waited_out_) << "the fallback decodes did not run beside the hardware batch";
  EXPECT_EQ(ops.overlapped_.load(), 4);
  EXPECT_EQ(r->hw_decoded, 12u);
  EXPECT_EQ(r->cpu_decoded, 4u);
  EXPECT_FALSE(r->hw_refused);
  ASSERT_EQ(ops.hw_batches_.size(), 1u);
  EXPECT_EQ(ops.hw_batches_[0], (std::vector<size_t>{1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15}))
      << "the hardware batch keeps the batch's order";
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(ops.routes_[i].load(), 1) << "sample " << i;
  // Stage times: hw_decode was timed (the injected clock is real here, so
  // only their presence and sign are checked).
  for (const StageTime& t : times.Read()) EXPECT_GE(t.seconds, 0) << t.name;
}

// A refused hardware batch: its samples are decoded on the CPU (once more,
// with force_cpu), the others are not touched again; dropped samples leave
// holes and the kept ones stay in order.
TEST(SplitDecode, RefusedBatchGoesToTheCpuAndOrderIsKept) {
  ThreadPool pool(3);
  FakeOps ops(EveryFourthOnCpu(16), /*bad=*/{4, 9});
  ops.refuse = {6};
  auto r = RunSplitDecode(pool, 16, ops, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->hw_refused);
  EXPECT_EQ(r->hw_error.code(), StatusCode::kDataLoss);
  EXPECT_EQ(r->hw_decoded, 0u);
  // 9 is dropped at its read (phase 1); hardware candidates 1 2 3 5 6 7 10
  // 11 13 14 15 go to the CPU; 0 8 12 are CPU files; 4 is dropped.
  EXPECT_EQ(r->cpu_decoded, 14u);
  for (size_t i = 0; i < 16; ++i) {
    const bool rerouted = i % 4 != 0 && i != 9;
    EXPECT_EQ(ops.routes_[i].load(), rerouted ? 2 : 1) << "sample " << i;
  }
  const std::vector<size_t> kept = KeepInOrder(ops.samples_);
  EXPECT_EQ(kept, (std::vector<size_t>{0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15}));
}

// One pool thread: no overlap is possible, but the result is the same (the
// fallback decodes run after the hardware submission).
TEST(SplitDecode, OneThreadRunsTheSameWorkInTurn) {
  ThreadPool pool(1);
  FakeOps ops(EveryFourthOnCpu(8), {});
  auto r = RunSplitDecode(pool, 8, ops, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hw_decoded, 6u);
  EXPECT_EQ(r->cpu_decoded, 2u);
  EXPECT_EQ(ops.overlapped_.load(), 0);
}

// The fallback decodes start with the costliest (one thread: in that order;
// equal costs in the batch's order); where the samples go does not change.
TEST(SplitDecode, FallbackStartsWithTheCostliest) {
  class Costed : public FakeOps {
   public:
    using FakeOps::FakeOps;
    uint64_t FallbackCost(size_t i) const override { return i == 3 ? 1 : (i == 5 ? 9 : 4); }
    Status Route(int w, size_t i, RouteFor f) override {
      if (!hw_[i]) order.push_back(i);
      return FakeOps::Route(w, i, f);
    }
    std::vector<size_t> order;
  } ops(std::vector<bool>{true, false, true, false, false, false}, {});
  ThreadPool pool(1);
  auto r = RunSplitDecode(pool, 6, ops, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ops.order, (std::vector<size_t>{5, 1, 4, 3}));
  EXPECT_EQ(KeepInOrder(ops.samples_), (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
}

// Only CPU files, or only hardware files: no empty hardware batch is sent.
TEST(SplitDecode, NoEmptyHardwareBatch) {
  ThreadPool pool(2);
  FakeOps cpu_only(std::vector<bool>(5, false), {});
  ASSERT_TRUE(RunSplitDecode(pool, 5, cpu_only, nullptr).ok());
  EXPECT_TRUE(cpu_only.hw_batches_.empty());
  FakeOps hw_only(std::vector<bool>(5, true), {});
  auto r = RunSplitDecode(pool, 5, hw_only, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hw_decoded, 5u);
  EXPECT_EQ(hw_only.hw_batches_.size(), 1u);
}

// A hardware error other than DataLoss is the call's error; a Route error
// (on_error=fail) too.
TEST(SplitDecode, ErrorsStopTheBatch) {
  ThreadPool pool(2);
  class Failing : public FakeOps {
   public:
    using FakeOps::FakeOps;
    Status DecodeHardware(std::span<const size_t>) override { return InternalError("engine"); }
  } failing(EveryFourthOnCpu(8), {});
  auto r = RunSplitDecode(pool, 8, failing, nullptr);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  FailingRoute failing_route(EveryFourthOnCpu(8), {});
  EXPECT_EQ(RunSplitDecode(pool, 8, failing_route, nullptr).status().code(), StatusCode::kDataLoss);
}

// ---- SplitDecoder: Note [Fallback ahead] ----

// The decoder owns the ops of the batch ahead; the test keeps the FakeOps
// (the source's ops are likewise views of its buffer sets). The FakeOps are
// declared before the decoder, so they outlive it: its destructor waits for a
// round still in flight, which uses them.
class Forward : public SplitDecodeOps {
 public:
  explicit Forward(FakeOps* to) : to_(to) {}
  bool HardwareCandidate(size_t i) const override { return to_->HardwareCandidate(i); }
  Status Route(int w, size_t i, RouteFor f) override { return to_->Route(w, i, f); }
  Status DecodeHardware(std::span<const size_t> ids) override { return to_->DecodeHardware(ids); }
  const GpuSample& sample(size_t i) const override { return to_->sample(i); }

 private:
  FakeOps* to_;
};

std::vector<int64_t> Indices(int64_t first, size_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

AheadBatch Ahead(uint32_t epoch, std::vector<int64_t> indices, FakeOps* ops) {
  return AheadBatch{epoch, std::move(indices), std::make_unique<Forward>(ops)};
}

// Batch B's fallback decodes run while batch A's hardware call is in flight
// (A's call returns only once they are done), and Decode(B) uses them
// without routing those samples again.
TEST(SplitDecoder, NextBatchFallbackRunsBesideThisHardwareCall) {
  ThreadPool pool(2);
  StageTimes times({{"read", 3}, {"hw_decode", 1}, {"fallback_decode", 2}, {"fallback_wait", 1}});
  const std::vector<int64_t> a_idx = Indices(0, 16), b_idx = Indices(16, 16);
  FakeOps a(std::vector<bool>(16, true), {});
  FakeOps b(EveryFourthOnCpu(16), {});
  SplitDecoder decoder(pool, &times);
  bool b_done_during_a = false;
  a.during_hw = [&] { b_done_during_a = b.WaitForCpuDecodes(4); };
  auto ra = decoder.Decode(BatchKey{0, a_idx}, a, Ahead(0, b_idx, &b));
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  EXPECT_TRUE(b_done_during_a) << "the next batch's fallback decodes did not run beside this "
                                  "batch's hardware call";
  EXPECT_EQ(ra->hw_decoded, 16u);
  auto rb = decoder.Decode(BatchKey{0, b_idx}, b);
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(rb->hw_decoded, 12u);
  EXPECT_EQ(rb->cpu_decoded, 4u);
  ASSERT_EQ(b.hw_batches_.size(), 1u);
  EXPECT_EQ(b.hw_batches_[0], (std::vector<size_t>{1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15}));
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(b.routes_[i].load(), 1) << "sample " << i;
  const std::vector<StageTime> t = times.Read();
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[3].name, "fallback_wait");
}

// Note [Transcoded progressive files]: fallback samples routed before the
// hardware call (the round, or the first batch's own) may join it; beside the
// call (RunSplitDecode) they are decoded on the CPU.
TEST(SplitDecoder, TranscodedFallbackSamplesJoinTheHardwareBatch) {
  ThreadPool pool(2);
  FakeOps a(EveryFourthOnCpu(8), {}), b(EveryFourthOnCpu(8), {});
  a.transcodable = {0};  // the first batch: its fallback is routed before the call too
  b.transcodable = {4};
  SplitDecoder decoder(pool, nullptr);
  auto ra = decoder.Decode(BatchKey{0, Indices(0, 8)}, a, Ahead(0, Indices(8, 8), &b));
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_EQ(a.hw_batches_.size(), 1u);
  EXPECT_EQ(a.hw_batches_[0], (std::vector<size_t>{0, 1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(ra->hw_decoded, 7u);
  EXPECT_EQ(ra->cpu_decoded, 1u);
  auto rb = decoder.Decode(BatchKey{0, Indices(8, 8)}, b);
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  ASSERT_EQ(b.hw_batches_.size(), 1u);
  EXPECT_EQ(b.hw_batches_[0], (std::vector<size_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(b.modes_[4], RouteFor::kHardware);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(b.routes_[i].load(), 1) << "sample " << i;

  FakeOps c(EveryFourthOnCpu(8), {});
  c.transcodable = {0, 4};
  auto rc = RunSplitDecode(pool, 8, c, nullptr);
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(c.modes_[0], RouteFor::kCpu) << "beside the call a sample cannot join it";
  EXPECT_EQ(rc->cpu_decoded, 2u);
  EXPECT_EQ(c.hw_batches_[0], (std::vector<size_t>{1, 2, 3, 5, 6, 7}));
}

// A hint that turns out wrong: the round is discarded and the batch that
// came is decoded whole, each of its samples routed once.
TEST(SplitDecoder, WrongHintIsDecodedInItsOwnBatch) {
  ThreadPool pool(3);
  FakeOps a(EveryFourthOnCpu(8), {}), b(EveryFourthOnCpu(8), {}), c(EveryFourthOnCpu(8), {});
  SplitDecoder decoder(pool, nullptr);
  ASSERT_TRUE(decoder.Decode(BatchKey{0, Indices(0, 8)}, a, Ahead(0, Indices(8, 8), &b)).ok());
  // Same indices, other epoch: not the batch the round was for.
  auto rc = decoder.Decode(BatchKey{1, Indices(8, 8)}, c);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->hw_decoded, 6u);
  EXPECT_EQ(rc->cpu_decoded, 2u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(c.routes_[i].load(), 1) << "sample " << i;
  ASSERT_EQ(c.hw_batches_.size(), 1u);
  EXPECT_EQ(c.hw_batches_[0], (std::vector<size_t>{1, 2, 3, 5, 6, 7}));
}

// A refused batch waits for the round before it uses the pool, and takes its
// transcoded samples to the CPU too; the round's work is still used by its
// batch.
TEST(SplitDecoder, RefusedBatchWithARoundInFlight) {
  ThreadPool pool(2);
  FakeOps a(EveryFourthOnCpu(8), {}), b(EveryFourthOnCpu(8), /*bad=*/{4});
  a.refuse = {1};
  a.transcodable = {4};
  SplitDecoder decoder(pool, nullptr);
  auto ra = decoder.Decode(BatchKey{0, Indices(0, 8)}, a, Ahead(0, Indices(8, 8), &b));
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  EXPECT_TRUE(ra->hw_refused);
  EXPECT_EQ(ra->cpu_decoded, 8u);
  EXPECT_EQ(a.modes_[4], RouteFor::kForceCpu);
  EXPECT_EQ(a.routes_[4].load(), 2) << "transcoded, then refused with its batch";
  auto rb = decoder.Decode(BatchKey{0, Indices(8, 8)}, b);
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(rb->cpu_decoded, 1u);  // 0 (4 is dropped)
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(b.routes_[i].load(), 1) << "sample " << i;
  EXPECT_EQ(KeepInOrder(b.samples_), (std::vector<size_t>{0, 1, 2, 3, 5, 6, 7}));
}

// A round's error (on_error=fail) is its batch's, not the batch decoding
// while it ran; a round for a batch that never comes is dropped unseen.
TEST(SplitDecoder, RoundErrorBelongsToItsBatch) {
  ThreadPool pool(2);
  {
    FakeOps a(EveryFourthOnCpu(8), {});
    FailingRoute b(EveryFourthOnCpu(8), {});
    SplitDecoder decoder(pool, nullptr);
    ASSERT_TRUE(decoder.Decode(BatchKey{0, Indices(0, 8)}, a, Ahead(0, Indices(8, 8), &b)).ok());
    EXPECT_EQ(decoder.Decode(BatchKey{0, Indices(8, 8)}, b).status().code(), StatusCode::kDataLoss);
  }
  {
    FakeOps a(EveryFourthOnCpu(8), {}), c(EveryFourthOnCpu(8), {});
    FailingRoute b(EveryFourthOnCpu(8), {});
    SplitDecoder decoder(pool, nullptr);
    ASSERT_TRUE(decoder.Decode(BatchKey{0, Indices(0, 8)}, a, Ahead(0, Indices(8, 8), &b)).ok());
    EXPECT_TRUE(decoder.Decode(BatchKey{0, Indices(16, 8)}, c).ok());
  }
  {
    // Destroyed with a round in flight: it is waited for.
    FakeOps a(EveryFourthOnCpu(8), {}), b(EveryFourthOnCpu(8), {});
    SplitDecoder decoder(pool, nullptr);
    ASSERT_TRUE(decoder.Decode(BatchKey{0, Indices(0, 8)}, a, Ahead(0, Indices(8, 8), &b)).ok());
  }
}

}  // namespace
}  // namespace batchcast
