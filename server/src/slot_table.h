// SlotTable: the ring's slots as the Scheduler sees them: which batch of the
// stream each slot holds (first seq, count, producer epoch, dataset indices),
// whether it is free, being written or ready, and how many leases pin it.
// It answers the slot questions of Note [Leases] (scheduler.h): which slot may
// be written next, where an immediate joiner starts, which slots a range of
// seqs spans.
//
// Slots are not used cyclically: batch n goes into any free slot, or the
// oldest ready one that may be rewritten, so a lease pins only its own slots.
//
// Thread-safety: none; the Scheduler guards it with its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "core/src/ring_layout.h"

namespace batchcast {

// What the producer may write: the slot, the seqs it will hold, and the
// server's copy of their dataset indices (writable until the slot is
// committed: a source may replace the index of a bad file).
struct SlotGrant {
  uint32_t slot = 0;
  uint64_t first_seq = 0;
  uint32_t count = 0;
  int64_t* indices = nullptr;
};

class SlotTable {
 public:
  enum class State : uint8_t { kFree, kWriting, kReady };
  struct Slot {
    State state = State::kFree;
    uint64_t first_seq = 0;
    uint32_t count = 0;
    uint32_t epoch = 0;   // producer epoch
    uint32_t leases = 0;  // leases that pin it
    std::vector<int64_t> indices;
    uint64_t end() const { return first_seq + count; }
  };

  SlotTable(uint32_t window, uint32_t batch_size);

  uint32_t window() const { return static_cast<uint32_t>(slots_.size()); }
  const Slot& slot(uint32_t i) const { return slots_[i]; }
  uint64_t next_seq() const { return next_seq_; }    // the first seq not yet begun
  uint64_t published() const { return published_; }  // every seq below is ready

  // The first seq of the newest unbroken run of begun batches: an immediate
  // joiner starts there. Older batches kept alive only by leases are not
  // part of the run.
  uint64_t JoinFloor() const;
  // A slot that may be written now: a free one, else the oldest ready one
  // that no lease pins, whose samples are all published and below
  // `min_cursor` (the smallest cursor that pins, Note [Leases]).
  std::optional<uint32_t> FindWritable(uint64_t min_cursor) const;
  // The oldest ready, published slot that no lease pins (what the lag policy
  // frees), or nullptr when every such slot is leased or being written.
  const Slot* OldestUnleased() const;

  // Starts writing the next indices.size() seqs (from next_seq()) of
  // producer epoch `epoch` into `slot`. REQUIRES: `slot` came from
  // FindWritable; 1 <= indices.size() <= batch size.
  SlotGrant Begin(uint32_t slot, uint32_t epoch, std::span<const int64_t> indices);
  // Marks `slot` ready and advances published(). False (nothing changes) when
  // `slot` is not being written.
  bool Commit(uint32_t slot);

  // Leases seqs [first, first + count), which must all be published: appends
  // the segments they span (slot, offset, count, epoch) and their dataset
  // indices, adds a lease to each slot and returns the slots pinned.
  std::vector<uint32_t> Lease(uint64_t first, uint32_t count, std::vector<Segment>& segments,
                              std::vector<int64_t>& indices);
  // Ends a lease on each of `slots` (as returned by Lease).
  void Unpin(const std::vector<uint32_t>& slots);

  struct Counts {
    int free = 0, writing = 0, ready = 0, leased = 0;
  };
  Counts Count() const;

 private:
  std::vector<Slot> slots_;
  std::map<uint64_t, uint32_t> by_seq_;  // first_seq -> slot, for writing and ready slots
  uint64_t next_seq_ = 0;
  uint64_t published_ = 0;
};

}  // namespace batchcast
