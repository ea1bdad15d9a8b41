#include "consumer_group.h"

#include <algorithm>

#include "core/src/logging.h"

namespace batchcast {
namespace {

std::string List(const std::vector<uint32_t>& v) {
  std::string s;
  for (uint32_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s.empty() ? "none" : s;
}

}  // namespace

ConsumerGroup::ConsumerGroup(uint64_t id, Spec spec, uint64_t start, uint64_t epoch_len,
                             uint64_t rounds_per_epoch, Clock::time_point created)
    : id_(id),
      spec_(std::move(spec)),
      rounds_per_epoch_(rounds_per_epoch),
      welcome_start_(start),
      created_(created),
      frontier_(start, epoch_len, spec_.world_size * spec_.batch_size, /*drop_last=*/true),
      ranks_(spec_.world_size) {
  BATCHCAST_CHECK(rounds_per_epoch_ > 0);
}

void ConsumerGroup::Restart(uint64_t start) {
  BATCHCAST_CHECK(rounds_ == 0 && entries_.empty());
  frontier_ =
      ConsumerCursor(start, frontier_.epoch_len(), frontier_.batch_size(), frontier_.drop_last());
}

void ConsumerGroup::Resume(const ConsumerCursor& frontier, uint32_t saved_batch) {
  BATCHCAST_CHECK(Fresh());
  BATCHCAST_CHECK(frontier.batch_size() == frontier_.batch_size() && frontier.drop_last());
  frontier_ = frontier;
  if (saved_batch == 0 || saved_batch == spec_.batch_size) return;
  // Each rank got `step` batches of saved_batch samples: ceil(step x
  // saved_batch / B) rounds of the new size, so the epoch holds what is left
  // of rounds_per_epoch after them. Rounding up never lets a rank get more
  // samples in the epoch than rounds_per_epoch rounds hold, so the groups of
  // every node (each on its shard) still stop at the same count.
  const uint64_t step = frontier.step();
  const uint64_t served = (step * saved_batch + spec_.batch_size - 1) / spec_.batch_size;
  const uint64_t left = served >= rounds_per_epoch_ ? 0 : rounds_per_epoch_ - served;
  resumed_epoch_ = ResumedEpoch{frontier.epoch(), step + left};
}

uint64_t ConsumerGroup::RoundsCap(uint32_t epoch) const {
  return resumed_epoch_ && resumed_epoch_->epoch == epoch ? resumed_epoch_->rounds
                                                          : rounds_per_epoch_;
}

bool ConsumerGroup::HoldsLaneRounds() const {
  for (const Entry& e : entries_) {
    if (e.lane) return true;
  }
  return false;
}

Status ConsumerGroup::CheckJoin(const proto::Hello& hello) const {
  const std::string g = "group '" + spec_.name + "'";
  if (hello.world_size != spec_.world_size) {
    return InvalidArgumentError(g + " has world_size " + std::to_string(spec_.world_size) +
                                "; this consumer says " + std::to_string(hello.world_size));
  }
  if (hello.batch_size != spec_.batch_size) {
    return InvalidArgumentError(g + " reads batches of " + std::to_string(spec_.batch_size) +
                                " (its first rank's); all ranks of a group must use the same "
                                "batch size, this one asked for " +
                                std::to_string(hello.batch_size));
  }
  if (hello.join != spec_.join) {
    return InvalidArgumentError(g + " joined with join=" + std::string(JoinPolicyName(spec_.join)) +
                                "; all ranks must use the same join policy, this one asked for " +
                                std::string(JoinPolicyName(hello.join)));
  }
  if (ranks_[hello.rank].state != RankState::kAbsent) {
    return InvalidArgumentError("rank " + std::to_string(hello.rank) + " of " + g +
                                " is already connected");
  }
  return Status::Ok();
}

void ConsumerGroup::Join(uint32_t rank, const std::string& identity, uint16_t prefetch) {
  Rank& r = ranks_[rank];
  BATCHCAST_CHECK(r.state == RankState::kAbsent);
  r.state = RankState::kIn;
  r.identity = identity;
  ++joined_;
  max_prefetch_ = std::max(max_prefetch_, prefetch);
}

void ConsumerGroup::Leave(uint32_t rank, const std::string& who_why) {
  Rank& r = ranks_[rank];
  if (r.state != RankState::kIn) return;
  r.state = RankState::kLeft;
  ++left_;
  if (r.next < left_at_) left_at_ = r.next;
  if (left_reason_.empty()) left_reason_ = who_why;
  Trim();
}

std::string ConsumerGroup::BrokenMessage() const {
  return "group '" + spec_.name + "' is broken: " + left_reason_ +
         "; this rank gets no batch its peer did not get, so that every rank keeps the same "
         "count (a DDP job cannot go on without one of its ranks: restart all of them)";
}

std::string ConsumerGroup::RanksIn() const {
  std::vector<uint32_t> v;
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].state == RankState::kIn) v.push_back(r);
  }
  return List(v);
}

