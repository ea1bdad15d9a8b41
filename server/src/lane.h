// Lane: the resume lane of Note [Resume] (scheduler.h): a few ring slots after
// the window's, which the producer fills with the stream's producer batches
// from a resumed consumer's (or group's) place on, from spare capacity, until
// it merges into the shared stream. One owner at a time; other resumed
// readers outside the shared stream wait for it.
//
// Producer batches lie on one grid: producer epoch e's batches start at
// e*L, e*L + B, ... and the last one of the epoch is shorter (ProducerLoop).
// The lane writes the same batches as the shared stream (a lane slot is a
// replay of a shared one: the same seqs, indices and pixels).
//
// Thread-safety: none; the Scheduler keeps it under its mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "slot_table.h"

namespace batchcast {

// Where a reader (a consumer, or a group) reads from (Note [Resume]).
enum class LaneState : uint8_t {
  kNone,     // the shared stream
  kWaiting,  // resumed outside the shared stream, waits for the lane; pins nothing
  kOwner,    // the lane
};

class Lane {
 public:
  // The owner: a consumer (its ZeroMQ identity) or a group (its id).
  struct Owner {
    std::string identity;
    uint64_t group = 0;
    bool operator==(const Owner&) const = default;
  };

  // `slots` slots numbered from `first_slot`, for producer batches of
  // `batch_size` in epochs of `epoch_len`. REQUIRES: slots > 0.
  Lane(uint32_t first_slot, uint32_t slots, uint32_t batch_size, uint64_t epoch_len);

  SlotTable& table() { return table_; }
  const SlotTable& table() const { return table_; }
  uint32_t slots() const { return table_.window(); }

  // No owner, and no slot of a former owner is still leased.
  bool Free() const { return !owner_ && table_.Idle(); }
  const std::optional<Owner>& owner() const { return owner_; }
  // Gives the lane to `owner`, whose place is seq `from`: it is written from
  // the producer batch that holds `from`. REQUIRES: Free().
  void Assign(Owner owner, uint64_t from);
  // The owner merged, left or was moved: the lane is free once its slots are
  // no longer leased.
  void Release();
  // Set once the lane's next seq lay in the shared stream's newest unbroken
  // run: the owner reads the shared stream from there (Note [Resume]).
  std::optional<uint64_t> merge_at;

  // The producer batch that holds `seq`: its first seq, and its length in a
  // stream ending at `stream_end` (0 at or after the end).
  static uint64_t BatchStart(uint64_t seq, uint64_t epoch_len, uint32_t batch_size);
  static uint32_t BatchCount(uint64_t first, uint64_t epoch_len, uint32_t batch_size,
                             uint64_t stream_end);
  // Slots a run of `samples` consecutive samples may span when it starts
  // anywhere in a producer batch and crosses a producer epoch's end (what
  // the lane must hold at once for a consumer batch, or a group's round):
  // ceil(samples / batch_size) + 2.
  static uint64_t SlotsFor(uint64_t samples, uint32_t batch_size);

  // Stats.
  uint64_t batches_written = 0;
  uint64_t owners = 0;  // readers that got it
  uint64_t merges = 0;  // of them, those that reached the shared stream

 private:
  const uint64_t epoch_len_;
  const uint32_t batch_size_;
  SlotTable table_;
  std::optional<Owner> owner_;
};

}  // namespace batchcast
