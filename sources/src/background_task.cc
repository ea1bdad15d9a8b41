#include "background_task.h"

#include "core/src/catch_all.h"
#include "core/src/thread_name.h"

namespace batchcast {

BackgroundTask::BackgroundTask()
    : thread_([this] {
        SetThreadName("bc-task");
        Loop();
      }) {}

BackgroundTask::~BackgroundTask() {
  (void)Wait();
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void BackgroundTask::Start(std::function<Status()> work) {
  BATCHCAST_CHECK(!started_);
  started_ = true;
  {
    MutexLock lock(&mu_);
    work_ = std::move(work);
    pending_ = true;
  }
  cv_.SignalAll();
}

Status BackgroundTask::Wait() {
  if (!started_) return Status::Ok();
  started_ = false;
  MutexLock lock(&mu_);
  while (pending_) cv_.Wait(&mu_);
  return std::move(status_);
}

void BackgroundTask::Loop() {
  mu_.Lock();
  while (true) {
    while (!stop_ && !pending_) cv_.Wait(&mu_);
    if (stop_) break;
    std::function<Status()> work = std::move(work_);
    mu_.Unlock();
    Status s = CatchAll("a background task", [&] { return work(); });
    mu_.Lock();
    status_ = std::move(s);
    pending_ = false;
    cv_.SignalAll();
  }
  mu_.Unlock();
}

}  // namespace batchcast
