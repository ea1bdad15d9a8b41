// SchedulerEnv: what the Scheduler needs from the world (the time and whether
// a process exists) behind an interface, as LevelDB's Env, so that its rules
// are tested with a fake clock and fake processes, without sleeps
// (tests/server/scheduler_test.cc).
//
// Thread-safety: implementations must be callable from any thread. The
// Scheduler calls them with its mutex held, so they must not call back into
// the Scheduler.
#pragma once

#include <chrono>

namespace batchcast {

using Clock = std::chrono::steady_clock;

class SchedulerEnv {
 public:
  virtual ~SchedulerEnv() = default;

  // The current time. Every time-based rule (lag_timeout, heartbeat_timeout,
  // the 1 s hoarding rule) reads it here.
  virtual Clock::time_point Now() const = 0;
  // True when a process with this pid exists.
  virtual bool ProcessAlive(int pid) const = 0;

  // The real environment: steady_clock and kill(pid, 0). Never destroyed.
  static SchedulerEnv* Default();
};

}  // namespace batchcast
