// StageTimes: cumulative seconds per producer stage of a source, for the
// server's stats (`producer_stage_s`, docs/stats.md). A source names its
// stages once; its threads add the time they spent in one (Scope, or Add).
//
// Stages that run on several threads at once (a thread pool) are summed over
// those threads: worker-seconds, so a stage's share of wall time may exceed
// 100%. `threads` says how many threads a stage may use at once (reported as
// `producer_stage_threads`).
//
// The clock is injectable (tests give a fake one); the default is
// std::chrono::steady_clock.
//
// Thread-safety: Add, Scope and Seconds may run on any threads at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "batchcast/sources/source.h"

namespace batchcast {

// One stage: its stats name and how many threads may run it at once.
struct StageInfo {
  std::string name;
  int threads = 1;
};

class StageTimes {
 public:
  // Nanoseconds on a monotonic clock.
  using Clock = std::function<int64_t()>;
  static int64_t SteadyNowNs();

  explicit StageTimes(std::vector<StageInfo> stages, Clock now = &SteadyNowNs);

  int64_t Now() const { return now_(); }
  // Adds `ns` to stage `stage` (an index into the constructor's list).
  void Add(size_t stage, int64_t ns) { totals_[stage].fetch_add(ns, std::memory_order_relaxed); }

  // Adds the time from its construction to its destruction to one stage of
  // `times` (nothing when `times` is null).
  class Scope {
   public:
    Scope(StageTimes* times, size_t stage)
        : times_(times), stage_(stage), start_(times != nullptr ? times->Now() : 0) {}
    ~Scope() {
      if (times_ != nullptr) times_->Add(stage_, times_->Now() - start_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StageTimes* times_;
    size_t stage_;
    int64_t start_;
  };

  // Every stage's cumulative seconds, in the constructor's order.
  std::vector<StageTime> Read() const;

 private:
  const std::vector<StageInfo> stages_;
  const Clock now_;
  std::unique_ptr<std::atomic<int64_t>[]> totals_;
};

}  // namespace batchcast
