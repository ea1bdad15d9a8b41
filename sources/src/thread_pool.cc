#include "thread_pool.h"

#include "batchcast/core/check.h"

namespace batchcast {

ThreadPool::ThreadPool(int threads) : threads_(threads) {
  BATCHCAST_CHECK(threads >= 1);
  for (int w = 1; w < threads; ++w) helpers_.emplace_back([this, w] { Loop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void ThreadPool::Work(int worker) {
  while (true) {
    int64_t i;
    {
      std::lock_guard lock(mu_);
      if (next_ >= n_) return;
      i = next_++;
    }
    (*fn_)(worker, i);
  }
}

void ThreadPool::Loop(int worker) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++busy_;
    }
    Work(worker);
    {
      std::lock_guard lock(mu_);
      --busy_;
    }
    done_cv_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads_ == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(0, i);
    return;
  }
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    ++generation_;
  }
  start_cv_.notify_all();
  Work(0);
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [&] { return next_ >= n_ && busy_ == 0; });
  fn_ = nullptr;
}

}  // namespace batchcast
