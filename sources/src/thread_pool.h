// ThreadPool: a fixed set of worker threads for ParallelFor over a batch.
// Private to batchcast::sources (the sample sources and the image dataset
// scan use it).
//
// Thread-safety: ParallelFor / TryParallelFor may be called by one thread at a
// time (the pipeline's); the calling thread takes part as worker 0.
// Failure: an exception thrown by `fn` (on any worker) never escapes a
// thread: it becomes the call's Internal error (core/src/catch_all.h) and the
// items not yet started are skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "batchcast/core/status.h"
#include "core/src/mutex.h"

namespace batchcast {

class ThreadPool {
 public:
  // REQUIRES: threads >= 1 (threads - 1 helper threads are started).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }
  // Runs fn(worker, i) for i in [0, n), spread over the workers; returns when
  // all are done. `worker` is in [0, size()), distinct among concurrent calls.
  // OK, or the error of an exception `fn` threw (see above).
  [[nodiscard]] Status ParallelFor(int64_t n, const std::function<void(int worker, int64_t i)>& fn);
  // Like ParallelFor for work that may fail: once a call has failed, the items
  // not yet started are skipped. Returns the first error recorded (OK if none).
  [[nodiscard]] Status TryParallelFor(int64_t n,
                                      const std::function<Status(int worker, int64_t i)>& fn);

 private:
  void Loop(int worker);
  void Work(int worker);

  const int threads_;
  std::vector<std::thread> helpers_;
  Mutex mu_;
  CondVar start_cv_;  // with mu_: a new round (generation_) or stop_
  CondVar done_cv_;   // with mu_: a helper finished its part of the round
  // The round in progress: fn_(worker, i) for i in [next_, n_) still to start.
  const std::function<void(int, int64_t)>* fn_ BC_GUARDED_BY(mu_) = nullptr;
  int64_t n_ BC_GUARDED_BY(mu_) = 0;
  int64_t next_ BC_GUARDED_BY(mu_) = 0;
  int busy_ BC_GUARDED_BY(mu_) = 0;  // helpers inside Work()
  Status error_ BC_GUARDED_BY(mu_);  // the round's first escaped exception
  uint64_t generation_ BC_GUARDED_BY(mu_) = 0;
  bool stop_ BC_GUARDED_BY(mu_) = false;
};

}  // namespace batchcast
