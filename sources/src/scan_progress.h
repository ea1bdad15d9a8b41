// ScanProgress: progress lines for a long loop over a dataset's files (the
// listing and the header scan of ImageDataset::Open on millions of files), at
// most one per interval (1 s), so a person starting a server on a large
// dataset sees that it is working and how long it will take:
//
//   scanning /data/train: 412345 of 1281167 files (32%), 41234 files/s, about 21 s left
//   listing /data/train: 733000 files so far, 98000 files/s
//
// A loop that ends within the first interval prints nothing.
//
// Thread-safety: Add() may be called from any number of threads at once (one
// atomic add; the thread that finds a report due claims it with a
// compare-exchange, so at most one line per interval). The sink runs on that
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace batchcast {

class ScanProgress {
 public:
  using Clock = std::chrono::steady_clock;
  // Receives each progress line; the default logs it at info level.
  using Sink = std::function<void(const std::string& line)>;

  // `what` starts each line ("scanning /data/train"); `total` is the number of
  // items the loop will count, 0 when unknown. `now` is the clock (tests pass
  // a fake one).
  explicit ScanProgress(std::string what, uint64_t total = 0, Sink sink = {},
                        Clock::duration interval = std::chrono::seconds(1),
                        std::function<Clock::time_point()> now = Clock::now);

  // Counts `n` more items done; reports when the interval has passed since
  // the last report (or the start).
  void Add(uint64_t n = 1);
  uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  // The line a report would print now.
  std::string Line() const;

 private:
  int64_t Ticks(Clock::time_point t) const { return (t - start_).count(); }

  const std::string what_;
  const uint64_t total_;
  const Sink sink_;
  const Clock::duration interval_;
  const std::function<Clock::time_point()> now_;
  const Clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::atomic<int64_t> next_report_;  // ticks of Clock after start_
};

}  // namespace batchcast
