// RetryingReader: how the image sources read a dataset's files (the header
// scan and every sample), so that a bad moment of the storage is not a bad
// file.
//
// Note [Read retries]
// A failure to *read* a file says nothing about its content: descriptors
// run out (EMFILE, ENFILE), memory is short (ENOMEM), a cluster file system
// has a bad minute (EIO, ESTALE, ETIMEDOUT, EAGAIN), a read ends before the
// file's size (a short read). ReadFileBytes (dataset_files.h) reports those
// as Unavailable. Dropping the file for them (Note [Dropped files]) would
// lose it for good: one bad minute could empty every later epoch. So a read
// that fails with Unavailable is retried after a backoff (first_delay,
// doubling up to max_delay) until it succeeds or until it has failed for
// `give_up_after`; a file that is missing or refused (NotFound,
// PermissionDenied: deleted, or renamed under the server) is retried
// `missing_attempts` times over about a second, since a network file
// system may show it again. Only then is the failure the file's: it follows
// Note [Dropped files] like content that fails to decode. Anything else
// (not a regular file) is the file's at once. The retry happens inside the
// read of the sample, so the sample keeps its place in the stream: order and
// exactly-once hold, and the producer (and the consumers behind it) just
// wait. Each retried read is logged (at most 10 lines a second) and counted:
// `read_retries` (attempts that failed and were retried), `reads_recovered`
// (reads that succeeded after a retry), `files_unreadable` (reads given up).
// Cancel() ends every wait at once (the server is stopping): the read then
// fails with Cancelled, which stops the producer instead of dropping a file.
//
// Time and the file system come from a ReadEnv, so the rules are unit-tested
// with a fake clock and injected faults (tests/sources/read_retry_test.cc).
//
// Thread-safety: Read and Cancel may be called from any thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "batchcast/core/status.h"
#include "core/src/mutex.h"

namespace batchcast {

// Env-style access to time and to the files of a dataset. Default() reads
// real files (ReadFileBytes) and sleeps for real. Implementations must be
// thread-safe.
class ReadEnv {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~ReadEnv() = default;
  // ReadFileBytes(path, out, limit): the whole file or its first `limit`
  // bytes; Unavailable for a failure to read, NotFound / PermissionDenied /
  // InvalidArgument for a file that cannot be opened as a regular file.
  virtual Status ReadFile(const std::string& path, std::vector<uint8_t>& out, size_t limit);
  virtual Clock::time_point Now();
  // Waits until `deadline` or until `wake` is signalled, whichever is first.
  virtual void WaitUntil(Mutex* mu, CondVar* wake, Clock::time_point deadline) BC_REQUIRES(mu);
  static ReadEnv* Default();
};

struct ReadRetryPolicy {
  std::chrono::milliseconds first_delay{10};
  std::chrono::milliseconds max_delay{2000};
  // Unavailable: retried until the file has failed for this long.
  std::chrono::milliseconds give_up_after{std::chrono::minutes(2)};
  // NotFound / PermissionDenied: attempts in all (the delays between them
  // grow as above: 10 + 20 + ... ms).
  int missing_attempts = 7;
};

class RetryingReader {
 public:
  // `env` must outlive the reader (nullptr: ReadEnv::Default()).
  explicit RetryingReader(ReadEnv* env = nullptr, ReadRetryPolicy policy = {});

  // Reads `path` (its first `limit` bytes) into `out`, retrying as Note
  // [Read retries] says. On failure: the last error, with how long or how
  // often it was tried; Cancelled after Cancel().
  Status Read(const std::string& path, std::vector<uint8_t>& out, size_t limit = SIZE_MAX)
      BC_EXCLUDES(mu_);
  // Runs `attempt` (a read of `what`, e.g. opening a tar shard and reading
  // up to a member) until it succeeds, retrying its failures as Read does.
  Status Retry(const std::string& what, const std::function<Status()>& attempt) BC_EXCLUDES(mu_);
  // Ends every wait in Read at once, now and later. Thread-safe.
  void Cancel() BC_EXCLUDES(mu_);

  // read_retries, reads_recovered, files_unreadable.
  std::vector<std::pair<std::string, int64_t>> counters() const;

 private:
  // Waits `delay` (or until Cancel); false when cancelled.
  bool Backoff(std::chrono::milliseconds delay) BC_EXCLUDES(mu_);

  ReadEnv* const env_;
  const ReadRetryPolicy policy_;
  Mutex mu_;
  CondVar cancel_cv_;  // with mu_: cancelled_ became true
  bool cancelled_ BC_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> retries_{0};
  std::atomic<int64_t> recovered_{0};
  std::atomic<int64_t> unreadable_{0};
};

}  // namespace batchcast
