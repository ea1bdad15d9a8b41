#include "thread_pool.h"

#include <atomic>
#include <string>
#include <utility>

#include "batchcast/core/check.h"
#include "core/src/catch_all.h"
#include "core/src/thread_name.h"

namespace batchcast {

ThreadPool::ThreadPool(int threads) : threads_(threads) {
  BATCHCAST_CHECK(threads >= 1);
  for (int w = 1; w < threads; ++w) {
    helpers_.emplace_back([this, w] {
      SetThreadName("bc-pool-" + std::to_string(w));
      Loop(w);
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  start_cv_.SignalAll();
  for (std::thread& t : helpers_) t.join();
}

void ThreadPool::Work(int worker) {
  while (true) {
    int64_t i;
    const std::function<void(int, int64_t)>* fn;
    {
      MutexLock lock(&mu_);
      if (next_ >= n_) return;
      i = next_++;
      fn = fn_;
    }
    Status s = CatchAll("a worker thread", [&] { (*fn)(worker, i); });
    if (!s.ok()) {
      MutexLock lock(&mu_);
      if (error_.ok()) error_ = std::move(s);
      next_ = n_;  // skip the items not yet started
    }
  }
}

void ThreadPool::Loop(int worker) {
  uint64_t seen = 0;
  while (true) {
    {
      MutexLock lock(&mu_);
      while (!stop_ && generation_ == seen) start_cv_.Wait(&mu_);
      if (stop_) return;
      seen = generation_;
      ++busy_;
    }
    Work(worker);
    {
      MutexLock lock(&mu_);
      --busy_;
    }
    done_cv_.SignalAll();
  }
}

Status ThreadPool::Round(int64_t n, const std::function<void(int, int64_t)>& fn,
                         const std::function<void()>* first) {
  if (n <= 0 || threads_ == 1 || (n == 1 && first == nullptr)) {
    if (first != nullptr) (*first)();
    return CatchAll("a worker thread", [&] {
      for (int64_t i = 0; i < n; ++i) fn(0, i);
    });
  }
  {
    MutexLock lock(&mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    error_ = Status::Ok();
    ++generation_;
  }
  start_cv_.SignalAll();
  if (first != nullptr) (*first)();
  Work(0);
  MutexLock lock(&mu_);
  while (next_ < n_ || busy_ != 0) done_cv_.Wait(&mu_);
  fn_ = nullptr;
  return std::exchange(error_, Status::Ok());
}

Status ThreadPool::TryParallelFor(int64_t n, const std::function<Status(int, int64_t)>& fn) {
  return TryRound(n, fn, nullptr);
}

Status ThreadPool::TryParallelForBeside(int64_t n, const std::function<Status(int, int64_t)>& fn,
                                        const std::function<Status()>& first,
                                        Status* first_status) {
  const std::function<void()> run_first = [&] {
    *first_status = CatchAll("the caller's work", [&] { return first(); });
  };
  return TryRound(n, fn, &run_first);
}

Status ThreadPool::TryRound(int64_t n, const std::function<Status(int, int64_t)>& fn,
                            const std::function<void()>* first) {
  Mutex mu;
  Status first_error;  // guarded by mu
  std::atomic<bool> failed{false};
  Status escaped = Round(
      n,
      [&](int worker, int64_t i) {
        if (failed.load(std::memory_order_relaxed)) return;
        Status s = fn(worker, i);
        if (s.ok()) return;
        MutexLock lock(&mu);
        if (first_error.ok()) first_error = std::move(s);
        failed = true;
      },
      first);
  MutexLock lock(&mu);
  return first_error.ok() ? escaped : first_error;
}

}  // namespace batchcast
