#include "stage_times.h"

#include <chrono>

namespace batchcast {

int64_t StageTimes::SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StageTimes::StageTimes(std::vector<StageInfo> stages, Clock now)
    : stages_(std::move(stages)),
      now_(std::move(now)),
      totals_(new std::atomic<int64_t>[stages_.size()]) {
  for (size_t i = 0; i < stages_.size(); ++i) totals_[i].store(0);
}

std::vector<StageTime> StageTimes::Read() const {
  std::vector<StageTime> out;
  out.reserve(stages_.size());
  for (size_t i = 0; i < stages_.size(); ++i) {
    out.push_back(
        {stages_[i].name, static_cast<double>(totals_[i].load()) * 1e-9, stages_[i].threads});
  }
  return out;
}

}  // namespace batchcast