std::string ConsumerGroup::RanksAbsent() const {
  std::vector<uint32_t> v;
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].state == RankState::kAbsent) v.push_back(r);
  }
  return List(v);
}

uint64_t ConsumerGroup::MinNext() const {
  uint64_t m = kNever;
  for (const Rank& r : ranks_) {
    if (r.state != RankState::kLeft) m = std::min(m, r.next);
  }
  return m;
}

void ConsumerGroup::Trim() {
  const uint64_t m = MinNext();
  while (!entries_.empty() && base_ < m) {
    entries_.pop_front();
    ++base_;
  }
}

const ConsumerGroup::Entry* ConsumerGroup::EntryAt(uint64_t index) const {
  if (index < base_ || index - base_ >= entries_.size()) return nullptr;
  return &entries_[index - base_];
}

void ConsumerGroup::Settle(const SlotTable& slots, uint64_t stream_end) {
  ConsumerCursor& f = frontier_;
  if (f.EpochStart() >= stream_end) return;
  const uint64_t end = f.EpochEnd(stream_end);
  if (f.step() >= RoundsCap(f.epoch())) {
    // The smallest shard's count is reached: the rest of this (larger)
    // shard's epoch is dropped like the remainder.
    f.PassTo(end, stream_end);
    return;
  }
  f.PassTo(slots.SkipHoles(f.position(), end), stream_end);
  if (f.position() < end) {
    const SlotTable::Walk w = slots.Find(f.position(), end, f.batch_size());
    if (w.complete && w.samples < f.batch_size()) f.PassTo(end, stream_end);
  }
}

ConsumerGroup::Determined ConsumerGroup::DetermineOne(const SlotTable& slots, uint64_t stream_end) {
  ConsumerCursor& f = frontier_;
  Settle(slots, stream_end);
  SlotTable::Walk supply;
  if (f.EpochStart() < stream_end) {
    supply = slots.Find(f.position(), f.EpochEnd(stream_end), f.batch_size());
  }
  const ConsumerCursor::Plan plan = f.PlanNext(stream_end, {supply.samples, supply.complete});
  switch (plan.kind) {
    case ConsumerCursor::Plan::Kind::kStreamEnded:
      return Determined::kStreamEnded;
    case ConsumerCursor::Plan::Kind::kWait:
      return Determined::kWait;
    case ConsumerCursor::Plan::Kind::kEndOfEpoch: {
      Entry e{true, f.epoch(), f.step(), {}, 0, 0, cut_from_lane, f.skipped()};
      f.EndEpoch(stream_end);
      e.epoch_start = f.EpochStart();  // the next epoch's
      e.next = std::max(f.position(), e.epoch_start);
      entries_.push_back(std::move(e));
      return Determined::kOne;
    }
    case ConsumerCursor::Plan::Kind::kBatch:
      break;
  }
  // A whole round is published: cut it into one chunk of B samples per rank.
  const uint64_t end = f.EpochEnd(stream_end);
  Entry e{false,          f.epoch(), f.step(),      std::vector<Chunk>(spec_.world_size),
          f.EpochStart(), 0,         cut_from_lane, f.skipped()};
  uint64_t from = f.position();
  for (Chunk& c : e.chunks) {
    c.first = slots.SkipHoles(from, end);
    const SlotTable::Walk w = slots.Find(c.first, end, spec_.batch_size);
    BATCHCAST_CHECK(w.samples == spec_.batch_size) << "a published round lost samples";
    c.end = from = w.end;
  }
  BATCHCAST_CHECK(from == supply.end);
  ++rounds_;
  f.Advance(from, stream_end);
  e.next = f.position();
  entries_.push_back(std::move(e));
  return Determined::kOne;
}

