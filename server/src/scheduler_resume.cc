// Scheduler: resuming consumers at a saved place (Note [Resume]): RESUME,
// where a resumed reader reads (the shared stream, the lane, or the line for
// it), moving the shared stream, merging, and the built-in producer's
// choice between the shared stream and the lane (BeginWork).
#include <algorithm>
#include <vector>

#include "core/src/logging.h"
#include "core/src/stream_identity.h"
#include "scheduler.h"

namespace batchcast {
namespace {

std::string PlaceText(uint32_t epoch, uint32_t step, uint64_t seq) {
  return "epoch " + std::to_string(epoch) + " after " + std::to_string(step) + " batches (seq " +
         std::to_string(seq) + ")";
}

}  // namespace

SlotTable& Scheduler::TableOf(const Consumer& c) {
  return c.lane == LaneState::kOwner ? lane_->table() : slots_;
}

uint32_t Scheduler::NextSharedCountLocked() const {
  return Lane::BatchCount(slots_.next_seq(), config_.epoch_len, config_.batch_size, stream_end_);
}

bool Scheduler::InStreamLocked(uint64_t seq) const {
  if (seq < slots_.JoinFloor()) return false;
  // An external producer writes on in order: a place ahead is reached.
  // A place at the stream's end needs no more samples.
  return !config_.replay || seq >= stream_end_ || seq < slots_.next_seq() + NextSharedCountLocked();
}

std::string Scheduler::UnservablePlaceLocked(uint64_t seq, uint64_t samples,
                                             const Lane::Owner& reader) const {
  if (InStreamLocked(seq)) return "";
  const std::string where =
      "seq " + std::to_string(seq) + " is not in the stream (the ring holds seqs " +
      std::to_string(slots_.JoinFloor()) + " to " + std::to_string(slots_.next_seq()) + ")";
  if (!config_.replay) {
    return where +
           " and this server's producer (an external one) writes its stream in order: it cannot "
           "write it again";
  }
  if (!SharedReadLocked(&reader)) return "";  // the stream moves there (MoveStreamLocked)
  if (!lane_) {
    return where +
           ", other consumers read it, and this server keeps no resume slots (--resume-slots 0)";
  }
  const uint64_t need = Lane::SlotsFor(samples, config_.batch_size);
  if (need > lane_->slots()) {
    return where + ", other consumers read it, and a catch-up of batches of " +
           std::to_string(samples) + " samples needs " + std::to_string(need) +
           " resume slots; this server keeps " + std::to_string(lane_->slots()) +
           " (start it with --resume-slots " + std::to_string(need) + ")";
  }
  return "";
}

bool Scheduler::SharedReadLocked(const Lane::Owner* except) const {
  const bool merging = lane_ && lane_->merge_at.has_value();
  for (const auto& [_, c] : consumers_) {
    if (!c.attached || !c.confirmed) continue;
    if (except != nullptr &&
        (except->group != 0 ? c.group != nullptr && c.group->id() == except->group
                            : c.identity == except->identity)) {
      continue;
    }
    const LaneState state = c.group != nullptr ? c.group->lane : c.lane;
    const bool lane_rounds = c.group != nullptr && c.group->cut_from_lane;
    if (state == LaneState::kNone) return true;
    if (state == LaneState::kOwner && (merging || (c.group != nullptr && !lane_rounds))) {
      return true;
    }
  }
  return false;
}

std::optional<uint64_t> Scheduler::MergePinLocked() const {
  if (!lane_ || !lane_->owner() || !lane_->merge_at) return std::nullopt;
  return lane_->merge_at;
}

std::optional<uint64_t> Scheduler::PlaceOfLocked(const Lane::Owner& o) const {
  if (o.group != 0) {
    auto it = groups_.find(o.group);
    if (it == groups_.end() || !it->second->Live()) return std::nullopt;
    return it->second->frontier();
  }
  const Consumer* c = Find(o.identity);
  if (c == nullptr || !c->attached) return std::nullopt;
  return c->cursor.position();
}

void Scheduler::SetLaneStateLocked(const Lane::Owner& o, LaneState state) {
  if (o.group != 0) {
    auto it = groups_.find(o.group);
    if (it == groups_.end()) return;
    it->second->lane = state;
    it->second->cut_from_lane = state == LaneState::kOwner;
    return;
  }
  if (Consumer* c = Find(o.identity)) c->lane = state;
}

void Scheduler::PlaceLocked(Consumer& c) {
  if (InStreamLocked(c.cursor.position())) return;
  c.lane = LaneState::kWaiting;
  lane_line_.push_back(Lane::Owner{c.identity});
}

void Scheduler::PlaceGroupLocked(ConsumerGroup& g) {
  if (InStreamLocked(g.frontier())) return;
  g.lane = LaneState::kWaiting;
  lane_line_.push_back(Lane::Owner{"", g.id()});
}

void Scheduler::LeaveLaneLocked(const Lane::Owner& o) {
  lane_line_.erase(std::remove(lane_line_.begin(), lane_line_.end(), o), lane_line_.end());
  if (lane_ && lane_->owner() == o) lane_->Release();
  SetLaneStateLocked(o, LaneState::kNone);
}

bool Scheduler::MergeOwnerLocked() {
  if (!lane_ || !lane_->owner()) return false;
  const Lane::Owner o = *lane_->owner();
  const std::optional<uint64_t> place = PlaceOfLocked(o);
  if (!place) {  // it left, or its group broke
    LeaveLaneLocked(o);
    return true;
  }
  // The lane's next seq reached the shared stream's run: pin it from there.
  const uint64_t q = lane_->table().next_seq();
  if (!lane_->merge_at && q >= slots_.JoinFloor() && q <= slots_.next_seq()) lane_->merge_at = q;
  const bool reached = lane_->merge_at && *place >= *lane_->merge_at;
  if (!reached && !InStreamLocked(*place)) return false;
  BC_LOG_INFO_LIMITED("{} caught up at seq {}: it reads the shared stream again",
                      o.group != 0 ? "a resumed group" : "a resumed consumer", *place);
  ++lane_->merges;
  LeaveLaneLocked(o);
  return true;
}

bool Scheduler::MoveStreamLocked() {
  if (!config_.replay || SharedReadLocked() || !slots_.Idle()) return false;
  // The lowest place of the lane's owner and of the readers in line (a loop,
  // not a lambda: clang's lock analysis does not see mu_ held in one).
  std::vector<Lane::Owner> resumers(lane_line_.begin(), lane_line_.end());
  if (lane_ && lane_->owner()) resumers.push_back(*lane_->owner());
  std::optional<uint64_t> lowest;
  for (const Lane::Owner& o : resumers) {
    const std::optional<uint64_t> place = PlaceOfLocked(o);
    if (place && (!lowest || *place < *lowest)) lowest = place;
  }
  if (!lowest || InStreamLocked(*lowest) || *lowest >= stream_end_) return false;
  const uint64_t to = Lane::BatchStart(*lowest, config_.epoch_len, config_.batch_size);
  BC_LOG_INFO(
      "nobody else reads the stream: it moves from seq {} to seq {}, where a resumed "
      "consumer continues",
      slots_.next_seq(), to);
  slots_.Restart(to);
  ++stream_moves_;
  return true;
}

bool Scheduler::ReviewResumersLocked() {
  bool changed = MergeOwnerLocked();
  changed |= MoveStreamLocked();
  changed |= MergeOwnerLocked();
  // Readers in line that the stream holds now read it; the first one whose
  // batches fit gets the lane once it is free (and no group still holds
  // rounds cut from it).
  bool lane_free = lane_ && lane_->Free();
  for (const auto& [_, g] : groups_) lane_free = lane_free && !g->HoldsLaneRounds();
  std::vector<std::pair<Lane::Owner, std::string>> refused;
  for (auto it = lane_line_.begin(); it != lane_line_.end();) {
    const Lane::Owner o = *it;
    const std::optional<uint64_t> place = PlaceOfLocked(o);
    if (!place || InStreamLocked(*place)) {
      it = lane_line_.erase(it);
      SetLaneStateLocked(o, LaneState::kNone);
      changed = true;
      continue;
    }
    uint64_t samples = 0;
    if (o.group != 0) {
      const ConsumerGroup& g = *groups_.at(o.group);
      samples = uint64_t{g.spec().world_size} * g.spec().batch_size;
    } else {
      samples = Find(o.identity)->cursor.batch_size();
    }
    if (lane_free && Lane::SlotsFor(samples, config_.batch_size) <= lane_->slots()) {
      it = lane_line_.erase(it);
      lane_->Assign(o, *place);
      SetLaneStateLocked(o, LaneState::kOwner);
      lane_free = false;
      changed = true;
      BC_LOG_INFO_LIMITED("{} resumes at seq {} from the resume lane ({} slots)",
                          o.group != 0 ? "a group" : "a consumer", *place, lane_->slots());
      continue;
    }
    // Accepted while nobody else read the stream, which would move to it
    // (MoveStreamLocked); others read it now, and the lane cannot take its
    // batches: it would wait as long as they read. It is told why instead.
    if (std::string why = UnservablePlaceLocked(*place, samples, o); !why.empty()) {
      it = lane_line_.erase(it);
      SetLaneStateLocked(o, LaneState::kNone);
      refused.emplace_back(o, "cannot resume at seq " + std::to_string(*place) +
                                  ": others began reading the stream before it could move "
                                  "there; " +
                                  std::move(why));
      changed = true;
      continue;
    }
    ++it;
  }
  // After the walk: failing a reader changes the line.
  for (const auto& [o, message] : refused) {
    if (o.group != 0) {
      if (auto g = groups_.find(o.group); g != groups_.end()) {
        FailGroupLocked(*g->second, StatusCode::kInvalidArgument, message);
      }
    } else if (Consumer* c = Find(o.identity); c != nullptr && c->attached) {
      BC_LOG_WARN("consumer {} '{}': {}", c->id, c->name, message);
      FailConsumerLocked(*c, StatusCode::kInvalidArgument, message);
    }
  }
  return changed;
}

Status Scheduler::Resume(const std::string& identity, const proto::Resume& place) {
  MutexLock lock(&mu_);
  Consumer* c = Heard(identity);
  if (c == nullptr) return NotFoundError("unknown consumer");
  if (!c->attached) return InvalidArgumentError("this consumer left the stream");
  if (c->asked) {
    return InvalidArgumentError(
        "a consumer resumes before its first batch: this one asked for batches already "
        "(load the state before iterating)");
  }
  if (c->resumed) return InvalidArgumentError("this consumer was resumed already");
  Result<StreamIdentity> ours = StreamIdentity::Parse(config_.stream);
  BATCHCAST_CHECK(ours.ok()) << ours.status().ToString();
  BATCHCAST_RETURN_IF_ERROR(ours->CheckSaved(place.stream));
  ConsumerGroup* g = c->group;
  const uint32_t world_size = g != nullptr ? g->spec().world_size : 0;
  if (place.world_size != world_size) {
    auto who = [](uint32_t w) {
      return w == 0 ? std::string("a consumer without a group")
                    : "a rank of a group of " + std::to_string(w);
    };
    return InvalidArgumentError("the state was saved by " + who(place.world_size) +
                                "; this consumer is " + who(world_size) +
                                " (a group resumes with the world size it was saved with)");
  }
  const uint64_t L = config_.epoch_len;
  if (const std::string why =
          ConsumerCursor::InvalidPlace(L, place.epoch, place.epoch_start, place.next_seq);
      !why.empty()) {
    return InvalidArgumentError("the saved place is no place of this stream: " + why);
  }
  const std::string at = PlaceText(place.epoch, place.step, place.next_seq);
  if (g != nullptr) {
    const std::string name = "group '" + g->spec().name + "'";
    if (g->resumed) {
      if (*g->resumed != place) {
        return InvalidArgumentError(
            "rank " + std::to_string(c->rank) + " resumes " + name + " at " + at +
            ", but another rank resumed it at " +
            PlaceText(g->resumed->epoch, g->resumed->step, g->resumed->next_seq) +
            ": every rank must load the state saved at the same step");
      }
      c->resumed = true;
      return Status::Ok();
    }
    if (!g->Fresh()) {
      return InvalidArgumentError(name +
                                  " already began reading: every rank loads its state before "
                                  "its group's first batch");
    }
    const uint64_t round = uint64_t{world_size} * g->spec().batch_size;
    if (const std::string why = UnservablePlaceLocked(place.next_seq, round, {"", g->id()});
        !why.empty()) {
      return InvalidArgumentError("cannot resume " + name + " at " + at + ": " + why);
    }
    g->Resume(ConsumerCursor::Resumed(L, static_cast<uint32_t>(round), true, place.epoch,
                                      place.step, place.epoch_start, place.next_seq, place.skipped),
              place.batch_size);
    g->resumed = place;
    c->resumed = true;
    PlaceGroupLocked(*g);
    BC_LOG_INFO_LIMITED("{} resumes at {}{}", name, at,
                        g->lane == LaneState::kNone ? "" : ", outside the shared stream");
  } else {
    const ConsumerCursor& old = c->cursor;
    if (const std::string why =
            UnservablePlaceLocked(place.next_seq, old.batch_size(), {c->identity});
        !why.empty()) {
      return InvalidArgumentError("cannot resume at " + at + ": " + why);
    }
    c->cursor =
        ConsumerCursor::Resumed(L, old.batch_size(), old.drop_last(), place.epoch, place.step,
                                place.epoch_start, place.next_seq, place.skipped);
    c->resumed = true;
    PlaceLocked(*c);
    BC_LOG_INFO_LIMITED("consumer {} '{}' resumes at {}{}", c->id, c->name, at,
                        c->lane == LaneState::kNone ? "" : ", outside the shared stream");
  }
  ReviewResumersLocked();
  NotifyProducer();
  return Status::Ok();
}

std::optional<Scheduler::Work> Scheduler::LaneWorkLocked(uint32_t ring) {
  if (!lane_ || !lane_->owner()) return std::nullopt;
  const Lane::Owner o = *lane_->owner();
  SlotTable& t = lane_->table();
  const uint64_t q = t.next_seq();
  const uint32_t count = Lane::BatchCount(q, config_.epoch_len, config_.batch_size, stream_end_);
  if (count == 0) return std::nullopt;
  // The owner's place, the samples of its next batch (round), where its epoch
  // ends, and which lane seqs it still needs.
  const ConsumerCursor* cursor = nullptr;
  std::function<bool(uint64_t, uint64_t)> needed;
  uint32_t lane_ring = 0;  // Note [Placement]: the ring of the batch's reader
  if (o.group != 0) {
    ConsumerGroup* g = groups_.at(o.group).get();
    if (!g->cut_from_lane || !GroupConfirmedLocked(*g)) return std::nullopt;
    lane_ring = GroupRingLocked(*g, q).value_or(RankRingLocked(*g, 0));
    cursor = &g->frontier_cursor();
    const bool frontier_pins = FrontierPinsLocked(*g);
    needed = [g, frontier_pins](uint64_t first, uint64_t end) {
      return g->Needs(first, end, frontier_pins);
    };
  } else {
    const Consumer* c = Find(o.identity);
    if (c == nullptr || !c->attached || !c->confirmed) return std::nullopt;
    lane_ring = c->home_ring;
    cursor = &c->cursor;
    const uint64_t at = c->cursor.position();
    needed = [at](uint64_t, uint64_t end) { return end > at; };
  }
  if (lane_->merge_at) {
    // Only the batch that crosses merge_at is still read from the lane.
    if (cursor->position() >= *lane_->merge_at) return std::nullopt;
    const SlotTable::Walk w =
        t.Find(cursor->position(), cursor->EpochEnd(stream_end_), cursor->batch_size());
    if (w.samples >= cursor->batch_size() || w.complete) return std::nullopt;
  }
  if (lane_ring != ring) return std::nullopt;
  const std::optional<uint32_t> slot = t.FindWritable(needed);
  if (!slot) return std::nullopt;
  const auto epoch = static_cast<uint32_t>(q / config_.epoch_len);
  return Work{t.Begin(*slot, epoch, count, ring), epoch, true};
}

Result<std::optional<Scheduler::Work>> Scheduler::TryBeginWorkLocked(uint32_t ring) {
  BATCHCAST_CHECK(config_.replay) << "BeginWork is the built-in producer's";
  if (stopped_) return CancelledError("server stopped");
  if (ReviewResumersLocked()) {
    ServeAllLocked();
    wake_pending_ = true;
  }
  // Note [Begun ahead]: the batch begun for this ring while it was busy
  // first; then the others' batches before this ring's turn.
  if (std::optional<Work> ahead = std::exchange(ring_work_[ring].ahead, std::nullopt)) {
    RingBeginsLocked(ring, ahead->grant.first_seq);
    BeginAheadLocked(ring);
    // Now busy, its next batch may be begun ahead by a ring waiting for its turn.
    NotifyProducer();
    return ahead;
  }
  BeginAheadLocked(ring);
  const uint64_t next_seq = slots_.next_seq();
  std::optional<uint32_t> shared;
  if (next_seq < stream_end_) shared = SharedSlotLocked(/*log_wait=*/SharedReadLocked());
  // Note [Placement]: the shared stream's next batch is this ring's to write
  // only when placed here.
  const bool others_turn = shared && PlaceNextLocked() != ring;
  if (others_turn) shared.reset();
  // Note [Resume]: the lane only from spare capacity, and after kLaneShare
  // shared batches while it wanted one.
  const bool lane_turn = !shared || shared_since_lane_ >= kLaneShare;
  if (lane_turn) {
    if (std::optional<Work> w = LaneWorkLocked(ring)) {
      shared_since_lane_ = 0;
      RingBeginsLocked(ring, std::nullopt);
      return w;
    }
  }
  // A ring without readers has no turn to wait for: the batches go to the
  // rings with readers (Note [Placement]).
  RingWaitsForTurnLocked(ring, others_turn && IsCandidateLocked(ring));
  if (!shared) return std::optional<Work>();
  if (lane_ && lane_->owner()) ++shared_since_lane_;
  RingBeginsLocked(ring, next_seq);
  const Work work = BeginSharedLocked(*shared, ring);
  BeginAheadLocked(ring);
  NotifyProducer();  // Note [Placement]: the next batch may be another ring's
  return std::optional<Work>(work);
}

Scheduler::Work Scheduler::BeginSharedLocked(uint32_t slot, uint32_t ring) {
  const auto epoch = static_cast<uint32_t>(slots_.next_seq() / config_.epoch_len);
  const uint32_t count = NextSharedCountLocked();
  BeganSharedLocked();
  return Work{slots_.Begin(slot, epoch, count, ring), epoch, false};
}

Result<std::optional<Scheduler::Work>> Scheduler::TryBeginWork(uint32_t ring) {
  Result<std::optional<Work>> w = std::optional<Work>();
  bool wake = false;
  {
    MutexLock lock(&mu_);
    w = TryBeginWorkLocked(ring);
    wake = std::exchange(wake_pending_, false);
  }
  if (wake && wakeup_) wakeup_();
  return w;
}

uint64_t Scheduler::ProducerWaitsForTesting() const {
  MutexLock lock(&mu_);
  return producer_waits_;
}

Result<Scheduler::Work> Scheduler::BeginWork(uint32_t ring, Clock::time_point deadline) {
  while (true) {
    bool wake = false;
    Result<std::optional<Work>> w = std::optional<Work>();
    {
      MutexLock lock(&mu_);
      w = TryBeginWorkLocked(ring);
      wake = std::exchange(wake_pending_, false);
      if (w.ok() && !w->has_value() && !wake) {
        if (Clock::now() >= deadline) return DeadlineExceededError("no slot became free in time");
        // Every change that can make a slot writable signals producer_cv_.
        ++producer_waits_;
        producer_cv_.WaitUntil(&mu_, deadline);
        continue;
      }
    }
    if (wake && wakeup_) wakeup_();
    if (!w.ok()) return w.status();
    if (w->has_value()) return **w;
  }
}

}  // namespace batchcast
