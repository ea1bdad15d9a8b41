#include "read_retry.h"

#include <algorithm>

#include "core/src/logging.h"
#include "dataset_files.h"

namespace batchcast {

Status ReadEnv::ReadFile(const std::string& path, std::vector<uint8_t>& out, size_t limit) {
  return ReadFileBytes(path, out, limit);
}

ReadEnv::Clock::time_point ReadEnv::Now() { return Clock::now(); }

void ReadEnv::WaitUntil(Mutex* mu, CondVar* wake, Clock::time_point deadline) {
  wake->WaitUntil(mu, deadline);
}

ReadEnv* ReadEnv::Default() {
  static ReadEnv env;
  return &env;
}

RetryingReader::RetryingReader(ReadEnv* env, ReadRetryPolicy policy)
    : env_(env != nullptr ? env : ReadEnv::Default()), policy_(policy) {}

bool RetryingReader::Backoff(std::chrono::milliseconds delay) {
  MutexLock l(&mu_);
  if (!cancelled_) env_->WaitUntil(&mu_, &cancel_cv_, env_->Now() + delay);
  return !cancelled_;
}

void RetryingReader::Cancel() {
  MutexLock l(&mu_);
  cancelled_ = true;
  cancel_cv_.SignalAll();
}

Status RetryingReader::Read(const std::string& path, std::vector<uint8_t>& out, size_t limit) {
  return Retry(path, [&] { return env_->ReadFile(path, out, limit); });
}

Status RetryingReader::Retry(const std::string& path, const std::function<Status()>& read) {
  const ReadEnv::Clock::time_point first = env_->Now();
  std::chrono::milliseconds delay = policy_.first_delay;
  for (int attempt = 1;; ++attempt) {
    const Status s = read();
    if (s.ok()) {
      if (attempt > 1) {
        recovered_.fetch_add(1, std::memory_order_relaxed);
        BC_LOG_INFO_LIMITED("read {} after {} failed attempts", path, attempt - 1);
      }
      return s;
    }
    const bool transient = s.code() == StatusCode::kUnavailable;
    const bool missing =
        s.code() == StatusCode::kNotFound || s.code() == StatusCode::kPermissionDenied;
    if (!transient && !missing) return s;  // the file's, at once (not a regular file)
    const auto failed_for = env_->Now() - first;
    if (transient ? failed_for >= policy_.give_up_after : attempt >= policy_.missing_attempts) {
      unreadable_.fetch_add(1, std::memory_order_relaxed);
      const double secs = std::chrono::duration<double>(failed_for).count();
      return Status(s.code(), s.message() + " (still failing after " + std::to_string(attempt) +
                                  " attempts in " + std::to_string(static_cast<int>(secs)) + " s)");
    }
    retries_.fetch_add(1, std::memory_order_relaxed);
    BC_LOG_WARN_LIMITED("cannot read {} now ({}): retrying in {} ms (attempt {})", path,
                        s.message(), delay.count(), attempt + 1);
    if (!Backoff(delay))
      return CancelledError("the server is stopping (while reading " + path + ")");
    delay = std::min(delay * 2, policy_.max_delay);
  }
}

std::vector<std::pair<std::string, int64_t>> RetryingReader::counters() const {
  return {{"read_retries", retries_.load(std::memory_order_relaxed)},
          {"reads_recovered", recovered_.load(std::memory_order_relaxed)},
          {"files_unreadable", unreadable_.load(std::memory_order_relaxed)}};
}

}  // namespace batchcast
