#include "split_decode.h"

#include <algorithm>

namespace batchcast {
Result<SplitDecodeResult> RunSplitDecode(ThreadPool& pool, size_t n, SplitDecodeOps& ops,
                                         StageTimes* times, SplitDecodeStages stages) {
  std::vector<size_t> candidates, fallback;
  for (size_t i = 0; i < n; ++i) (ops.HardwareCandidate(i) ? candidates : fallback).push_back(i);
  // Longest first (the pool takes items in order); ties keep the batch order.
  std::stable_sort(fallback.begin(), fallback.end(),
                   [&](size_t a, size_t b) { return ops.FallbackCost(a) > ops.FallbackCost(b); });

  // 1. Route the candidates (reads only: nothing here decodes).
  BATCHCAST_RETURN_IF_ERROR(
      pool.TryParallelFor(static_cast<int64_t>(candidates.size()), [&](int worker, int64_t k) {
        StageTimes::Scope t(times, stages.read);
        return ops.Route(worker, candidates[static_cast<size_t>(k)], /*force_cpu=*/false);
      }));
  std::vector<size_t> hw;
  for (size_t i : candidates) {
    if (ops.sample(i).route == DecodeRoute::kNvJpeg) hw.push_back(i);
  }

  // 2. The hardware batch on this thread, the fallback decodes beside it.
  SplitDecodeResult result;
  Status hw_status;
  const Status cpu_status = pool.TryParallelForBeside(
      static_cast<int64_t>(fallback.size()),
      [&](int worker, int64_t k) {
        StageTimes::Scope t(times, stages.fallback_decode);
        return ops.Route(worker, fallback[static_cast<size_t>(k)], /*force_cpu=*/false);
      },
      [&]() -> Status {
        if (hw.empty()) return Status::Ok();
        StageTimes::Scope t(times, stages.hw_decode);
        return ops.DecodeHardware(hw);
      },
      &hw_status);
  BATCHCAST_RETURN_IF_ERROR(cpu_status);
  if (hw_status.ok()) {
    result.hw_decoded = hw.size();
  } else if (hw_status.code() == StatusCode::kDataLoss) {
    // 3. A file the engine refused spoils its batch: those samples on the CPU.
    result.hw_refused = true;
    result.hw_error = hw_status;
    BATCHCAST_RETURN_IF_ERROR(
        pool.TryParallelFor(static_cast<int64_t>(hw.size()), [&](int worker, int64_t k) {
          StageTimes::Scope t(times, stages.fallback_decode);
          return ops.Route(worker, hw[static_cast<size_t>(k)], /*force_cpu=*/true);
        }));
  } else {
    return hw_status;
  }
  for (size_t i = 0; i < n; ++i) result.cpu_decoded += DecodedOnCpu(ops.sample(i).route);
  return result;
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