ConsumerGroup::Plan ConsumerGroup::PlanRank(uint32_t rank, const SlotTable& slots,
                                            uint64_t stream_end) {
  const Rank& r = ranks_[rank];
  BATCHCAST_CHECK(r.state == RankState::kIn);
  Plan p;
  while (EntryAt(r.next) == nullptr) {
    // A broken group serves no round beyond its leaver's (kBroken below), so
    // a rank never waits in it for peers, absent ones included: they will
    // not come (a new HELLO forms a new group).
    if (!ended() && r.next - MinNext() >= max_ahead()) {
      peers_waiting_ = true;
      p.kind = Plan::Kind::kWaitForPeers;
      return p;
    }
    switch (DetermineOne(slots, stream_end)) {
      case Determined::kOne:
        continue;
      case Determined::kWait:
        p.kind = Plan::Kind::kWait;
        return p;
      case Determined::kStreamEnded:
        p.kind = Plan::Kind::kStreamEnded;
        return p;
    }
  }
  const Entry& e = *EntryAt(r.next);
  p.epoch = e.epoch;
  p.step = e.step;
  p.epoch_start = e.epoch_start;
  p.next_seq = e.next;
  p.lane = e.lane;
  p.skipped = e.skipped;
  if (e.end_of_epoch) {
    p.kind = Plan::Kind::kEndOfEpoch;
  } else if (r.next >= left_at_) {
    p.kind = Plan::Kind::kBroken;
  } else {
    p.kind = Plan::Kind::kBatch;
    p.from = e.chunks[rank].first;
    p.count = spec_.batch_size;
  }
  return p;
}

void ConsumerGroup::Delivered(uint32_t rank) {
  ranks_[rank].next += 1;
  ++deliveries_;
  Trim();
}

bool ConsumerGroup::Starved(const SlotTable& slots) const {
  return slots.FullFrom(frontier_.position());
}

uint64_t ConsumerGroup::PassOver(const SlotTable& slots, uint64_t stream_end) {
  const SlotTable::Walk w =
      slots.Find(frontier_.position(), frontier_.EpochEnd(stream_end), frontier_.batch_size());
  passed_over_ += w.samples;
  frontier_.PassTo(w.end, stream_end);
  return w.samples;
}

bool ConsumerGroup::Needs(uint64_t lo, uint64_t hi, bool frontier_pins) const {
  if (!Live()) return false;
  if (frontier_pins && frontier_.position() < hi) return true;
  for (size_t j = 0; j < entries_.size(); ++j) {
    const Entry& e = entries_[j];
    if (e.end_of_epoch) continue;
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].state == RankState::kLeft || ranks_[r].next > base_ + j) continue;
      const Chunk& c = e.chunks[r];
      if (c.first < hi && lo < c.end) return true;
    }
  }
  return false;
}

void ConsumerGroup::SkipTo(uint64_t target, uint64_t samples) { frontier_.SkipTo(target, samples); }

uint32_t ConsumerGroup::RankEpoch(uint32_t rank) const {
  const Entry* e = EntryAt(ranks_[rank].next);
  return e != nullptr ? e->epoch : frontier_.epoch();
}

uint32_t ConsumerGroup::RankStep(uint32_t rank) const {
  const Entry* e = EntryAt(ranks_[rank].next);
  return e != nullptr ? e->step : frontier_.step();
}

uint64_t ConsumerGroup::RankCursor(uint32_t rank) const {
  for (uint64_t i = ranks_[rank].next; EntryAt(i) != nullptr; ++i) {
    const Entry& e = *EntryAt(i);
    if (!e.end_of_epoch) return e.chunks[rank].first;
  }
  return frontier_.position();
}

}  // namespace batchcast
