// Scheduler: the time-based rules, applied by Tick on the control thread:
// liveness, Note [Lag policy], and the hoarding answer of Note [Leases].
#include "core/src/logging.h"
#include "scheduler.h"

namespace batchcast {
namespace {

uint64_t Ms(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

void Scheduler::Tick() {
  MutexLock lock(&mu_);
  const Clock::time_point now = env_->Now();
  RemoveDeadLocked(now);
  ExpireFormingGroupsLocked(now);
  if (ReviewResumersLocked()) NotifyProducer();  // Note [Resume]
  if (config_.lag_policy != LagPolicy::kBlock && blocked_since_ &&
      now - *blocked_since_ >= config_.lag_timeout && MayWriteLocked() &&
      !FindWritableSlotLocked()) {
    ApplyLagPolicyLocked(now);
  }
  ServeAllLocked();  // time-based answers (a consumer pinning every slot)
}

void Scheduler::RemoveDeadLocked(Clock::time_point now) {
  std::vector<std::pair<std::string, std::string>> dead;
  for (const auto& [identity, c] : consumers_) {
    if (c.pid_visible && !env_->ProcessAlive(c.pid)) {
      dead.emplace_back(identity, "its process " + std::to_string(c.pid) + " exited");
    } else if (now - c.last_seen > config_.heartbeat_timeout) {
      dead.emplace_back(identity, "no heartbeat for " + std::to_string(Ms(now - c.last_seen)) +
                                      " ms (timeout " +
                                      std::to_string(config_.heartbeat_timeout.count()) + " ms)");
    }
  }
  for (const auto& [identity, reason] : dead) {
    ++consumers_lost_;
    RemoveLocked(identity, reason);
  }
}

void Scheduler::ApplyLagPolicyLocked(Clock::time_point now) {
  blocked_total_ += now - *blocked_since_;
  blocked_since_ = now;  // a producer still blocked applies it again after lag_timeout
  const SlotTable::Slot* oldest = slots_.OldestUnleased();
  if (oldest == nullptr) {
    if (!warned_all_leased_) {
      // Batches publish in order (Note [Placement]): a ring still writing the
      // stream's next batch holds back the ones after it, and the consumers
      // wait for it; none of them holds the producer up.
      if (const SlotTable::Slot* next = slots_.Writing(slots_.published())) {
        BC_LOG_WARN(
            "producer blocked: ring {} still writes seqs [{}, {}), the stream's next batch, and "
            "the batches after it fill the window; no consumer holds the producer up",
            next->ring, next->first_seq, next->end());
      } else {
        BC_LOG_WARN(
            "producer blocked: every slot is being written or leased; a consumer holds "
            "batches without releasing them");
      }
      warned_all_leased_ = true;
    }
    return;
  }
  // A skipping consumer lands at the head of the stream and pins nothing
  // until it asks for data again.
  const uint64_t published = slots_.published();
  const uint64_t target = std::max(oldest->end(), published);
  std::vector<Consumer*> laggards;
  // Note [Resume]: a lane owner pins the shared stream only by its merge pin.
  const std::optional<uint64_t> merge_pin = MergePinLocked();
  const bool owner_lags = merge_pin && *merge_pin < oldest->end();
  for (auto& [_, c] : consumers_) {
    if (c.PinsCursor() && c.cursor.position() < oldest->end()) {
      laggards.push_back(&c);
    } else if (owner_lags && c.group == nullptr && c.lane == LaneState::kOwner) {
      LeaveLaneLocked(Lane::Owner{c.identity});  // it reads the shared stream from here
      laggards.push_back(&c);
    }
  }
  // Note [Consumer groups]: whole groups that need the slot; forming ones
  // only skip, broken ones end (Note [Lag policy]).
  std::vector<std::pair<uint64_t, bool>> lagging_groups;  // id, forming
  for (const auto& [id, g] : groups_) {
    const bool merging_owner = owner_lags && g->lane == LaneState::kOwner && g->cut_from_lane;
    if (merging_owner) LeaveLaneLocked(Lane::Owner{"", id});
    if (!g->Live() || !GroupConfirmedLocked(*g) || g->lane == LaneState::kWaiting ||
        g->cut_from_lane ||
        !(merging_owner || g->Needs(oldest->first_seq, oldest->end(), FrontierPinsLocked(*g)))) {
      continue;
    }
    if (g->complete() || g->broken()) {
      lagging_groups.emplace_back(id, false);
    } else if (!g->ended()) {
      lagging_groups.emplace_back(id, true);
    }
  }
  for (const auto& [id, forming] : lagging_groups) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    if (forming) {
      SkipGroupLocked(*it->second, target, "is still forming and held the producer");
    } else {
      ApplyLagPolicyToGroupLocked(*it->second, target);
    }
  }
  for (Consumer* c : laggards) {
    const uint64_t at = c->cursor.position();
    if (config_.lag_policy == LagPolicy::kSkip) {
      BC_LOG_WARN("consumer {} '{}' blocked the producer for {} ms: skipping {} seqs forward",
                  c->id, c->name, config_.lag_timeout.count(), target - at);
      c->cursor.SkipTo(target, slots_.CountSamples(at, target));
      c->skipping = true;
      ++skip_events_;
      ServeLocked(*c);
    } else {
      const uint64_t behind = published - at;
      BC_LOG_WARN("consumer {} '{}' evicted: it blocked the producer for {} ms, {} samples behind",
                  c->id, c->name, config_.lag_timeout.count(), behind);
      ++consumers_evicted_;
      Send(*c, proto::Error{0, StatusCode::kResourceExhausted,
                            "evicted by the server: this consumer blocked the producer for over " +
                                std::to_string(config_.lag_timeout.count()) + " ms while " +
                                std::to_string(behind) +
                                " samples behind (lag_policy=evict); read faster or use a larger "
                                "window"});
      DetachLocked(*c, "evicted");
    }
  }
  NotifyProducer();
}

}  // namespace batchcast
