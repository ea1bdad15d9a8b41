// ConsumerGroup: one consumer group's share of the stream (Note [Consumer
// groups] in scheduler.h): its membership (which ranks joined, which left),
// its *frontier* (a ConsumerCursor whose batches are whole rounds of
// world_size x B samples) and the *entries* it determined from the frontier:
// rounds (one chunk of B samples per rank) and END_OF_EPOCH markers, which
// every rank receives in the same order. It answers which seqs the group
// still needs (Note [Leases] (b)) and what a rank's next NEXT gets.
//
// Thread-safety: none; the Scheduler keeps its groups under its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "batchcast/core/join_policy.h"
#include "batchcast/core/status.h"
#include "consumer_cursor.h"
#include "core/src/protocol.h"
#include "lane.h"
#include "scheduler_env.h"
#include "slot_table.h"

namespace batchcast {

class ConsumerGroup {
 public:
  // What the first rank's HELLO fixed; later ranks must match it.
  struct Spec {
    std::string name;
    uint32_t world_size = 0;
    uint32_t batch_size = 0;
    JoinPolicy join = JoinPolicy::kImmediate;
  };
  // A group whose epochs start at seq `start`, `epoch_len` seqs each, with at
  // most `rounds_per_epoch` rounds each (>= 1: the smallest shard's count,
  // Note [Consumer groups]).
  ConsumerGroup(uint64_t id, Spec spec, uint64_t start, uint64_t epoch_len,
                uint64_t rounds_per_epoch, Clock::time_point created);

  uint64_t id() const { return id_; }
  const Spec& spec() const { return spec_; }
  uint64_t rounds_per_epoch() const { return rounds_per_epoch_; }
  Clock::time_point created() const { return created_; }
  // Where WELCOME tells every rank it starts: the group's start when its
  // first rank joined, kept when the frontier skips or the group restarts
  // before its first round, so that the places its ranks save before their
  // first batch are the same and the group resumes from them (Note [Resume]).
  uint64_t welcome_start() const { return welcome_start_; }

  // ---- membership ----
  // InvalidArgument naming the difference when `hello` does not match the
  // spec (batch size, world size, join), or its rank is taken.
  Status CheckJoin(const proto::Hello& hello) const;
  // REQUIRES: CheckJoin(hello) passed.
  void Join(uint32_t rank, const std::string& identity, uint16_t prefetch);
  // The rank leaves (BYE, eviction, failure, death): its undelivered chunks
  // pin nothing any more and its peers get no round beyond the ones it got.
  // `who_why` ("rank 2 (consumer 7, pid 12) ... its process exited") is what
  // the peers are told; the first departure's is kept.
  void Leave(uint32_t rank, const std::string& who_why);
  // Every rank joined (and none left yet).
  bool complete() const { return joined_ == spec_.world_size && !ended(); }
  // Accepts no more ranks: a rank left or the group failed.
  bool ended() const { return left_at_ != kNever || failed_; }
  // Formation timeout or eviction: every rank is told and detached.
  void MarkFailed() { failed_ = true; }
  // Why a rank left (the first departure), for its peers' error.
  const std::string& left_reason() const { return left_reason_; }
  // A rank left and the group did not fail: its peers get no round beyond
  // the leaver's.
  bool broken() const { return left_at_ != kNever && !failed_; }
  // What a rank of a broken group is told (Cancelled) instead of a round its
  // leaver did not get.
  std::string BrokenMessage() const;
  // Rounds a rank may be ahead of its slowest peer: enough for its prefetch
  // in lockstep (DDP), few enough that a late or stalled rank pins little.
  uint64_t max_ahead() const { return uint64_t{max_prefetch_} + 2; }
  bool failed() const { return failed_; }
  bool HasRank(uint32_t rank) const { return ranks_[rank].state == RankState::kIn; }
  const std::string& identity(uint32_t rank) const { return ranks_[rank].identity; }
  // Ranks that joined (and did not leave) / that never joined, as "0, 2".
  std::string RanksIn() const;
  std::string RanksAbsent() const;
  // Connected consumers that belong to it (the Scheduler erases the group at
  // zero).
  int members = 0;

