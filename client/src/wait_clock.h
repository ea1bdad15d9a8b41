// WaitClock: how long a consumer's Next() calls wait for the server's reply,
// in all (Consumer::wait_seconds) and per interval (Consumer::TakeWaitShare:
// the share of the wall time since the previous call, the job's own view of
// being input-bound, with no server asked). A wait in progress counts up to
// the moment it is read, so an interval's wait never exceeds its wall time.
//
// Thread-safety: thread-safe. Begin and End come from the thread that calls
// Next(), Total and Take from any.
#pragma once

#include <chrono>
#include <optional>

#include "batchcast/client/consumer.h"
#include "core/src/mutex.h"

namespace batchcast::internal {

class WaitClock {
 public:
  using Clock = std::chrono::steady_clock;

  // The first interval starts at `now`.
  explicit WaitClock(Clock::time_point now) : last_take_(now) {}

  // A wait starts / ends at `now`.
  void Begin(Clock::time_point now) BC_EXCLUDES(mu_);
  void End(Clock::time_point now) BC_EXCLUDES(mu_);
  // Seconds waited up to `now`.
  double Total(Clock::time_point now) const BC_EXCLUDES(mu_);
  // The wait and the wall time from the previous Take (or the construction)
  // to `now`, which starts the next interval.
  WaitShare Take(Clock::time_point now) BC_EXCLUDES(mu_);

 private:
  Clock::duration WaitedLocked(Clock::time_point now) const BC_REQUIRES(mu_);

  mutable Mutex mu_;
  Clock::duration waited_ BC_GUARDED_BY(mu_){0};               // finished waits
  std::optional<Clock::time_point> since_ BC_GUARDED_BY(mu_);  // the wait in progress
  Clock::time_point last_take_ BC_GUARDED_BY(mu_);
  Clock::duration waited_at_last_take_ BC_GUARDED_BY(mu_){0};
};

}  // namespace batchcast::internal
