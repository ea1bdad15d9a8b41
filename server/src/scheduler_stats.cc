// Scheduler::Stats: the scheduler's part of the server's stats JSON.
#include <algorithm>

#include "scheduler.h"

namespace batchcast {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

nlohmann::json Scheduler::Stats() const {
  MutexLock lock(&mu_);
  using nlohmann::json;
  const Clock::time_point now = env_->Now();
  const uint64_t published = slots_.published();
  json j;
  j["window"] = config_.window;
  j["batch_size"] = config_.batch_size;
  j["epoch_len"] = config_.epoch_len;
  j["lag_policy"] = std::string(LagPolicyName(config_.lag_policy));
  j["placement"] = std::string(PlacementName(config_.placement));
  // Note [Holes]: the stream's position counts seqs; the samples among them
  // leave out the holes (the producer commits in seq order, so every hole
  // committed is published).
  j["seqs_published"] = published;
  j["holes"] = slots_.holes();
  j["samples_published"] = published - std::min(published, slots_.holes());
  j["batches_written"] = batches_written_;
  j["producer_epoch"] = published / config_.epoch_len;
  j["stream_ended"] = stream_end_ != UINT64_MAX && published >= stream_end_;
  if (stream_end_ != UINT64_MAX) j["stream_end"] = stream_end_;
  j["uptime_s"] = Seconds(now - created_);
  j["producer_blocked_s"] =
      Seconds(blocked_total_ + (blocked_since_ ? now - *blocked_since_ : Clock::duration{0}));
  const SlotTable::Counts counts = slots_.Count();
  j["slots"] = {{"free", counts.free},
                {"writing", counts.writing},
                {"ready", counts.ready},
                {"leased", counts.leased}};
  j["consumers_evicted"] = consumers_evicted_;
  j["consumers_lost"] = consumers_lost_;
  j["skip_events"] = skip_events_;
  json list = json::array();
  uint64_t slowest_lag = 0;
  for (const auto& [_, c] : consumers_) {
    // A rank's position is its group's (Note [Consumer groups]).
    const ConsumerGroup* g = c.group;
    const uint64_t at = g != nullptr ? g->RankCursor(c.rank) : c.cursor.position();
    const uint64_t lag = published > at && c.attached ? published - at : 0;
    // Note [Resume]: a reader outside the shared stream holds nobody up.
    const LaneState lane = g != nullptr ? g->lane : c.lane;
    if (c.attached && lane == LaneState::kNone) slowest_lag = std::max(slowest_lag, lag);
    json entry = {{"id", c.id},
                  {"name", c.name},
                  {"pid", c.pid},
                  {"batch_size", c.cursor.batch_size()},
                  {"attached", c.attached},
                  {"ring", c.home_ring},
                  {"epoch", g != nullptr ? g->RankEpoch(c.rank) : c.cursor.epoch()},
                  {"step", g != nullptr ? g->RankStep(c.rank) : c.cursor.step()},
                  {"cursor", at},
                  {"lag_samples", lag},
                  {"batches", c.batches},
                  {"samples", c.samples},
                  {"samples_passed_over", g != nullptr ? g->passed_over() : c.passed_over},
                  {"skipped", g != nullptr ? g->skipped() : c.cursor.skipped()},
                  {"leases", c.leases.size()},
                  {"pending", c.pending.size()},
                  {"wait_s", Seconds(c.waited + (c.waiting_since ? now - *c.waiting_since
                                                                 : Clock::duration{0}))},
                  {"connected_s", Seconds(now - c.joined)}};
    if (c.resumed) {
      entry["resumed"] = lane == LaneState::kNone      ? "stream"
                         : lane == LaneState::kWaiting ? "waiting"
                                                       : "lane";
    }
    if (g != nullptr) {
      entry["group"] = g->spec().name;
      entry["rank"] = c.rank;
      entry["world_size"] = g->spec().world_size;
    }
    list.push_back(std::move(entry));
  }
  if (lane_) {
    j["resume_lane"] = {{"slots", lane_->slots()},      {"batches_written", lane_->batches_written},
                        {"owners", lane_->owners},      {"merges", lane_->merges},
                        {"waiting", lane_line_.size()}, {"busy", lane_->owner().has_value()}};
  }
  j["stream_moves"] = stream_moves_;
  j["consumers"] = list;
  j["groups"] = GroupStatsLocked();
  j["rings"] = RingStatsLocked();
  j["slowest_lag_samples"] = slowest_lag;
  j["slowest_lag_slots"] =
      static_cast<double>(slowest_lag) / static_cast<double>(config_.batch_size);
  return j;
}

}  // namespace batchcast