  // ---- the stream ----
  struct Plan {
    enum class Kind {
      kBatch,         // chunk [from, from + count samples) of round `step` of `epoch`
      kEndOfEpoch,    // `epoch` ended after `step` rounds
      kStreamEnded,   // OutOfRange
      kWait,          // data not published yet
      kWaitForPeers,  // this rank is max_ahead rounds ahead of its slowest peer
      kBroken,        // a peer left before this round: no batch it did not get
    };
    Kind kind = Kind::kWait;
    uint64_t from = 0;
    uint32_t count = 0;
    uint32_t epoch = 0;
    uint32_t step = 0;
    // The group's skipped samples when the entry was determined: every rank
    // reports the same for it, whenever it fetches it (Note [Resume]).
    uint64_t skipped = 0;
    // Note [Resume]: where `epoch` starts (kEndOfEpoch: the next epoch),
    // where the group continues after this entry, and whether its round was
    // cut from the lane's slots.
    uint64_t epoch_start = 0;
    uint64_t next_seq = 0;
    bool lane = false;
  };
  // What `rank`'s next NEXT gets; determines entries from the frontier as
  // needed (`slots` published up to the stream end `stream_end`).
  Plan PlanRank(uint32_t rank, const SlotTable& slots, uint64_t stream_end);
  // `rank` got the entry PlanRank planned (a batch or END_OF_EPOCH).
  void Delivered(uint32_t rank);
  // Entries delivered so far (to any rank).
  uint64_t deliveries() const { return deliveries_; }
  // Whether a rank was told kWaitForPeers since the last call.
  bool TakePeersWaiting() { return std::exchange(peers_waiting_, false); }
  // The frontier's round cannot be completed: every slot is ready and still
  // needed by the frontier (more than half of the ring's seqs are holes), so
  // only the group can move (Note [Consumer epochs]).
  bool Starved(const SlotTable& slots) const;
  // Passes the frontier over the samples the ring holds from it on (a
  // starved round, dropped for every rank); returns how many.
  uint64_t PassOver(const SlotTable& slots, uint64_t stream_end);

  // Note [Leases] (b): whether the group still needs a seq of [lo, hi): the
  // frontier's (when `frontier_pins`) and the undelivered chunks of the ranks
  // that did not leave (ranks not joined yet included).
  bool Needs(uint64_t lo, uint64_t hi, bool frontier_pins) const;
  // Pins only while someone may still ask for data.
  bool Live() const { return !failed_ && left_ < spec_.world_size; }

  // Note [Unconfirmed consumers]: starts the group's first epoch at `start`
  // instead. REQUIRES: rounds() == 0 (nothing was determined for it).
  void Restart(uint64_t start);
  // Note [Resume]: the group continues from `frontier` (a cursor of batch
  // world_size x batch size), whose step counts rounds of ranks' batches of
  // `saved_batch` (0: this group's). REQUIRES: Fresh().
  void Resume(const ConsumerCursor& frontier, uint32_t saved_batch);
  // Nothing was determined for it yet: no round, no END_OF_EPOCH.
  bool Fresh() const { return rounds_ == 0 && entries_.empty() && base_ == 0; }
  const ConsumerCursor& frontier_cursor() const { return frontier_; }
  // Note [Resume]: the place its first rank resumed it at (later ranks must
  // bring the same), where it reads, and whether its rounds are cut from
  // the lane's slots (the lane's owner, not merged yet).
  std::optional<proto::Resume> resumed;
  LaneState lane = LaneState::kNone;
  bool cut_from_lane = false;
  // Some entry cut from the lane is not yet delivered to every rank.
  bool HoldsLaneRounds() const;

