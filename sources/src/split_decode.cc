#include "split_decode.h"

#include <algorithm>
#include <numeric>

namespace batchcast {
namespace {

// The samples of a batch in two lists: hardware candidates, in order, and the
// others, costliest first (the pool takes items in order, so its threads end
// together); ties keep the batch's order.
void SplitSamples(size_t n, const SplitDecodeOps& ops, std::vector<size_t>* candidates,
                  std::vector<size_t>* fallback) {
  for (size_t i = 0; i < n; ++i) (ops.HardwareCandidate(i) ? candidates : fallback)->push_back(i);
  std::stable_sort(fallback->begin(), fallback->end(),
                   [&](size_t a, size_t b) { return ops.FallbackCost(a) > ops.FallbackCost(b); });
}

// Routes the samples `ids` on the pool, each timed as `stage`.
Status RouteOnPool(ThreadPool& pool, const std::vector<size_t>& ids, SplitDecodeOps& ops,
                   StageTimes* times, size_t stage, RouteFor mode) {
  return pool.TryParallelFor(static_cast<int64_t>(ids.size()), [&](int worker, int64_t k) {
    StageTimes::Scope t(times, stage);
    return ops.Route(worker, ids[static_cast<size_t>(k)], mode);
  });
}

// The samples of `ids` that their route sends to the hardware (not dropped,
// not cached, not decoded on the CPU), in order.
std::vector<size_t> RoutedToHardware(const std::vector<size_t>& ids, const SplitDecodeOps& ops) {
  std::vector<size_t> hw;
  for (size_t i : ids) {
    if (ops.sample(i).route == DecodeRoute::kNvJpeg) hw.push_back(i);
  }
  return hw;
}

// After the hardware call: step 3 of Note [Concurrent fallback decode] for a
// refused batch (`before_pool` runs first, to free the pool), and the counts.
Result<SplitDecodeResult> Finish(ThreadPool& pool, size_t n, SplitDecodeOps& ops,
                                 const std::vector<size_t>& hw, const Status& hw_status,
                                 StageTimes* times, const SplitDecodeStages& stages,
                                 const std::function<void()>& before_pool) {
  SplitDecodeResult result;
  if (hw_status.ok()) {
    result.hw_decoded = hw.size();
  } else if (hw_status.code() == StatusCode::kDataLoss) {
    // A file the engine refused spoils its batch: those samples on the CPU.
    result.hw_refused = true;
    result.hw_error = hw_status;
    if (before_pool) before_pool();
    BATCHCAST_RETURN_IF_ERROR(
        RouteOnPool(pool, hw, ops, times, stages.fallback_decode, RouteFor::kForceCpu));
  } else {
    return hw_status;
  }
  for (size_t i = 0; i < n; ++i) result.cpu_decoded += DecodedOnCpu(ops.sample(i).route);
  return result;
}

}  // namespace

Result<SplitDecodeResult> RunSplitDecode(ThreadPool& pool, size_t n, SplitDecodeOps& ops,
                                         StageTimes* times, SplitDecodeStages stages) {
  std::vector<size_t> candidates, fallback;
  SplitSamples(n, ops, &candidates, &fallback);
  // 1. Route the candidates (reads only: nothing here decodes).
  BATCHCAST_RETURN_IF_ERROR(
      RouteOnPool(pool, candidates, ops, times, stages.read, RouteFor::kHardware));
  const std::vector<size_t> hw = RoutedToHardware(candidates, ops);

  // 2. The hardware batch on this thread, the fallback decodes beside it.
  Status hw_status;
  const Status cpu_status = pool.TryParallelForBeside(
      static_cast<int64_t>(fallback.size()),
      [&](int worker, int64_t k) {
        StageTimes::Scope t(times, stages.fallback_decode);
        return ops.Route(worker, fallback[static_cast<size_t>(k)], RouteFor::kCpu);
      },
      [&]() -> Status {
        if (hw.empty()) return Status::Ok();
        StageTimes::Scope t(times, stages.hw_decode);
        return ops.DecodeHardware(hw);
      },
      &hw_status);
  BATCHCAST_RETURN_IF_ERROR(cpu_status);
  return Finish(pool, n, ops, hw, hw_status, times, stages, nullptr);
}

SplitDecoder::SplitDecoder(ThreadPool& pool, StageTimes* times, SplitDecodeStages stages)
    : pool_(pool), times_(times), stages_(stages) {}

SplitDecoder::~SplitDecoder() { Collect(); }

void SplitDecoder::Collect() {
  if (!task_.started()) return;
  StageTimes::Scope t(times_, stages_.fallback_wait);
  round_->status = task_.Wait();
  round_->ready = true;
}

Result<SplitDecodeResult> SplitDecoder::Decode(const BatchKey& key, SplitDecodeOps& ops,
                                               AheadBatch next) {
  Collect();
  const std::unique_ptr<Round> round = std::move(round_);
  const size_t n = key.indices.size();
  // Starts the round of `next`, with its split made here (Note [Fallback ahead]).
  auto start_next = [&] {
    if (!next.ops) return;
    round_ = std::make_unique<Round>();
    Round* r = round_.get();
    r->batch = std::move(next);
    std::vector<size_t> candidates;
    SplitSamples(r->batch.indices.size(), *r->batch.ops, &candidates, &r->fallback);
    task_.Start([this, r] {
      return RouteOnPool(pool_, r->fallback, *r->batch.ops, times_, stages_.fallback_decode,
                         RouteFor::kHardware);
    });
  };
  const bool matched = round != nullptr && round->ready && round->batch.epoch == key.epoch &&
                       std::equal(key.indices.begin(), key.indices.end(),
                                  round->batch.indices.begin(), round->batch.indices.end());
  std::vector<size_t> fallback;
  if (matched) {
    BATCHCAST_RETURN_IF_ERROR(round->status);
    fallback = std::move(round->fallback);
  } else if (!next.ops) {
    // No round for this batch (the first one, or a wrong hint) and none to
    // start: RunSplitDecode's way, the fallback decodes beside the hardware.
    return RunSplitDecode(pool_, n, ops, times_, stages_);
  } else {
    // No round for this batch but one to start: this batch's fallback
    // decodes first, so that the next round runs beside the hardware call.
    std::vector<size_t> unused;
    SplitSamples(n, ops, &unused, &fallback);
    BATCHCAST_RETURN_IF_ERROR(
        RouteOnPool(pool_, fallback, ops, times_, stages_.fallback_decode, RouteFor::kHardware));
  }
  // The fallback samples are routed; the others are the candidates.
  std::vector<bool> routed(n, false);
  for (size_t i : fallback) routed[i] = true;
  std::vector<size_t> candidates;
  for (size_t i = 0; i < n; ++i) {
    if (!routed[i]) candidates.push_back(i);
  }
  BATCHCAST_RETURN_IF_ERROR(
      RouteOnPool(pool_, candidates, ops, times_, stages_.read, RouteFor::kHardware));
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), size_t{0});
  const std::vector<size_t> hw = RoutedToHardware(all, ops);
  start_next();  // the pool is the round's until Collect()
  Status hw_status;
  if (!hw.empty()) {
    StageTimes::Scope t(times_, stages_.hw_decode);
    hw_status = ops.DecodeHardware(hw);
  }
  return Finish(pool_, n, ops, hw, hw_status, times_, stages_, [this] { Collect(); });
}

std::vector<size_t> KeepInOrder(std::span<const GpuSample> samples) {
  std::vector<size_t> kept;
  kept.reserve(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].route != DecodeRoute::kDropped) kept.push_back(i);
  }
  return kept;
}

}  // namespace batchcast
