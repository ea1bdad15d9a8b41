// What a checked consumer reports, as one text line per event: consumer
// processes of the stress programs print these on stdout (the C++ ones
// through a Reporter, tests/stress/soak_loader.py by hand) and the programs
// that started them parse them (ParseReport).
//
//   CONNECTED <consumer_id> <batches_per_epoch> <t_ms>
//   EPOCH <epoch> <first_seq> <samples> <digest>   an epoch passed every check
//                                                  (samples 0: a skip broke it)
//   PROGRESS <batches> <t_ms>                      at most every 100 ms
//   LOST <StatusCode> <t_ms> <message>             Next() failed
//   VIOLATION <what>                               a rule was broken
//   DONE <batches>                                 read all it was asked to
//
// t_ms is CLOCK_MONOTONIC (std::chrono::steady_clock on Linux) in
// milliseconds, so times from several processes compare.
//
// Thread-safety: a Reporter's methods may be called from one thread at a
// time; its counters (last_batch_ms, batches, violations, epochs) may be
// read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast::stress {

// CLOCK_MONOTONIC in milliseconds.
int64_t NowMs();

struct CheckedEpoch;

class Reporter {
 public:
  // Lines go to `out` (flushed per line; null: nowhere); violations also to
  // `on_violation` when set.
  explicit Reporter(FILE* out, std::function<void(const std::string&)> on_violation = {})
      : out_(out), on_violation_(std::move(on_violation)) {}

  void Connected(uint64_t consumer_id, uint64_t batches_per_epoch);
  void Epoch(const CheckedEpoch& epoch);
  // Counts a batch; prints PROGRESS when 100 ms passed since the last one.
  void Batch();
  void Lost(const Status& status);
  void Violation(const std::string& what);
  void Done();

  int64_t last_batch_ms() const { return last_batch_ms_.load(); }
  uint64_t batches() const { return batches_.load(); }
  uint64_t violations() const { return violations_.load(); }
  uint64_t exact_epochs() const { return exact_epochs_.load(); }
  uint64_t broken_epochs() const { return broken_epochs_.load(); }  // by skips

 private:
  void Print(const std::string& line);
  FILE* out_;
  std::function<void(const std::string&)> on_violation_;
  int64_t last_progress_ms_ = 0;
  std::atomic<int64_t> last_batch_ms_{0};
  std::atomic<uint64_t> batches_{0};
  std::atomic<uint64_t> violations_{0};
  std::atomic<uint64_t> exact_epochs_{0};
  std::atomic<uint64_t> broken_epochs_{0};
};

// A parsed report line: `kind` is its first word; `words` the next ones (up
// to the count its kind has), `rest` the remaining text (a message).
struct Report {
  std::string kind;
  std::vector<std::string> words;
  std::string rest;
  uint64_t U(size_t i) const;  // words[i] as a number (0 when absent or not one)
};
Report ParseReport(const std::string& line);

}  // namespace batchcast::stress
