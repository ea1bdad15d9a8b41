// EpochChecker: the exactly-once and in-order rules of one consumer
// connection (docs/semantics.md, "Consumer semantics"; Note [Consumer epochs] in
// server/src/scheduler.h), checked batch by batch against the server's
// sampler, for the stress programs (tests/stress: chaos, fuzz, soak).
//
// The stream is seq-numbered from the server's start and producer epoch e
// holds seqs [e*L, (e+1)*L) in Sampler::EpochOrder(e) (L = epoch_len; true for
// the synthetic source, which has no bad files). So the sample at seq s must
// be EpochOrder(s / L)[s % L]. Consumer epoch k of a connection covers seqs
// [start + k*L, start + (k+1)*L), where start is the first seq it was served:
//  - every batch continues the previous one (first_seq = previous end), has
//    the consumer's batch size (only the last of an epoch may be shorter,
//    without drop_last), and carries the current consumer epoch number;
//  - an epoch ends after exactly L samples (drop_last: floor(L/B)*B) in
//    batches_per_epoch batches, and epoch k+1 starts at start + (k+1)*L;
//  - next_epoch joiners start on a producer-epoch boundary (start % L == 0),
//    so each of their epochs *is* EpochOrder(e): every index exactly once, in
//    the sampler's order. Immediate joiners' epochs straddle two producer
//    epochs, so an index may occur twice in one consumer epoch (once from
//    each producer epoch; docs/semantics.md: "coverage is approximate"); the checker
//    holds them to "every stream position exactly once, in order".
// With lag_policy=skip a consumer may jump forward (Batch::skipped() grows):
// the epoch that jump lands in is then not checked for completeness
// (counted in skipped_epochs()).
//
// Thread-safety: none (one per consumer connection, used by one thread).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "batchcast/core/join_policy.h"
#include "batchcast/core/status.h"
#include "core/src/sampler.h"

namespace batchcast::stress {

// An order-sensitive 64-bit digest of a sequence of dataset indices:
// sum over i of (x_i + 1) * K^(i+1) mod 2^64 (K odd). tests/stress/soak_loader.py
// computes the same with numpy, so a Python consumer's epochs can be compared
// with Sampler::EpochOrder.
uint64_t OrderDigest(std::span<const int64_t> indices);

// Running form of OrderDigest.
class DigestBuilder {
 public:
  void Add(int64_t index);
  uint64_t value() const { return sum_; }

 private:
  uint64_t sum_ = 0;
  uint64_t power_ = 1;
};

struct EpochCheckerOptions {
  uint64_t dataset_size = 0;
  SamplerOptions sampler;
  uint32_t batch_size = 0;
  bool drop_last = true;
  JoinPolicy join = JoinPolicy::kImmediate;
  uint64_t batches_per_epoch = 0;  // from the server's WELCOME
};

// A consumer epoch that passed every check.
struct CheckedEpoch {
  uint32_t epoch = 0;      // the consumer's epoch number
  uint64_t first_seq = 0;  // its first sample's seq
  uint64_t samples = 0;
  uint64_t digest = 0;  // OrderDigest of its indices
};

class EpochChecker {
 public:
  // InvalidArgument for options the Sampler refuses or a zero batch size.
  static Result<EpochChecker> Make(const EpochCheckerOptions& options);

  // A delivered batch. InvalidArgument (its message says which rule) when it
  // breaks one; the checker then resynchronizes on this batch's position, so
  // later batches are checked again.
  Status OnBatch(uint32_t epoch, uint64_t first_seq, std::span<const int64_t> indices,
                 uint64_t skipped);
  // The end-of-epoch marker of consumer epoch `epoch` with `batches` batches
  // (`skipped` as the marker reports it). On success *checked (when given)
  // describes the epoch; checked->samples is 0 when a skip broke it.
  Status OnEndOfEpoch(uint32_t epoch, uint32_t batches, uint64_t skipped,
                      CheckedEpoch* checked = nullptr);

  uint64_t epoch_len() const { return sampler_.epoch_len(); }
  uint64_t checked_epochs() const { return checked_epochs_; }
  uint64_t skipped_epochs() const { return skipped_epochs_; }
  // The dataset index at stream position `seq`.
  int64_t IndexAt(uint64_t seq);

 private:
  EpochChecker(EpochCheckerOptions options, Sampler sampler)
      : options_(options), sampler_(std::move(sampler)) {}
  uint64_t ExpectedSamples() const;
  Status Fail(std::string what);

  EpochCheckerOptions options_;
  Sampler sampler_;
  std::map<uint64_t, std::vector<int64_t>> orders_;  // a few producer epochs, cached

  bool started_ = false;      // a batch was seen on this connection
  uint64_t start_ = 0;        // seq of the connection's first sample
  uint32_t epoch_ = 0;        // the current consumer epoch
  uint64_t epoch_first_ = 0;  // first seq of the current epoch
  uint64_t next_seq_ = 0;     // where the next batch must start
  uint64_t samples_ = 0;      // samples of the current epoch so far
  uint32_t batches_ = 0;      // batches of the current epoch so far
  bool broken_ = false;       // a skip (or a violation) broke the current epoch
  bool in_jump_ = false;      // skipped forward; the next batch says where to
  uint64_t skipped_ = 0;
  DigestBuilder digest_;
  uint64_t checked_epochs_ = 0;
  uint64_t skipped_epochs_ = 0;
};

}  // namespace batchcast::stress
