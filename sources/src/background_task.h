// BackgroundTask: one thread that runs one piece of work at a time for its
// owner, who starts it, goes on with other work, and later collects its
// status (the fallback decodes of the next batch, split_decode.h).
//
// Thread-safety: Start, Wait and the destructor are called by one thread at a
// time (the owner); the work runs on the task's thread.
// Failure: an exception the work throws becomes its Internal status
// (core/src/catch_all.h).
#pragma once

#include <functional>
#include <thread>

#include "batchcast/core/status.h"
#include "core/src/mutex.h"

namespace batchcast {

class BackgroundTask {
 public:
  BackgroundTask();
  ~BackgroundTask();  // waits for the work in flight, then ends the thread
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;

  // Runs `work` on the task's thread and returns at once.
  // REQUIRES: nothing in flight (Wait() returned since the last Start).
  void Start(std::function<Status()> work) BC_EXCLUDES(mu_);
  // True between Start and the Wait that collects the work.
  bool started() const { return started_; }
  // Returns the status of the work started last, once it is done; OK when
  // nothing was started since the last Wait.
  Status Wait() BC_EXCLUDES(mu_);

 private:
  void Loop() BC_EXCLUDES(mu_);

  bool started_ = false;  // the owner's view: Start called, Wait not yet
  Mutex mu_;
  CondVar cv_;  // with mu_: work_ given, done_ or stop_ changed
  std::function<Status()> work_ BC_GUARDED_BY(mu_);
  bool pending_ BC_GUARDED_BY(mu_) = false;  // work_ given, not yet done
  Status status_ BC_GUARDED_BY(mu_);
  bool stop_ BC_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the fields above exist
};

}  // namespace batchcast
