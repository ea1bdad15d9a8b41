// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// clang's thread-safety annotations, so that `BC_GUARDED_BY(mu_)` on a field
// and `BC_REQUIRES(mu_)` on a method are checked at compile time
// (-Wthread-safety, the clang build of scripts/check_thread_safety.sh). GCC
// ignores the annotations. Private to the project: "core/src/mutex.h".
//
// Thread-safety: as std::mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define BC_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define BC_THREAD_ANNOTATION(x)
#endif

#define BC_CAPABILITY(x) BC_THREAD_ANNOTATION(capability(x))
#define BC_SCOPED_CAPABILITY BC_THREAD_ANNOTATION(scoped_lockable)
#define BC_GUARDED_BY(x) BC_THREAD_ANNOTATION(guarded_by(x))
#define BC_PT_GUARDED_BY(x) BC_THREAD_ANNOTATION(pt_guarded_by(x))
#define BC_ACQUIRED_BEFORE(...) BC_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define BC_ACQUIRED_AFTER(...) BC_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define BC_REQUIRES(...) BC_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define BC_ACQUIRE(...) BC_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define BC_RELEASE(...) BC_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define BC_TRY_ACQUIRE(...) BC_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define BC_EXCLUDES(...) BC_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define BC_ASSERT_CAPABILITY(x) BC_THREAD_ANNOTATION(assert_capability(x))
#define BC_NO_THREAD_SAFETY_ANALYSIS BC_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace batchcast {

class CondVar;

class BC_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() BC_ACQUIRE() { mu_.lock(); }
  void Unlock() BC_RELEASE() { mu_.unlock(); }
  bool TryLock() BC_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds the mutex (no run-time check).
  void AssertHeld() const BC_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class BC_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) BC_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() BC_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable. Every wait names the Mutex it releases while waiting
// (absl style), so the analysis checks that the caller holds that very mutex.
// Use one mutex with each CondVar. Wake-ups may be spurious: wait in a loop.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) BC_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when `deadline` passed. time_point::max() waits without a deadline.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> deadline) BC_REQUIRES(mu) {
    if (deadline == std::chrono::time_point<Clock, Duration>::max()) {
      Wait(mu);
      return true;
    }
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woke = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woke;
  }
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) BC_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace batchcast
