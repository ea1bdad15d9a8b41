#include "scheduler_env.h"

#include "core/src/runtime_dir.h"

namespace batchcast {
namespace {

class SystemEnv final : public SchedulerEnv {
 public:
  Clock::time_point Now() const override { return Clock::now(); }
  bool ProcessAlive(int pid) const override { return batchcast::ProcessAlive(pid); }
};

}  // namespace

SchedulerEnv* SchedulerEnv::Default() {
  static SystemEnv* const env = new SystemEnv();
  return env;
}

}  // namespace batchcast
