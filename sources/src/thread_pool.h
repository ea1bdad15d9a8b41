// ThreadPool: a fixed set of worker threads for ParallelFor over a batch.
//
// Thread-safety: ParallelFor may be called by one thread at a time (the
// pipeline's); the calling thread takes part as worker 0.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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
  // all are done.
  void ParallelFor(int64_t n, const std::function<void(int worker, int64_t i)>& fn);

 private:
  void Loop(int worker);
  void Work(int worker);
  int threads_;
  std::vector<std::thread> helpers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t next_ = 0;
  int busy_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace batchcast