  // ---- lag policy skip (Note [Lag policy]) ----
  void SkipTo(uint64_t target, uint64_t samples);
  bool skipping = false;  // as Consumer::skipping, for the frontier

  // ---- stats ----
  uint64_t frontier() const { return frontier_.position(); }
  // Where its first epoch starts (its epochs are epoch_len seqs from there).
  uint64_t start() const { return frontier_.start(); }
  uint64_t skipped() const { return frontier_.skipped(); }
  uint64_t passed_over() const { return passed_over_; }
  uint64_t rounds() const { return rounds_; }
  // `rank`'s position: the epoch and step of its next entry, and the first
  // seq it still needs (its next undelivered chunk, or the frontier).
  uint32_t RankEpoch(uint32_t rank) const;
  uint32_t RankStep(uint32_t rank) const;
  uint64_t RankCursor(uint32_t rank) const;

 private:
  static constexpr uint64_t kNever = UINT64_MAX;
  enum class RankState : uint8_t { kAbsent, kIn, kLeft };
  struct Rank {
    RankState state = RankState::kAbsent;
    std::string identity;
    uint64_t next = 0;  // absolute index of the next entry it gets
  };
  struct Chunk {
    uint64_t first = 0;  // seq of its first sample
    uint64_t end = 0;    // the seq after its last sample
  };
  struct Entry {
    bool end_of_epoch = false;
    uint32_t epoch = 0;
    uint32_t step = 0;          // round number in the epoch; END_OF_EPOCH: rounds in it
    std::vector<Chunk> chunks;  // one per rank (rounds)
    uint64_t epoch_start = 0;   // Note [Resume]: where `epoch` starts (END_OF_EPOCH: the next),
    uint64_t next = 0;          // where the frontier went after it,
    bool lane = false;          // and whether it was cut from the lane
    uint64_t skipped = 0;       // the frontier's skipped samples when it was determined
  };
  enum class Determined { kOne, kWait, kStreamEnded };
  // Determines the next entry from the frontier.
  Determined DetermineOne(const SlotTable& slots, uint64_t stream_end);
  // Moves the frontier over holes, a known-short remainder and rounds beyond
  // rounds_per_epoch (Note [Consumer groups]).
  void Settle(const SlotTable& slots, uint64_t stream_end);
  // The rounds `epoch` may hold: rounds_per_epoch, but in the epoch a group
  // resumed in with another batch size (Resume).
  uint64_t RoundsCap(uint32_t epoch) const;
  // The smallest `next` of the ranks that did not leave (kNever: none).
  uint64_t MinNext() const;
  // Drops the entries every remaining rank is past.
  void Trim();
  const Entry* EntryAt(uint64_t index) const;

  const uint64_t id_;
  const Spec spec_;
  const uint64_t rounds_per_epoch_;
  const uint64_t welcome_start_;
  // Note [Resume]: the epoch a group resumed in with another batch size, and
  // the rounds it may hold (the saved step, then the rounds left after it).
  struct ResumedEpoch {
    uint32_t epoch = 0;
    uint64_t rounds = 0;
  };
  std::optional<ResumedEpoch> resumed_epoch_;
  const Clock::time_point created_;
  ConsumerCursor frontier_;
  std::deque<Entry> entries_;
  uint64_t base_ = 0;  // absolute index of entries_.front()
  std::vector<Rank> ranks_;
  uint32_t joined_ = 0;  // ranks that joined (left ones included)
  uint32_t left_ = 0;
  uint16_t max_prefetch_ = 1;
  uint64_t left_at_ = kNever;  // the smallest entry count of a departed rank
  bool failed_ = false;
  uint64_t passed_over_ = 0;
  uint64_t rounds_ = 0;  // rounds determined
  uint64_t deliveries_ = 0;
  bool peers_waiting_ = false;
  std::string left_reason_;  // the first departure's who_why
};

}  // namespace batchcast
