#include "epoch_checker.h"

#include <algorithm>

namespace batchcast::stress {
namespace {

constexpr uint64_t kDigestMultiplier = 0x9E3779B97F4A7C15ull;  // odd
constexpr size_t kCachedOrders = 4;

std::string Str(uint64_t v) { return std::to_string(v); }

}  // namespace

void DigestBuilder::Add(int64_t index) {
  power_ *= kDigestMultiplier;
  sum_ += (static_cast<uint64_t>(index) + 1) * power_;
}

uint64_t OrderDigest(std::span<const int64_t> indices) {
  DigestBuilder d;
  for (int64_t x : indices) d.Add(x);
  return d.value();
}

Result<EpochChecker> EpochChecker::Make(const EpochCheckerOptions& options) {
  if (options.batch_size == 0) return InvalidArgumentError("batch size 0");
  BATCHCAST_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Make(options.dataset_size, options.sampler));
  return EpochChecker(options, std::move(sampler));
}

int64_t EpochChecker::IndexAt(uint64_t seq) {
  const uint64_t e = seq / sampler_.epoch_len();
  auto it = orders_.find(e);
  if (it == orders_.end()) {
    if (orders_.size() >= kCachedOrders) orders_.erase(orders_.begin());
    it = orders_.emplace(e, sampler_.EpochOrder(e)).first;
  }
  return it->second[seq % sampler_.epoch_len()];
}

uint64_t EpochChecker::ExpectedSamples() const {
  const uint64_t l = sampler_.epoch_len();
  return options_.drop_last ? l / options_.batch_size * options_.batch_size : l;
}

Status EpochChecker::Fail(std::string what) {
  broken_ = true;
  return InvalidArgumentError("consumer epoch " + Str(epoch_) + ": " + what);
}

Status EpochChecker::OnBatch(uint32_t epoch, uint64_t first_seq, std::span<const int64_t> indices,
                             uint64_t skipped) {
  const uint64_t l = sampler_.epoch_len();
  const uint64_t size = indices.size();
  const bool jumped = skipped > skipped_;
  skipped_ = skipped;
  if (!started_) {  // (after markers of empty epochs, epoch_ > 0)
    started_ = true;
    start_ = first_seq - std::min(first_seq, uint64_t{epoch_} * l);
    epoch_first_ = next_seq_ = first_seq;
    if (options_.join == JoinPolicy::kNextEpoch && first_seq % l != 0) {
      next_seq_ = first_seq + size;
      return Fail("a next_epoch joiner started at seq " + Str(first_seq) +
                  ", not on a producer epoch boundary (epoch_len " + Str(l) + ")");
    }
  }
  const uint64_t expected_first = next_seq_;
  next_seq_ = first_seq + size;  // resynchronize here whatever happens below
  if (epoch != epoch_) {
    return Fail("a batch says consumer epoch " + Str(epoch) + ", expected " + Str(epoch_));
  }
  if (size == 0) return Fail("an empty batch");
  if (jumped || in_jump_) {
    in_jump_ = false;
    broken_ = true;  // the epoch this skip lands in is not checked for completeness
    if (first_seq < expected_first || first_seq < epoch_first_ || first_seq >= epoch_first_ + l) {
      return Fail("a skip moved to seq " + Str(first_seq) + ", outside [" + Str(expected_first) +
                  ", " + Str(epoch_first_ + l) + ")");
    }
  } else if (first_seq != expected_first) {
    return Fail("batch at seq " + Str(first_seq) + " after one that ended at " +
                Str(expected_first) +
                (first_seq < expected_first ? " (repeats samples)" : " (gap)"));
  }
  const uint64_t left = ExpectedSamples() - std::min(ExpectedSamples(), samples_);
  samples_ += size;
  ++batches_;
  if (!broken_ && size != std::min<uint64_t>(options_.batch_size, left)) {
    return Fail("batch " + Str(batches_ - 1) + " has " + Str(size) + " samples, expected " +
                Str(std::min<uint64_t>(options_.batch_size, left)));
  }
  if (first_seq + size > epoch_first_ + l) {
    return Fail("batch [" + Str(first_seq) + ", " + Str(first_seq + size) +
                ") crosses the epoch's end at " + Str(epoch_first_ + l));
  }
  for (uint64_t i = 0; i < size; ++i) {
    const int64_t want = IndexAt(first_seq + i);
    digest_.Add(indices[i]);
    if (indices[i] != want) {
      return Fail("seq " + Str(first_seq + i) + " is index " + std::to_string(indices[i]) +
                  ", the sampler says " + std::to_string(want));
    }
  }
  return Status::Ok();
}

Status EpochChecker::OnEndOfEpoch(uint32_t epoch, uint32_t batches, uint64_t skipped,
                                  CheckedEpoch* checked) {
  if (skipped > skipped_) {
    broken_ = in_jump_ = true;  // jumped forward; the next batch says where to
  }
  skipped_ = skipped;
  const uint64_t l = sampler_.epoch_len();
  Status status = Status::Ok();
  if (epoch != epoch_) {
    status = Fail("end-of-epoch marker for epoch " + Str(epoch));
  } else if (!broken_ && started_) {
    if (samples_ != ExpectedSamples()) {
      status = Fail("ended after " + Str(samples_) + " samples, expected " +
                    Str(ExpectedSamples()) + " (epoch_len " + Str(l) + ", batch " +
                    Str(options_.batch_size) + (options_.drop_last ? ", drop_last)" : ")"));
    } else if (batches != batches_ || batches != options_.batches_per_epoch) {
      status = Fail("ended after " + Str(batches_) + " batches (marker says " + Str(batches) +
                    "), expected " + Str(options_.batches_per_epoch));
    }
  }
  const bool exact = status.ok() && !broken_ && started_;
  if (checked != nullptr) {
    *checked = CheckedEpoch{epoch_, epoch_first_, exact ? samples_ : 0, digest_.value()};
  }
  if (exact) {
    ++checked_epochs_;
  } else if (status.ok()) {
    ++skipped_epochs_;
  }
  // The next consumer epoch: Note [Consumer epochs].
  ++epoch_;
  if (started_) {
    epoch_first_ = start_ + uint64_t{epoch_} * l;
    if (!in_jump_) next_seq_ = epoch_first_;
  }
  samples_ = 0;
  batches_ = 0;
  broken_ = in_jump_;
  digest_ = DigestBuilder();
  return status;
}

}  // namespace batchcast::stress
