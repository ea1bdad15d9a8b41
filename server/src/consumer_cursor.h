// ConsumerCursor: one consumer's position in the stream and the arithmetic of
// its epochs (Note [Consumer epochs] in scheduler.h): where it joins, where
// each of its epochs ends, what its next NEXT is answered with (given the
// samples the ring holds from its position on: seqs may be holes, Note
// [Holes] in slot_table.h), and how the cursor moves after a batch, an
// END_OF_EPOCH, over holes or a skip.
//
// Thread-safety: a value type; the Scheduler keeps one per consumer under its
// mutex.
#pragma once

#include <cstdint>
#include <string>

#include "batchcast/core/join_policy.h"

namespace batchcast {

class ConsumerCursor {
 public:
  // A consumer of `batch_size` samples whose epochs are `epoch_len` samples
  // long, the first one starting at seq `start`.
  ConsumerCursor(uint64_t start, uint64_t epoch_len, uint32_t batch_size, bool drop_last);
  // A cursor at a saved place (Note [Resume] in scheduler.h): its epoch
  // `epoch` starts at seq `epoch_start`, `step` batches of it were served
  // and the next one starts at `position`, `skipped` samples were skipped.
  // REQUIRES: ValidPlace(...).
  static ConsumerCursor Resumed(uint64_t epoch_len, uint32_t batch_size, bool drop_last,
                                uint32_t epoch, uint32_t step, uint64_t epoch_start,
                                uint64_t position, uint64_t skipped);
  // Why such a place cannot be one of any consumer's ("" when it can): an
  // epoch that would start before seq 0, a position outside its epoch.
  static std::string InvalidPlace(uint64_t epoch_len, uint32_t epoch, uint64_t epoch_start,
                                  uint64_t position);

  // The seq a consumer joining now starts at, given `floor`, the first seq of
  // the newest unbroken run of batches in the ring: `floor` itself
  // (immediate), or the first producer-epoch start at or after it
  // (next_epoch; so the current epoch when its start is still held).
  static uint64_t JoinStart(JoinPolicy join, uint64_t floor, uint64_t epoch_len);
  // Batches in one consumer epoch: floor(L/B) with drop_last, ceil(L/B) without.
  static uint64_t BatchesPerEpoch(uint64_t epoch_len, uint32_t batch_size, bool drop_last);

  // The samples of the current epoch from position() on, as far as they are
  // published (SlotTable::Find with want = batch_size()).
  struct Supply {
    uint32_t samples = 0;   // at most batch_size()
    bool complete = false;  // every seq up to the epoch end is published
  };
  // What the next NEXT gets, with the stream ending at `stream_end`
  // (UINT64_MAX when unknown).
  struct Plan {
    enum class Kind {
      kStreamEnded,  // OutOfRange: the current epoch starts at or after the stream end
      kEndOfEpoch,   // END_OF_EPOCH: nothing (or, with drop_last, less than B) is left
      kBatch,        // the next `count` samples, from position() on
      kWait,         // fewer than B samples are published and the epoch goes on
    };
    Kind kind = Kind::kBatch;
    uint32_t count = 0;
  };
  Plan PlanNext(uint64_t stream_end, Supply supply) const;

  // After an END_OF_EPOCH: the next epoch begins (the cursor moves to the
  // ended epoch's end if it was not there yet).
  void EndEpoch(uint64_t stream_end);
  // After a BATCH whose last sample is at seq `to` - 1. With drop_last, a
  // remainder of the epoch of fewer than batch_size seqs is passed over at
  // once, so it pins nothing.
  void Advance(uint64_t to, uint64_t stream_end);
  // Moves forward to `to` (at most the epoch end) over seqs that need no
  // reading: holes, or with drop_last a remainder known to hold fewer than
  // batch_size samples. Counts nothing.
  void PassTo(uint64_t to, uint64_t stream_end);
  // Jumps forward to `target` (lag policy skip, or back after a skip onto
  // data that was overwritten), counting `samples`, the samples passed over.
  // Does nothing when the cursor is at or past `target`.
  void SkipTo(uint64_t target, uint64_t samples);

  // The first seq of the current epoch and the seq its range ends at
  // (exclusive): [start + k*L, start + (k+1)*L) clipped to `stream_end`.
  uint64_t EpochStart() const;
  uint64_t EpochEnd(uint64_t stream_end) const;

  uint64_t start() const { return start_; }
  uint64_t position() const { return position_; }  // the next seq to serve
  uint32_t epoch() const { return epoch_; }        // the consumer's epoch number
  uint32_t step() const { return step_; }          // batches served in this epoch
  uint64_t skipped() const { return skipped_; }    // samples skipped so far
  uint32_t batch_size() const { return batch_size_; }
  uint64_t epoch_len() const { return epoch_len_; }
  bool drop_last() const { return drop_last_; }

 private:
  uint64_t start_;
  uint64_t epoch_len_;
  uint32_t batch_size_;
  bool drop_last_;
  uint64_t position_;
  uint32_t epoch_ = 0;
  uint32_t step_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace batchcast
