#include "wait_clock.h"

#include <algorithm>

namespace batchcast::internal {
namespace {

double Seconds(WaitClock::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void WaitClock::Begin(Clock::time_point now) {
  MutexLock l(&mu_);
  since_ = now;
}

void WaitClock::End(Clock::time_point now) {
  MutexLock l(&mu_);
  if (since_) waited_ += std::max(Clock::duration{0}, now - *since_);
  since_.reset();
}

WaitClock::Clock::duration WaitClock::WaitedLocked(Clock::time_point now) const {
  return waited_ + (since_ ? std::max(Clock::duration{0}, now - *since_) : Clock::duration{0});
}

double WaitClock::Total(Clock::time_point now) const {
  MutexLock l(&mu_);
  return Seconds(WaitedLocked(now));
}

WaitShare WaitClock::Take(Clock::time_point now) {
  MutexLock l(&mu_);
  const Clock::duration waited = WaitedLocked(now);
  WaitShare share;
  share.wall_s = Seconds(std::max(Clock::duration{0}, now - last_take_));
  share.wait_s = std::min(share.wall_s, Seconds(waited - waited_at_last_take_));
  last_take_ = now;
  waited_at_last_take_ = waited;
  return share;
}

}  // namespace batchcast::internal
