// Scheduler: where the next producer batch is written when the server holds
// several rings (Note [Placement]), and what each ring wrote and served.
#include <algorithm>

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

std::optional<uint32_t> Scheduler::PlaceAtLocked(uint64_t seq, uint64_t batch,
                                                 const std::vector<uint32_t>& candidates) const {
  if (std::optional<uint32_t> ring = GroupPlacementLocked(seq)) return ring;
  if (PlacesByDemand()) return std::nullopt;
  return candidates[batch % candidates.size()];
}

uint32_t Scheduler::PlaceNextLocked(uint32_t asking) const {
  if (config_.rings == 1) return 0;
  const std::vector<uint32_t> candidates = CandidateRingsLocked();
  const std::optional<uint32_t> ring = PlaceAtLocked(slots_.next_seq(), batches_begun_, candidates);
  if (ring) return *ring;
  // By demand: the asking ring when it has readers, else one that has.
  return std::find(candidates.begin(), candidates.end(), asking) != candidates.end()
             ? asking
             : candidates.front();
}

uint32_t Scheduler::RingsAskingBeforeLocked(uint32_t ring,
                                            const std::vector<uint32_t>& candidates) const {
  const RingWork& mine = ring_work_[ring];
  bool timed = mine.began.has_value();  // and every candidate's time measured
  for (uint32_t r : candidates) timed = timed && ring_work_[r].mean.count() > 0;
  const Clock::time_point now = env_->Now();
  uint32_t before = 0;
  for (uint32_t r : candidates) {
    if (r == ring) continue;
    const RingWork& other = ring_work_[r];
    if (!timed) {  // the order they began in; the free ones first
      before += !other.began || (mine.began && *other.began < *mine.began);
      continue;
    }
    // Its asks (now when free, else when its batch should be done, then
    // every mean batch time) before this ring's.
    const Clock::time_point mine_done = mine.began_at + mine.mean;
    for (Clock::time_point t = other.began ? other.began_at + other.mean : now;
         t < mine_done && before < 4 * config_.rings; t += other.mean) {
      ++before;
    }
  }
  return before;
}

void Scheduler::RingBusyLocked(uint32_t ring, bool busy) {
  RingWork& w = ring_work_[ring];
  const Clock::time_point now = env_->Now();
  if (busy) {
    w.began = work_begun_++;
    w.began_at = now;
    return;
  }
  if (w.began) {  // an exponential mean, each batch weighing a quarter
    const Clock::duration took = now - w.began_at;
    w.mean = w.mean.count() == 0 ? took : (3 * w.mean + took) / 4;
  }
  w.began.reset();
}

uint64_t Scheduler::NextBatchEndLocked(uint64_t seq) const {
  return seq + Lane::BatchCount(seq, config_.epoch_len, config_.batch_size, stream_end_);
}

std::optional<uint64_t> Scheduler::PredictNextBatch(uint32_t ring) const {
  MutexLock lock(&mu_);
  const std::vector<uint32_t> candidates = CandidateRingsLocked();
  const bool candidate = std::find(candidates.begin(), candidates.end(), ring) != candidates.end();
  uint32_t before = PlacesByDemand() ? RingsAskingBeforeLocked(ring, candidates) : 0;
  uint64_t seq = slots_.next_seq();
  uint64_t batch = batches_begun_;
  // A few rounds of the rotation: beyond them the state will have changed.
  for (uint32_t i = 0; i < 4 * config_.rings && seq < stream_end_; ++i, ++batch) {
    const std::optional<uint32_t> placed = PlaceAtLocked(seq, batch, candidates);
    // By demand the rings that ask first take the batches before this one's.
    if (placed ? *placed == ring : candidate && before-- == 0) return seq;
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
  for (size_t r = 0; r < ring_counts_.size(); ++r) {
    const RingCounts& rc = ring_counts_[r];
    rings.push_back({{"ring", r},
                     {"consumers", consumers[r]},
                     {"batches_written", rc.batches_written},
                     {"samples_decoded", rc.samples_decoded},
                     {"batches_local", rc.batches_local},
                     {"batches_from_peers", rc.batches_from_peers},
                     {"peer_bytes", rc.peer_bytes}});
  }
  return rings;
}

}  // namespace batchcast
