// SlotTable: the ring's slots as the Scheduler sees them: which batch of the
// stream each slot holds (first seq, count, valid samples, producer epoch,
// dataset indices), whether it is free, being written or ready, and how many
// leases pin it. It answers the slot questions of Note [Leases]
// (scheduler.h): which slot may be written next, where an immediate joiner
// starts, which samples a range of seqs holds and which slots they lie in.
//
// Slots are not used cyclically: batch n goes into any free slot, or the
// oldest ready one that may be rewritten, so a lease pins only its own slots.
//
// Note [Holes]
// A slot spans `count` seqs of the stream (what the producer began), and its
// first `valid` seqs carry samples, at slot offsets 0..valid-1; the rest are
// *holes*: samples the source dropped (a file that failed to decode, Note
// [Dropped files] in sources/src/image_dataset.h) and compacted away
// (Source::FillBatch). Holes keep every producer epoch exactly epoch_len seqs
// long, so the seq arithmetic of joins, consumer epochs, skip targets, the
// stream end and Note [Leases] is unchanged: only the number of samples a
// range of seqs holds is no longer its length. A consumer batch is the next
// B *samples* of its epoch (Find, then Lease), as segments over the slots'
// sample offsets; a cursor passes over holes at once (SkipHoles), so they
// never pin a slot. A slot with valid = 0 is all holes. The producer loop
// commits the count its source wrote; external producers (Server::
// CommitBatch, the Python Producer) commit full slots.
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
// committed: a source that drops samples compacts them, Note [Holes]).
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
    uint32_t count = 0;   // seqs it spans
    uint32_t valid = 0;   // of which the first `valid` are samples (Note [Holes]); set at Commit
    uint32_t epoch = 0;   // producer epoch
    uint32_t leases = 0;  // leases that pin it
    uint32_t ring = 0;    // the ring it was placed on (Note [Placement], scheduler.h)
    std::vector<int64_t> indices;  // [0, valid): the dataset index of each sample
    uint64_t end() const { return first_seq + count; }
  };

  // What Find saw of the samples from a seq on (Note [Holes]).
  struct Walk {
    uint32_t samples = 0;  // samples found, at most `want`
    // When `want` samples were found: the seq after the last one; else where
    // the walk stopped (the published end of the range).
    uint64_t end = 0;
    // Every seq of [from, limit) is published, so when samples < want
    // there are no more.
    bool complete = false;
  };

  // `window` slots numbered first_slot, first_slot + 1, ...: the shared
  // ring's (from 0), or the resume lane's after them (Note [Resume],
  // scheduler.h). Every slot number below is such a number.
  SlotTable(uint32_t window, uint32_t batch_size, uint32_t first_slot = 0);

  uint32_t window() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t first_slot() const { return first_slot_; }
  // Whether slot number `slot` is one of this table's.
  bool Owns(uint32_t slot) const { return slot >= first_slot_ && slot - first_slot_ < window(); }
  const Slot& slot(uint32_t i) const { return slots_[i - first_slot_]; }
  uint64_t next_seq() const { return next_seq_; }    // the first seq not yet begun
  uint64_t published() const { return published_; }  // every seq below is ready

  // The first seq of the newest unbroken run of begun batches: an immediate
  // joiner starts there. Older batches kept alive only by leases are not
  // part of the run.
  uint64_t JoinFloor() const;
  // A slot that may be written now: a free one, else the oldest ready one
  // that no lease pins, whose seqs are all published and for whose seqs
  // [first, end) `needed(first, end)` is false (no consumer or group needs
  // them, Note [Leases]).
  template <typename Needed>
  std::optional<uint32_t> FindWritable(Needed&& needed) const {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].state == State::kFree) return first_slot_ + i;
    }
    for (const auto& [first, slot] : by_seq_) {
      const Slot& s = slots_[slot];
      if (s.state == State::kReady && s.leases == 0 && s.end() <= published_ &&
          !needed(first, s.end())) {
        return first_slot_ + slot;
      }
    }
    return std::nullopt;
  }
  // The oldest ready, published slot that no lease pins (what the lag policy
  // frees), or nullptr when every such slot is leased or being written.
  const Slot* OldestUnleased() const;
  // The slot being written that begins at `seq`, or nullptr.
  const Slot* Writing(uint64_t seq) const;

  // Starts writing the next indices.size() seqs (from next_seq()) of
  // producer epoch `epoch` into `slot` of ring `ring` (Note [Placement]).
  // REQUIRES: `slot` came from FindWritable; 1 <= indices.size() <= batch
  // size.
  SlotGrant Begin(uint32_t slot, uint32_t epoch, std::span<const int64_t> indices,
                  uint32_t ring = 0);
  // Begin for `count` seqs whose indices the caller writes (SlotGrant::
  // indices) before Commit.
  SlotGrant Begin(uint32_t slot, uint32_t epoch, uint32_t count, uint32_t ring = 0);
  // Whether Restart may run: no slot is being written or leased.
  bool Idle() const;
  // Forgets every slot's contents (all free) and continues the stream at
  // `seq`: the next Begin writes from there and everything below counts as
  // published. REQUIRES: Idle(). Note [Resume]: the shared stream moves to
  // a resumed consumer nobody else is reading beside; a lane starts at its
  // owner's place.
  void Restart(uint64_t seq);
  // Marks `slot` ready with its first `valid` seqs samples (the rest holes)
  // and advances published(). False (nothing changes) when `slot` is not
  // being written. REQUIRES: valid <= the slot's count.
  bool Commit(uint32_t slot, uint32_t valid);

  // Note [Holes]: walks the published seqs of [from, limit) in stream order,
  // holes skipped, until `want` samples were found.
  Walk Find(uint64_t from, uint64_t limit, uint32_t want) const;
  // The first seq at or after `from` that holds a sample or is not
  // published yet, at most `limit` (`from` itself when from >= limit).
  uint64_t SkipHoles(uint64_t from, uint64_t limit) const;
  // The samples among seqs [from, to): the holes of slots still in the ring
  // are left out; seqs no longer in the ring (or not yet written) count as
  // samples.
  uint64_t CountSamples(uint64_t from, uint64_t to) const;
  // Leases the first `count` samples from seq `from` on (holes skipped; Find
  // found them, all published): appends the segments they lie in (slot,
  // sample offset, count, epoch, ring) and their dataset indices, adds a lease to
  // each slot, and returns the slots pinned.
  std::vector<uint32_t> Lease(uint64_t from, uint32_t count, std::vector<Segment>& segments,
                              std::vector<int64_t>& indices);
  // Ends a lease on each of `slots` (as returned by Lease).
  void Unpin(const std::vector<uint32_t>& slots);

  // Every slot is ready and still holds seqs at or after `seq`: none may be
  // rewritten for a reader at `seq` (Note [Consumer epochs]: a starved one).
  bool FullFrom(uint64_t seq) const;

  struct Counts {
    int free = 0, writing = 0, ready = 0, leased = 0;
  };
  Counts Count() const;
  // Holes committed so far (Note [Holes]).
  uint64_t holes() const { return holes_; }

 private:
  // Calls run(slot, offset, n) for each run of samples Find walks over.
  template <typename Run>
  Walk WalkSamples(uint64_t from, uint64_t limit, uint32_t want, Run&& run) const;
  // The index of the ready slot that holds published seq `seq`.
  uint32_t SlotOf(uint64_t seq) const;

  // Index of slot number `slot` in slots_. REQUIRES: Owns(slot).
  uint32_t Local(uint32_t slot) const;

  uint32_t first_slot_;
  std::vector<Slot> slots_;
  std::map<uint64_t, uint32_t>
      by_seq_;  // first_seq -> index in slots_, for writing and ready slots
  uint64_t next_seq_ = 0;
  uint64_t published_ = 0;
  uint64_t holes_ = 0;
};

}  // namespace batchcast
