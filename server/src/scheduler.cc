// Scheduler: consumers and their requests (HELLO, NEXT, RELEASE, BYE,
// removal) and how a NEXT is answered. The producer's side is in
// scheduler_producer.cc, the time-based rules in scheduler_tick.cc, the stats
// in scheduler_stats.cc.
#include "scheduler.h"

#include <algorithm>

#include "batchcast/core/check.h"
#include "core/src/logging.h"

namespace batchcast {

Scheduler::Scheduler(SchedulerConfig config, SchedulerEnv* env)
    : config_(config),
      env_(env),
      slots_(config.window, config.batch_size),
      stream_end_(config.stream_end),
      ring_counts_(std::max<uint32_t>(1, config.rings)),
      ring_work_(std::max<uint32_t>(1, config.rings)),
      created_(env->Now()) {
  BATCHCAST_CHECK(config_.window > 0 && config_.batch_size > 0 && config_.epoch_len > 0 &&
                  config_.rings > 0);
  if (config_.replay && config_.resume_slots > 0) {
    lane_.emplace(config_.window, config_.resume_slots, config_.batch_size, config_.epoch_len);
  }
}

Scheduler::Consumer* Scheduler::Find(const std::string& identity) {
  auto it = consumers_.find(identity);
  return it == consumers_.end() ? nullptr : &it->second;
}

const Scheduler::Consumer* Scheduler::Find(const std::string& identity) const {
  auto it = consumers_.find(identity);
  return it == consumers_.end() ? nullptr : &it->second;
}

Scheduler::Consumer* Scheduler::Heard(const std::string& identity) {
  Consumer* c = Find(identity);
  if (c == nullptr) return nullptr;
  c->last_seen = env_->Now();
  if (c->confirmed) return c;
  // Note [Unconfirmed consumers]: from now on it pins; where it would start
  // was overwritten while it was silent, it starts from here (a resumed
  // one's place never moves: Note [Resume]).
  const uint64_t floor = slots_.JoinFloor();
  if (ConsumerGroup* g = c->group; g == nullptr) {
    if (c->batches == 0 && !c->resumed && c->cursor.position() < floor) {
      const ConsumerCursor& old = c->cursor;
      c->cursor = ConsumerCursor(ConsumerCursor::JoinStart(c->join, floor, old.epoch_len()),
                                 old.epoch_len(), old.batch_size(), old.drop_last());
    }
  } else if (!GroupConfirmedLocked(*g) && g->rounds() == 0 && !g->resumed &&
             g->frontier() < floor) {
    g->Restart(ConsumerCursor::JoinStart(g->spec().join, floor, config_.epoch_len));
  }
  c->confirmed = true;
  NotifyProducer();
  return c;
}

void Scheduler::Send(const Consumer& c, proto::Message m) {
  outbox_.push_back(Outgoing{c.identity, std::move(m)});
}

Result<Scheduler::Admission> Scheduler::AddConsumer(const std::string& identity,
                                                    const proto::Hello& hello, bool same_host,
                                                    uint32_t home_ring) {
  BATCHCAST_CHECK(home_ring < config_.rings) << home_ring << " of " << config_.rings << " rings";
  const uint64_t max_batch =
      std::max<uint64_t>(1, uint64_t{config_.window} * config_.batch_size / 2);
  if (hello.batch_size == 0 || hello.batch_size > max_batch) {
    return InvalidArgumentError(
        "batch size " + std::to_string(hello.batch_size) +
        " is out of range: this server (window " + std::to_string(config_.window) + " x batch " +
        std::to_string(config_.batch_size) + ") serves 1 to " + std::to_string(max_batch));
  }
  if (hello.prefetch == 0 || hello.prefetch > config_.max_leases) {
    return InvalidArgumentError("prefetch " + std::to_string(hello.prefetch) +
                                " is out of range 1.." + std::to_string(config_.max_leases));
  }
  if (hello.world_size > 0 && (hello.group.empty() || hello.rank >= hello.world_size)) {
    return InvalidArgumentError("bad group fields: rank " + std::to_string(hello.rank) +
                                " of world_size " + std::to_string(hello.world_size) +
                                " in group '" + hello.group + "'");
  }
  if (hello.world_size > 0) {
    // Note [Consumer groups]: a round must fit the ring like a batch.
    const uint64_t round = uint64_t{hello.world_size} * hello.batch_size;
    if (round > max_batch) {
      return InvalidArgumentError(
          "group '" + hello.group + "': a round of world_size x batch size = " +
          std::to_string(hello.world_size) + " x " + std::to_string(hello.batch_size) + " = " +
          std::to_string(round) + " samples must fit half the ring (window " +
          std::to_string(config_.window) + " x batch " + std::to_string(config_.batch_size) +
          "): at most " + std::to_string(max_batch) + "; use a smaller batch or a larger window");
    }
    if (hello.world_size > config_.max_consumers) {
      // Counts are the server's (Note [Placement]): such a group never forms.
      return InvalidArgumentError(
          "group '" + hello.group + "' of world_size " + std::to_string(hello.world_size) +
          " cannot form: the server takes at most " + std::to_string(config_.max_consumers) +
          " consumers (--max-consumers)");
    }
    if (!hello.drop_last) {
      return InvalidArgumentError(
          "group '" + hello.group +
          "': a group drops the last incomplete round of each epoch for every rank (so that all "
          "ranks get the same number of batches): drop_last=false cannot be used in a group");
    }
  }
  MutexLock lock(&mu_);
  if (consumers_.count(identity) != 0) {
    return InvalidArgumentError("this connection already said HELLO");
  }
  if (consumers_.size() >= config_.max_consumers) {
    return ResourceExhaustedError("the server already has " + std::to_string(consumers_.size()) +
                                  " consumers (limit " + std::to_string(config_.max_consumers) +
                                  ")");
  }
  ConsumerGroup* group = nullptr;
  if (hello.world_size > 0) {
    BATCHCAST_ASSIGN_OR_RETURN(group, JoinGroupLocked(hello));
  }
  const uint64_t start = group != nullptr ? group->frontier()
                                          : ConsumerCursor::JoinStart(
                                                hello.join, slots_.JoinFloor(), config_.epoch_len);
  Consumer c(ConsumerCursor(start, config_.epoch_len, hello.batch_size, hello.drop_last));
  c.id = next_consumer_id_++;
  c.home_ring = home_ring;
  c.identity = identity;
  c.name = hello.name;
  c.pid = static_cast<int>(hello.pid);
  c.pid_visible = same_host && env_->ProcessAlive(c.pid);
  c.join = hello.join;
  c.last_seen = c.joined = env_->Now();
  Admission a;
  a.consumer_id = c.id;
  a.start = group != nullptr ? group->welcome_start() : start;
  a.batches_per_epoch =
      ConsumerCursor::BatchesPerEpoch(config_.epoch_len, hello.batch_size, hello.drop_last);
  if (group != nullptr) {
    c.group = group;
    c.rank = hello.rank;
    group->Join(hello.rank, identity, hello.prefetch);
    group->members += 1;
    a.batches_per_epoch = group->rounds_per_epoch();
    BC_LOG_INFO_LIMITED(
        "consumer {} '{}' (pid {}) joined group '{}' as rank {} of {}: batch {}, {} batches "
        "per epoch, the group starts at seq {}{}",
        c.id, c.name, c.pid, hello.group, hello.rank, hello.world_size, hello.batch_size,
        a.batches_per_epoch, start, group->complete() ? " (all ranks joined)" : "");
  } else {
    BC_LOG_INFO_LIMITED("consumer {} '{}' (pid {}) joined: batch {}, join {}, starts at seq {}",
                        c.id, c.name, c.pid, hello.batch_size, JoinPolicyName(hello.join), start);
  }
  consumers_.emplace(identity, std::move(c));
  NotifyProducer();
  return a;
}

bool Scheduler::HasConsumer(const std::string& identity) const {
  MutexLock lock(&mu_);
  return consumers_.count(identity) != 0;
}

void Scheduler::Next(const std::string& identity, uint64_t request_id) {
  MutexLock lock(&mu_);
  Consumer* c = Heard(identity);
  if (c == nullptr) return;
  c->asked = true;
  if (!c->attached) {
    Send(*c, proto::Error{request_id, StatusCode::kCancelled,
                          "this consumer left the stream (BYE or eviction); connect again"});
    return;
  }
  // Back after a skip: what was overwritten meanwhile is skipped too.
  if (ConsumerGroup* g = c->group; g != nullptr && g->skipping) {
    g->skipping = false;
    const uint64_t floor = slots_.JoinFloor();
    g->SkipTo(floor, slots_.CountSamples(g->frontier(), floor));
  } else if (c->skipping) {
    c->skipping = false;
    const uint64_t floor = slots_.JoinFloor();
    c->cursor.SkipTo(floor, slots_.CountSamples(c->cursor.position(), floor));
  }
  c->pending.push_back(request_id);
  ServeLocked(*c);
}

bool Scheduler::HoardingTooLongLocked(Consumer& c, const SlotTable& t) {
  std::vector<bool> pinned(t.window(), false);
  size_t mine = 0;
  for (const auto& [_, lease_slots] : c.leases) {
    for (uint32_t s : lease_slots) {
      if (t.Owns(s) && !pinned[s - t.first_slot()]) {
        pinned[s - t.first_slot()] = true;
        ++mine;
      }
    }
  }
  if (mine < t.window()) {
    c.hoarding_since.reset();
    return false;
  }
  const Clock::time_point now = env_->Now();
  if (!c.hoarding_since) c.hoarding_since = now;
  if (now - *c.hoarding_since < kHoardTimeout) return false;  // Tick checks again
  c.hoarding_since.reset();
  return true;
}

void Scheduler::SettleLocked(Consumer& c, const SlotTable& t) {
  ConsumerCursor& cur = c.cursor;
  const uint64_t end = cur.EpochEnd(stream_end_);
  cur.PassTo(t.SkipHoles(cur.position(), end), stream_end_);
  if (cur.drop_last() && cur.position() < end) {
    const SlotTable::Walk w = t.Find(cur.position(), end, cur.batch_size());
    if (w.complete && w.samples < cur.batch_size()) cur.PassTo(end, stream_end_);
  }
}

bool Scheduler::StarvedLocked(const Consumer& c, const SlotTable& t) const {
  return t.FullFrom(c.cursor.position());
}

bool Scheduler::AnswerHoardingLocked(Consumer& c, const SlotTable& t) {
  // If this consumer's own unreleased batches pin every slot, the producer
  // can never write what it waits for: say so instead of hanging.
  if (!HoardingTooLongLocked(c, t)) return false;
  const std::string where = &t == &slots_ ? " ring slots" : " resume slots (--resume-slots)";
  Send(c,
       proto::Error{c.pending.front(), StatusCode::kResourceExhausted,
                    "this consumer holds " + std::to_string(c.leases.size()) +
                        " unreleased batches that pin all " + std::to_string(t.window()) + where +
                        ", so the producer cannot write the next one; drop "
                        "references to old batches (or copy them) or use a larger window"});
  c.pending.pop_front();
  return true;
}

bool Scheduler::ServeOneLocked(Consumer& c) {
  if (c.group != nullptr) return ServeRankLocked(c);
  // Note [Resume]: waiting for the lane; its owner may have reached the
  // shared stream.
  if (c.lane == LaneState::kWaiting) return false;
  if (c.lane == LaneState::kOwner && MergeOwnerLocked()) NotifyProducer();
  const uint64_t rid = c.pending.front();
  ConsumerCursor& cur = c.cursor;
  SlotTable& t = TableOf(c);
  SettleLocked(c, t);
  const SlotTable::Walk supply =
      t.Find(cur.position(), cur.EpochEnd(stream_end_), cur.batch_size());
  ConsumerCursor::Plan plan = cur.PlanNext(stream_end_, {supply.samples, supply.complete});
  switch (plan.kind) {
    case ConsumerCursor::Plan::Kind::kStreamEnded:
      Send(c, proto::Error{rid, StatusCode::kOutOfRange,
                           "the stream has ended: the server produced all " +
                               std::to_string(stream_end_ / config_.epoch_len) + " of its epochs"});
      c.pending.pop_front();
      return true;
    case ConsumerCursor::Plan::Kind::kEndOfEpoch: {
      proto::EndOfEpoch e{rid, cur.epoch(), cur.step(), cur.skipped()};
      cur.EndEpoch(stream_end_);
      e.next_epoch_start = cur.EpochStart();
      e.next_seq = std::max(cur.position(), e.next_epoch_start);
      Send(c, e);
      c.pending.pop_front();
      NotifyProducer();
      return true;
    }
    case ConsumerCursor::Plan::Kind::kWait:
      if (!StarvedLocked(c, t)) return AnswerHoardingLocked(c, t);
      // Note [Consumer epochs]: only this consumer can move. Without
      // drop_last it gets what the ring holds as a short batch; with
      // drop_last it passes over it and plans again on the data written next.
      BC_LOG_WARN(
          "consumer {} '{}': the {}-slot ring holds only {} of the {} samples of its next batch "
          "(too many dropped files); {} them",
          c.id, c.name, t.window(), supply.samples, cur.batch_size(),
          cur.drop_last() ? "passing over" : "sending a short batch of");
      if (cur.drop_last()) {
        c.passed_over += supply.samples;
        cur.PassTo(supply.end, stream_end_);
        NotifyProducer();
        return true;
      }
      plan = ConsumerCursor::Plan{ConsumerCursor::Plan::Kind::kBatch, supply.samples};
      break;
    case ConsumerCursor::Plan::Kind::kBatch:
      break;
  }
  if (RefuseOverLeasesLocked(c)) return true;
  const uint32_t n = plan.count;
  // n == supply.samples: the cursor moves past the last of them (and past
  // the holes up to where Find stopped, when it found fewer than B).
  BATCHCAST_CHECK(n == supply.samples);
  BatchInfo info{cur.epoch(), cur.step(), cur.skipped(), cur.EpochStart(), 0};
  const uint64_t from = cur.position();
  cur.Advance(supply.end, stream_end_);
  info.next_seq = cur.position();
  SendBatchLocked(c, t, from, n, info);
  SettleLocked(c, t);  // holes and a short drop_last remainder pin nothing
  return true;
}

bool Scheduler::RefuseOverLeasesLocked(Consumer& c) {
  if (c.leases.size() < config_.max_leases) return false;
  Send(c, proto::Error{c.pending.front(), StatusCode::kResourceExhausted,
                       "this consumer holds " + std::to_string(c.leases.size()) +
                           " unreleased batches (limit " + std::to_string(config_.max_leases) +
                           "); release batches before asking for more"});
  c.pending.pop_front();
  return true;
}

void Scheduler::SendBatchLocked(Consumer& c, SlotTable& t, uint64_t from, uint32_t n,
                                const BatchInfo& info) {
  proto::Batch b;
  b.request_id = c.pending.front();
  b.epoch = info.epoch;
  b.step = info.step;
  b.first_seq = from;
  b.skipped = info.skipped;
  b.epoch_start = info.epoch_start;
  b.next_seq = info.next_seq;
  b.indices.reserve(n);
  std::vector<uint32_t> pinned = t.Lease(from, n, b.segments, b.indices);
  CountReadLocked(c, b.segments);
  b.lease_id = c.next_lease++;
  c.leases.emplace(b.lease_id, std::move(pinned));
  c.hoarding_since.reset();  // it got data: a later wait is a new one
  c.batches += 1;
  c.samples += n;
  c.pending.pop_front();
  Send(c, std::move(b));
  NotifyProducer();
}

void Scheduler::ServeLocked(Consumer& c) {
  ConsumerGroup* g = c.group;
  const uint64_t deliveries = g != nullptr ? g->deliveries() : 0;
  while (!c.pending.empty() && ServeOneLocked(c)) {
  }
  UpdateWaitLocked(c);
  // Peers that waited for this rank (ConsumerGroup::max_ahead) may go on.
  std::vector<std::string> peers;
  if (g != nullptr && g->deliveries() != deliveries && g->TakePeersWaiting()) {
    for (uint32_t r = 0; r < g->spec().world_size; ++r) {
      if (r != c.rank && g->HasRank(r)) peers.push_back(g->identity(r));
    }
  }
  // A rank whose group broke was detached while being served.
  if (!c.attached && c.leases.empty()) RemoveLocked(c.identity, "its group broke");
  for (const std::string& identity : peers) {
    if (Consumer* p = Find(identity); p != nullptr && p->attached) ServeLocked(*p);
  }
}

void Scheduler::UpdateWaitLocked(Consumer& c) {
  const bool waiting = c.attached && !c.pending.empty();
  if (waiting == c.waiting_since.has_value()) return;
  const Clock::time_point now = env_->Now();
  if (waiting) {
    c.waiting_since = now;
  } else {
    c.waited += now - *c.waiting_since;
    c.waiting_since.reset();
  }
}

void Scheduler::ServeAllLocked() {
  // Serving one consumer may remove others (a rank whose group broke).
  std::vector<std::string> identities;
  identities.reserve(consumers_.size());
  for (const auto& [identity, c] : consumers_) {
    if (c.attached && !c.pending.empty()) identities.push_back(identity);
  }
  for (const std::string& identity : identities) {
    if (Consumer* c = Find(identity); c != nullptr && c->attached) ServeLocked(*c);
  }
}

void Scheduler::Release(const std::string& identity, const std::vector<uint64_t>& lease_ids,
                        bool wake_producer) {
  MutexLock lock(&mu_);
  Consumer* c = Heard(identity);
  if (c == nullptr) return;
  for (uint64_t id : lease_ids) {
    auto it = c->leases.find(id);
    if (it == c->leases.end()) {
      BC_LOG_DEBUG("consumer {} released unknown lease {}", c->id, id);
      continue;
    }
    UnpinLocked(it->second);
    c->leases.erase(it);
  }
  if (!c->attached && c->leases.empty()) {
    RemoveLocked(identity, "left and released all its batches");
  }
  if (wake_producer) NotifyProducer();
}

void Scheduler::DropLeasesLocked(Consumer& c) {
  for (const auto& [_, pinned] : c.leases) UnpinLocked(pinned);
  c.leases.clear();
}

void Scheduler::UnpinLocked(const std::vector<uint32_t>& slots) {
  std::vector<uint32_t> lane;
  std::vector<uint32_t> shared;
  for (uint32_t s : slots) (slots_.Owns(s) ? shared : lane).push_back(s);
  slots_.Unpin(shared);
  if (!lane.empty()) lane_->table().Unpin(lane);
}

void Scheduler::DetachLocked(Consumer& c, const std::string& why) {
  c.attached = false;
  c.pending.clear();
  UpdateWaitLocked(c);
  if (c.group == nullptr) LeaveLaneLocked(Lane::Owner{c.identity});
  LeaveGroupLocked(c, why);
  NotifyProducer();
  if (c.leases.empty()) RemoveLocked(c.identity, "left the stream");
}

void Scheduler::FailConsumerLocked(Consumer& c, StatusCode code, const std::string& message) {
  Send(c, proto::Error{0, code, message});
  DetachLocked(c, message);
}

void Scheduler::Bye(const std::string& identity, const std::vector<uint64_t>& kept_leases) {
  MutexLock lock(&mu_);
  Consumer* c = Find(identity);
  if (c == nullptr) return;
  // Leases the client does not hold (batches in flight or prefetched) end now.
  std::unordered_map<uint64_t, std::vector<uint32_t>> kept;
  for (uint64_t id : kept_leases) {
    if (auto it = c->leases.find(id); it != c->leases.end()) kept.insert(c->leases.extract(it));
  }
  DropLeasesLocked(*c);
  c->leases = std::move(kept);
  BC_LOG_INFO_LIMITED("consumer {} '{}' said goodbye after {} batches ({} leases still held)",
                      c->id, c->name, c->batches, c->leases.size());
  DetachLocked(*c, std::string(kSaidGoodbye));
  ServeAllLocked();  // its group's peers may be waiting for it (Note [Consumer groups])
}

void Scheduler::Touch(const std::string& identity) {
  MutexLock lock(&mu_);
  Heard(identity);
}

void Scheduler::RemoveLocked(const std::string& identity, const std::string& reason) {
  auto it = consumers_.find(identity);
  if (it == consumers_.end()) return;
  Consumer& c = it->second;
  BC_LOG_INFO_LIMITED("consumer {} '{}' (pid {}) removed: {}", c.id, c.name, c.pid, reason);
  if (c.group == nullptr) LeaveLaneLocked(Lane::Owner{c.identity});
  LeaveGroupLocked(c, reason);
  departed_cursor_ =
      std::max(departed_cursor_, c.group != nullptr ? c.group->frontier() : c.cursor.position());
  DropLeasesLocked(c);
  if (c.group != nullptr && --c.group->members == 0) {
    LeaveLaneLocked(Lane::Owner{"", c.group->id()});
    groups_.erase(c.group->id());
  }
  consumers_.erase(it);
  NotifyProducer();
}

void Scheduler::Remove(const std::string& identity, const std::string& reason) {
  MutexLock lock(&mu_);
  if (consumers_.count(identity) == 0) return;  // already gone (e.g. pid check first)
  ++consumers_lost_;
  RemoveLocked(identity, reason);
  ServeAllLocked();  // its group's peers may be waiting for it (Note [Consumer groups])
}

std::vector<std::string> Scheduler::Identities() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(consumers_.size());
  for (const auto& [identity, _] : consumers_) out.push_back(identity);
  return out;
}

void Scheduler::TakeOutbox(std::vector<Outgoing>& out) {
  out.clear();
  MutexLock lock(&mu_);
  out.swap(outbox_);
}

bool Scheduler::Finished() const {
  MutexLock lock(&mu_);
  return started_ && stream_end_ != UINT64_MAX && consumers_.empty() &&
         (slots_.published() >= stream_end_ || departed_cursor_ >= stream_end_);
}

}  // namespace batchcast
