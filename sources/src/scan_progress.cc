#include "scan_progress.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "core/src/logging.h"

namespace batchcast {

ScanProgress::ScanProgress(std::string what, uint64_t total, Sink sink, Clock::duration interval,
                           std::function<Clock::time_point()> now)
    : what_(std::move(what)),
      total_(total),
      sink_(sink ? std::move(sink)
                 : Sink([](const std::string& line) { BC_LOG_INFO("{}", line); })),
      interval_(interval),
      now_(std::move(now)),
      start_(now_()),
      next_report_(interval.count()) {}

void ScanProgress::Add(uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  const int64_t now = Ticks(now_());
  int64_t due = next_report_.load(std::memory_order_relaxed);
  if (now < due) return;
  // One thread wins the report of this interval.
  if (!next_report_.compare_exchange_strong(due, now + interval_.count(),
                                            std::memory_order_relaxed)) {
    return;
  }
  sink_(Line());
}

std::string ScanProgress::Line() const {
  const uint64_t done = this->done();
  const double secs = std::chrono::duration<double>(now_() - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0.0;
  char buf[160];
  if (total_ == 0) {
    std::snprintf(buf, sizeof(buf), ": %llu files so far, %.0f files/s",
                  static_cast<unsigned long long>(done), rate);
  } else {
    const double left =
        rate > 0 && done < total_ ? std::ceil(static_cast<double>(total_ - done) / rate) : 0;
    std::snprintf(buf, sizeof(buf),
                  ": %llu of %llu files (%.0f%%), %.0f files/s, about %.0f s left",
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                  100.0 * static_cast<double>(done) / static_cast<double>(total_), rate, left);
  }
  return what_ + buf;
}

}  // namespace batchcast
