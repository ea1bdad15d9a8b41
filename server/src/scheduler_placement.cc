// Scheduler: where the next producer batch is written when the server holds
// several rings (Note [Placement]), and what each ring wrote and served.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "scheduler.h"

namespace batchcast {

uint32_t Scheduler::RankRingLocked(const ConsumerGroup& g, uint32_t rank) const {
  const Consumer* c = RankConsumerLocked(g, rank);
  return c != nullptr ? c->home_ring : rank % config_.rings;
}

std::optional<uint32_t> Scheduler::GroupRingLocked(const ConsumerGroup& g, uint64_t seq) const {
  if (!g.Live() || seq < g.start()) return std::nullopt;
  const uint32_t world = g.spec().world_size;
  const uint32_t B = g.spec().batch_size;
  bool several = false;
  for (uint32_t r = 1; r < world && !several; ++r) {
    several = RankRingLocked(g, r) != RankRingLocked(g, 0);
  }
  if (!several) return std::nullopt;
  // The round arithmetic of Note [Consumer groups], holes ignored.
  const uint64_t in_epoch = (seq - g.start()) % config_.epoch_len;
  const uint64_t round = uint64_t{world} * B;
  if (in_epoch >= g.rounds_per_epoch() * round) return std::nullopt;  // the dropped remainder
  return RankRingLocked(g, static_cast<uint32_t>(in_epoch % round / B));
}

std::optional<uint32_t> Scheduler::GroupPlacementLocked(uint64_t seq) const {
  for (const auto& [_, g] : groups_) {
    if (std::optional<uint32_t> ring = GroupRingLocked(*g, seq)) return ring;
  }
  return std::nullopt;
}

std::vector<uint32_t> Scheduler::CandidateRingsLocked() const {
  std::vector<bool> read(config_.rings, false);
  for (const auto& [_, c] : consumers_) {
    if (c.attached) read[c.home_ring] = true;
  }
  std::vector<uint32_t> candidates;
  for (uint32_t r = 0; r < config_.rings; ++r) {
    if (read[r]) candidates.push_back(r);
  }
  if (candidates.empty()) {
    for (uint32_t r = 0; r < config_.rings; ++r) candidates.push_back(r);
  }
  return candidates;
}

bool Scheduler::IsCandidateLocked(uint32_t ring) const {
  const std::vector<uint32_t> candidates = CandidateRingsLocked();
  return std::find(candidates.begin(), candidates.end(), ring) != candidates.end();
}

uint32_t Scheduler::PlaceAtLocked(uint64_t seq, uint64_t batch,
                                  const std::vector<uint32_t>& candidates) const {
  if (std::optional<uint32_t> ring = GroupPlacementLocked(seq)) return ring.value();
  if (PlacesByDemand() && plan_.rings == candidates && !plan_.order.empty()) {
    return plan_.order[(batch - plan_.start) % plan_.order.size()];
  }
  return candidates[batch % candidates.size()];
}

uint32_t Scheduler::PlaceNextLocked() {
  if (config_.rings == 1) return 0;
  const std::vector<uint32_t> candidates = CandidateRingsLocked();
  PlanLocked(candidates);
  return PlaceAtLocked(slots_.next_seq(), batches_begun_, candidates);
}

std::vector<double> Scheduler::SharesLocked(const std::vector<uint32_t>& candidates) const {
  std::vector<double> shares(candidates.size(), double{kPlanBatchesPerRing});
  std::vector<double> rates;  // batches per second of each candidate
  for (uint32_t r : candidates) {
    const Clock::duration mean = ring_work_[r].mean;
    if (mean.count() <= 0) return shares;  // not measured yet: equal shares
    rates.push_back(1.0 / std::chrono::duration<double>(mean).count());
  }
  const double total = std::accumulate(rates.begin(), rates.end(), 0.0);
  const double cycle = double{kPlanBatchesPerRing} * static_cast<double>(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) shares[i] = cycle * rates[i] / total;
  return shares;
}

void Scheduler::PlanLocked(const std::vector<uint32_t>& candidates) {
  if (!PlacesByDemand()) return;
  const bool same_rings = plan_.rings == candidates && !plan_.order.empty();
  // A plan is kept for whole cycles, so the hints given meanwhile come true.
  if (same_rings && ((batches_begun_ - plan_.start) % plan_.order.size() != 0 ||
                     plan_.checked == batches_begun_)) {
    return;
  }
  plan_.checked = batches_begun_;
  const std::vector<double> ideal = SharesLocked(candidates);
  if (same_rings) {
    // The plan's shares (how often each candidate comes in its cycle)
    // against the rates' own.
    double off = 0;
    for (size_t i = 0; i < ideal.size(); ++i) {
      const auto planned = std::count(plan_.order.begin(), plan_.order.end(), candidates[i]);
      off = std::max(off, std::abs(ideal[i] - static_cast<double>(planned)));
    }
    if (off < kPlanHysteresis) return;  // noise in the measured times
  }
  std::vector<uint32_t> shares;
  for (double share : ideal) {
    shares.push_back(std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(share))));
  }
  // Smooth weighted round robin: each ring's batches spread evenly over the
  // cycle; equal shares make it the round robin.
  const uint32_t cycle = std::accumulate(shares.begin(), shares.end(), 0u);
  std::vector<int64_t> credit(shares.size(), 0);
  plan_.order.clear();
  for (uint32_t i = 0; i < cycle; ++i) {
    size_t best = 0;
    for (size_t r = 0; r < shares.size(); ++r) {
      credit[r] += shares[r];
      if (credit[r] > credit[best]) best = r;
    }
    credit[best] -= cycle;
    plan_.order.push_back(candidates[best]);
  }
  plan_.start = batches_begun_;
  plan_.rings = candidates;
}

