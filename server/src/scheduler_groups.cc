// Scheduler: consumer groups (Note [Consumer groups]): joining a group,
// serving a rank, departures, formation timeouts, failing a group. The
// group's own arithmetic is consumer_group.{h,cc}.
#include <algorithm>

#include "core/src/logging.h"
#include "scheduler.h"

namespace batchcast {
namespace {

uint64_t Seconds(std::chrono::milliseconds d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

}  // namespace

std::string Scheduler::RankName(const Consumer& c) {
  return "rank " + std::to_string(c.rank) + " (consumer " + std::to_string(c.id) + " '" + c.name +
         "', pid " + std::to_string(c.pid) + ")";
}

Scheduler::Consumer* Scheduler::RankConsumerLocked(const ConsumerGroup& g, uint32_t rank) {
  return g.HasRank(rank) ? Find(g.identity(rank)) : nullptr;
}

const Scheduler::Consumer* Scheduler::RankConsumerLocked(const ConsumerGroup& g,
                                                         uint32_t rank) const {
  return g.HasRank(rank) ? Find(g.identity(rank)) : nullptr;
}

Result<ConsumerGroup*> Scheduler::JoinGroupLocked(const proto::Hello& hello) {
  auto it = open_groups_.find(hello.group);
  if (it != open_groups_.end() && it->second->HasRank(hello.rank)) {
    // Its previous process may have died without the server noticing yet
    // (an elastic restart, a crash): check now rather than refuse a rank
    // that is really gone.
    RemoveDeadLocked(env_->Now());
    it = open_groups_.find(hello.group);
  }
  if (it != open_groups_.end()) {
    ConsumerGroup* g = it->second;
    if (const Consumer* other = RankConsumerLocked(*g, hello.rank)) {
      return InvalidArgumentError(
          "rank " + std::to_string(hello.rank) + " of group '" + hello.group +
          "' is already connected (consumer " + std::to_string(other->id) + " '" + other->name +
          "', pid " + std::to_string(other->pid) +
          "): each rank connects once; a second consumer of this server in the same rank needs "
          "its own group name, or none (group=False)");
    }
    BATCHCAST_RETURN_IF_ERROR(g->CheckJoin(hello));
    return g;
  }
  // A new group (or a new one of that name: the last one ended).
  const uint64_t round = uint64_t{hello.world_size} * hello.batch_size;
  const uint64_t epoch_len =
      config_.group_epoch_len > 0 ? config_.group_epoch_len : config_.epoch_len;
  const uint64_t rounds = epoch_len / round;
  if (rounds == 0) {
    return InvalidArgumentError(
        "group '" + hello.group + "': an epoch of " + std::to_string(epoch_len) +
        " samples holds no whole round of world_size x batch size = " + std::to_string(round) +
        " samples");
  }
  const uint64_t start =
      ConsumerCursor::JoinStart(hello.join, slots_.JoinFloor(), config_.epoch_len);
  ConsumerGroup::Spec spec{hello.group, hello.world_size, hello.batch_size, hello.join};
  auto g = std::make_unique<ConsumerGroup>(next_group_id_++, std::move(spec), start,
                                           config_.epoch_len, rounds, env_->Now());
  ConsumerGroup* raw = g.get();
  groups_.emplace(raw->id(), std::move(g));
  open_groups_[hello.group] = raw;
  BC_LOG_INFO(
      "group '{}' forms at seq {}: {} ranks of batch {}, {} batches per rank per epoch; "
      "it waits up to {} s for all ranks",
      hello.group, start, hello.world_size, hello.batch_size, rounds,
      Seconds(config_.group_timeout));
  return raw;
}

void Scheduler::LeaveGroupLocked(Consumer& c, const std::string& why) {
  if (c.group == nullptr || !c.group->HasRank(c.rank)) return;
  ConsumerGroup& g = *c.group;
  const bool was_intact = !g.ended();
  g.Leave(c.rank,
          RankName(c) + " left after " + std::to_string(c.batches) + " batches (" + why + ")");
  if (auto it = open_groups_.find(g.spec().name); it != open_groups_.end() && it->second == &g) {
    open_groups_.erase(it);
  }
  if (was_intact && g.RanksIn() != "none") {
    // A BYE is how every rank of a job that ends leaves: not worth a warning.
    if (why == kSaidGoodbye) {
      BC_LOG_INFO_LIMITED(
          "group '{}': {}; its peers (ranks {}) get no batch beyond the ones it got", g.spec().name,
          g.left_reason(), g.RanksIn());
    } else {
      BC_LOG_WARN_LIMITED(
          "group '{}': {}; its peers (ranks {}) get no batch beyond the ones it got", g.spec().name,
          g.left_reason(), g.RanksIn());
    }
  }
}

void Scheduler::FailGroupLocked(ConsumerGroup& g, StatusCode code, const std::string& message) {
  g.MarkFailed();
  if (auto it = open_groups_.find(g.spec().name); it != open_groups_.end() && it->second == &g) {
    open_groups_.erase(it);
  }
  std::vector<std::string> ranks;
  for (uint32_t r = 0; r < g.spec().world_size; ++r) {
    if (g.HasRank(r)) ranks.push_back(g.identity(r));
  }
  // `g` may be erased by the last DetachLocked: only identities from here on.
  for (const std::string& identity : ranks) {
    Consumer* c = Find(identity);
    if (c == nullptr || !c->attached) continue;
    FailConsumerLocked(*c, code, message);
  }
}

void Scheduler::ExpireFormingGroupsLocked(Clock::time_point now) {
  std::vector<uint64_t> expired;
  for (const auto& [id, g] : groups_) {
    if (!g->ended() && !g->complete() && now - g->created() >= config_.group_timeout) {
      expired.push_back(id);
    }
  }
  for (uint64_t id : expired) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    ConsumerGroup& g = *it->second;
    const std::string message = "group '" + g.spec().name + "' did not form: only ranks " +
                                g.RanksIn() + " of " + std::to_string(g.spec().world_size) +
                                " connected within " +
                                std::to_string(Seconds(config_.group_timeout)) +
                                " s (group_timeout), missing: " + g.RanksAbsent() +
                                " (every rank must connect to this same server; restart the job)";
    BC_LOG_WARN("{}", message);
    FailGroupLocked(g, StatusCode::kDeadlineExceeded, message);
  }
}

bool Scheduler::GroupConfirmedLocked(const ConsumerGroup& g) const {
  for (uint32_t r = 0; r < g.spec().world_size; ++r) {
    const Consumer* c = RankConsumerLocked(g, r);
    if (c != nullptr && c->confirmed) return true;
  }
  return false;
}

bool Scheduler::FrontierPinsLocked(const ConsumerGroup& g) const {
  if (!g.skipping) return true;
  for (uint32_t r = 0; r < g.spec().world_size; ++r) {
    const Consumer* c = RankConsumerLocked(g, r);
    if (c != nullptr && c->attached && !c->pending.empty()) return true;
  }
  return false;
}

bool Scheduler::ServeRankLocked(Consumer& c) {
  ConsumerGroup& g = *c.group;
  // Note [Resume]: waiting for the lane; its owner may have reached the
  // shared stream; rounds are cut from the slots the group reads.
  if (g.lane == LaneState::kWaiting) return false;
  if (g.lane == LaneState::kOwner && MergeOwnerLocked()) NotifyProducer();
  SlotTable& t = g.cut_from_lane ? lane_->table() : slots_;
  const uint64_t rid = c.pending.front();
  const ConsumerGroup::Plan p = g.PlanRank(c.rank, t, stream_end_);
  using Kind = ConsumerGroup::Plan::Kind;
  switch (p.kind) {
    case Kind::kStreamEnded:
      Send(c, proto::Error{rid, StatusCode::kOutOfRange,
                           "the stream has ended: the server produced all " +
                               std::to_string(stream_end_ / config_.epoch_len) + " of its epochs"});
      c.pending.pop_front();
      return true;
    case Kind::kEndOfEpoch:
      Send(c, proto::EndOfEpoch{rid, p.epoch, p.step, p.skipped, p.epoch_start, p.next_seq});
      g.Delivered(c.rank);
      c.pending.pop_front();
      NotifyProducer();
      return true;
    case Kind::kBroken: {
      Send(c, proto::Error{0, StatusCode::kCancelled, g.BrokenMessage()});
      c.attached = false;  // ServeLocked removes it once its leases are released
      c.pending.clear();
      LeaveGroupLocked(c, "its group broke");
      NotifyProducer();  // a detached rank no longer holds the window back
      return true;
    }
    case Kind::kWaitForPeers:
      return AnswerHoardingLocked(c, t);
    case Kind::kWait: {
      // Note [Resume]: its frontier may have passed the merge point just now.
      if (g.lane == LaneState::kOwner && MergeOwnerLocked()) {
        NotifyProducer();
        return true;
      }
      if (!g.Starved(t)) return AnswerHoardingLocked(c, t);
      // Only the group can move (Note [Consumer epochs]): the round the ring
      // holds is dropped for every rank.
      const uint64_t passed = g.PassOver(t, stream_end_);
      BC_LOG_WARN(
          "group '{}': the {}-slot ring holds only {} samples of its next round of {} (too many "
          "dropped files); passing over them",
          g.spec().name, t.window(), passed, uint64_t{g.spec().world_size} * g.spec().batch_size);
      NotifyProducer();
      return true;
    }
    case Kind::kBatch:
      break;
  }
  if (RefuseOverLeasesLocked(c)) return true;
  SendBatchLocked(c, p.lane ? lane_->table() : slots_, p.from, p.count,
                  BatchInfo{p.epoch, p.step, p.skipped, p.epoch_start, p.next_seq});
  g.Delivered(c.rank);
  return true;
}

void Scheduler::ApplyLagPolicyToGroupLocked(ConsumerGroup& g, uint64_t target) {
  const std::string& name = g.spec().name;
  if (g.broken()) {
    // Its ranks will get no round beyond the leaver's: neither skipping nor
    // waiting helps, so they get now the Cancelled they would get later.
    BC_LOG_WARN("group '{}' is broken and held the producer for {} ms: ending it", name,
                config_.lag_timeout.count());
    FailGroupLocked(g, StatusCode::kCancelled, g.BrokenMessage());
    return;
  }
  if (config_.lag_policy == LagPolicy::kEvict) {
    BC_LOG_WARN("group '{}' evicted: it blocked the producer for {} ms", name,
                config_.lag_timeout.count());
    for (uint32_t r = 0; r < g.spec().world_size; ++r) consumers_evicted_ += g.HasRank(r) ? 1 : 0;
    FailGroupLocked(g, StatusCode::kResourceExhausted,
                    "evicted by the server: group '" + name + "' blocked the producer for over " +
                        std::to_string(config_.lag_timeout.count()) +
                        " ms (lag_policy=evict; a group is evicted as a whole); read faster or "
                        "use a larger window");
    return;
  }
  SkipGroupLocked(g, target, "blocked the producer");
}

void Scheduler::SkipGroupLocked(ConsumerGroup& g, uint64_t target, std::string_view why) {
  const std::string& name = g.spec().name;
  if (g.frontier() >= target) {
    // Only chunks a slow rank was not served yet (its peers were) pin the
    // slot: skipping them would break equal counts, so they stay.
    BC_LOG_DEBUG("group '{}': a rank's unserved chunks hold the producer", name);
    return;
  }
  BC_LOG_WARN("group '{}' {} for {} ms: skipping {} seqs forward", name, why,
              config_.lag_timeout.count(), target - g.frontier());
  g.SkipTo(target, slots_.CountSamples(g.frontier(), target));
  g.skipping = true;
  ++skip_events_;
  std::vector<std::string> ranks;
  for (uint32_t r = 0; r < g.spec().world_size; ++r) {
    if (g.HasRank(r)) ranks.push_back(g.identity(r));
  }
  for (const std::string& identity : ranks) {
    if (Consumer* c = Find(identity); c != nullptr && c->attached) ServeLocked(*c);
  }
}

nlohmann::json Scheduler::GroupStatsLocked() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [id, g] : groups_) {
    const char* state = g->failed()     ? "failed"
                        : g->ended()    ? "broken"
                        : g->complete() ? "running"
                                        : "forming";
    list.push_back({{"name", g->spec().name},
                    {"id", id},
                    {"state", state},
                    {"world_size", g->spec().world_size},
                    {"batch_size", g->spec().batch_size},
                    {"ranks", g->RanksIn()},
                    {"batches_per_epoch", g->rounds_per_epoch()},
                    {"frontier", g->frontier()},
                    {"rounds", g->rounds()},
                    {"skipped", g->skipped()},
                    {"samples_passed_over", g->passed_over()}});
  }
  return list;
}

}  // namespace batchcast