void Scheduler::RingBusyLocked(uint32_t ring, bool busy) {
  RingWork& w = ring_work_[ring];
  const Clock::time_point now = env_->Now();
  if (busy) {
    w.began_at = now;
    return;
  }
  if (w.began_at) {  // an exponential mean, each batch weighing a quarter
    const Clock::duration took = now - *w.began_at;
    w.mean = w.mean.count() == 0 ? took : (3 * w.mean + took) / 4;
  }
  w.began_at.reset();
}

void Scheduler::RingWaitsForTurnLocked(uint32_t ring, bool waits) {
  RingWork& w = ring_work_[ring];
  const Clock::time_point now = env_->Now();
  if (waits) {
    if (!w.turn_since) w.turn_since = now;
    return;
  }
  if (w.turn_since) w.turn_wait += now - *w.turn_since;
  w.turn_since.reset();
}

void Scheduler::RingBeginsLocked(uint32_t ring, std::optional<uint64_t> shared_seq) {
  RingWork& w = ring_work_[ring];
  if (shared_seq && w.hint && *w.hint != *shared_seq) ++w.hint_misses;
  w.hint.reset();
  RingWaitsForTurnLocked(ring, false);
  RingBusyLocked(ring, true);
}

void Scheduler::BeginAheadLocked(uint32_t asking) {
  if (config_.rings == 1 || !config_.begin_ahead || (lane_ && lane_->owner())) return;
  bool began = false;
  while (slots_.next_seq() < stream_end_ && MayWriteLocked()) {
    const uint32_t ring = PlaceNextLocked();
    RingWork& w = ring_work_[ring];
    if (ring == asking || w.ahead || !w.began_at) break;
    const std::optional<uint32_t> slot = FindWritableSlotLocked();
    if (!slot) break;
    w.ahead = BeginSharedLocked(*slot, ring);
    began = true;
  }
  // The stream's next batch may now be a waiting ring's.
  if (began) NotifyProducer();
}

uint64_t Scheduler::NextBatchEndLocked(uint64_t seq) const {
  return seq + Lane::BatchCount(seq, config_.epoch_len, config_.batch_size, stream_end_);
}

std::optional<uint64_t> Scheduler::PredictNextBatch(uint32_t ring) {
  MutexLock lock(&mu_);
  std::optional<uint64_t>& hint = ring_work_[ring].hint;
  hint = PredictLocked(ring);
  return hint;
}

std::optional<uint64_t> Scheduler::PredictLocked(uint32_t ring) const {
  // Note [Begun ahead]: its next batch is begun already.
  if (const std::optional<Work>& ahead = ring_work_[ring].ahead) return ahead->grant.first_seq;
  const std::vector<uint32_t> candidates = CandidateRingsLocked();
  uint64_t seq = slots_.next_seq();
  uint64_t batch = batches_begun_;
  // A cycle of the placement: beyond it the state may have changed.
  const uint64_t horizon = std::max<uint64_t>(4 * config_.rings, plan_.order.size());
  for (uint64_t i = 0; i < horizon && seq < stream_end_; ++i, ++batch) {
    if (PlaceAtLocked(seq, batch, candidates) == ring) return seq;
    seq = NextBatchEndLocked(seq);
  }
  return std::nullopt;
}

void Scheduler::CountReadLocked(const Consumer& c, std::span<const Segment> segments) {
  RingCounts& rc = ring_counts_[c.home_ring];
  uint64_t copied = 0;
  for (const Segment& s : segments) copied += s.ring != c.home_ring ? s.count : 0;
  if (copied == 0) {
    rc.batches_local += 1;
  } else {
    rc.batches_from_peers += 1;
    rc.peer_bytes += copied * config_.sample_bytes;
  }
}

nlohmann::json Scheduler::RingStatsLocked() const {
  nlohmann::json rings = nlohmann::json::array();
  std::vector<uint64_t> consumers(ring_counts_.size(), 0);
  for (const auto& [_, c] : consumers_) consumers[c.home_ring] += c.attached ? 1 : 0;
  const Clock::time_point now = env_->Now();
  for (size_t r = 0; r < ring_counts_.size(); ++r) {
    const RingCounts& rc = ring_counts_[r];
    const RingWork& w = ring_work_[r];
    const Clock::duration turn_wait =
        w.turn_wait + (w.turn_since ? now - *w.turn_since : Clock::duration{0});
    rings.push_back({{"ring", r},
                     {"consumers", consumers[r]},
                     {"batches_written", rc.batches_written},
                     {"samples_decoded", rc.samples_decoded},
                     {"batches_local", rc.batches_local},
                     {"batches_from_peers", rc.batches_from_peers},
                     {"peer_bytes", rc.peer_bytes},
                     {"turn_wait_s", std::chrono::duration<double>(turn_wait).count()},
                     {"read_ahead_misses", w.hint_misses}});
  }
  return rings;
}

}  // namespace batchcast
