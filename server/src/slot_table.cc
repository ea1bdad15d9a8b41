#include "slot_table.h"

#include <algorithm>

#include "core/src/logging.h"

namespace batchcast {

SlotTable::SlotTable(uint32_t window, uint32_t batch_size, uint32_t first_slot)
    : first_slot_(first_slot), slots_(window) {
  for (Slot& s : slots_) s.indices.resize(batch_size);
}

uint32_t SlotTable::Local(uint32_t slot) const {
  BATCHCAST_CHECK(Owns(slot)) << "slot " << slot << " is not in this table";
  return slot - first_slot_;
}

bool SlotTable::Idle() const {
  for (const Slot& s : slots_) {
    if (s.state == State::kWriting || s.leases > 0) return false;
  }
  return true;
}

void SlotTable::Restart(uint64_t seq) {
  BATCHCAST_CHECK(Idle()) << "a slot is being written or leased";
  for (Slot& s : slots_) s.state = State::kFree;
  by_seq_.clear();
  next_seq_ = published_ = seq;
}

uint64_t SlotTable::JoinFloor() const {
  uint64_t floor = next_seq_;
  for (auto it = by_seq_.rbegin(); it != by_seq_.rend(); ++it) {
    const Slot& s = slots_[it->second];
    if (s.end() != floor) break;
    floor = s.first_seq;
  }
  return floor;
}

const SlotTable::Slot* SlotTable::OldestUnleased() const {
  for (const auto& [first, slot] : by_seq_) {
    const Slot& s = slots_[slot];
    if (s.state == State::kReady && s.leases == 0 && s.end() <= published_) return &s;
  }
  return nullptr;
}

const SlotTable::Slot* SlotTable::Writing(uint64_t seq) const {
  for (const Slot& s : slots_) {
    if (s.state == State::kWriting && s.first_seq == seq) return &s;
  }
  return nullptr;
}

SlotGrant SlotTable::Begin(uint32_t slot, uint32_t epoch, std::span<const int64_t> indices,
                           uint32_t ring) {
  SlotGrant g = Begin(slot, epoch, static_cast<uint32_t>(indices.size()), ring);
  std::copy(indices.begin(), indices.end(), g.indices);
  return g;
}

SlotGrant SlotTable::Begin(uint32_t slot, uint32_t epoch, uint32_t count, uint32_t ring) {
  const uint32_t i = Local(slot);
  Slot& s = slots_[i];
  BATCHCAST_CHECK(s.state != State::kWriting && s.leases == 0);
  BATCHCAST_CHECK(count > 0 && count <= s.indices.size());
  if (s.state == State::kReady) by_seq_.erase(s.first_seq);
  s.state = State::kWriting;
  s.first_seq = next_seq_;
  s.count = count;
  s.valid = 0;
  s.epoch = epoch;
  s.ring = ring;
  by_seq_[s.first_seq] = i;
  next_seq_ += s.count;
  return SlotGrant{slot, s.first_seq, s.count, s.indices.data()};
}

bool SlotTable::Commit(uint32_t slot, uint32_t valid) {
  if (!Owns(slot) || slots_[slot - first_slot_].state != State::kWriting) return false;
  Slot& s = slots_[slot - first_slot_];
  BATCHCAST_CHECK(valid <= s.count) << valid << " samples in a slot of " << s.count << " seqs";
  s.state = State::kReady;
  s.valid = valid;
  holes_ += s.count - valid;
  while (true) {
    auto it = by_seq_.find(published_);
    if (it == by_seq_.end() || slots_[it->second].state != State::kReady) break;
    published_ += slots_[it->second].count;
  }
  return true;
}

uint32_t SlotTable::SlotOf(uint64_t seq) const {
  auto it = by_seq_.upper_bound(seq);
  BATCHCAST_CHECK(it != by_seq_.begin()) << "seq " << seq << " is not in the ring";
  --it;
  const Slot& s = slots_[it->second];
  BATCHCAST_CHECK(s.state == State::kReady && seq >= s.first_seq && seq < s.end())
      << "seq " << seq << " is not in a ready slot";
  return it->second;
}

template <typename Run>
SlotTable::Walk SlotTable::WalkSamples(uint64_t from, uint64_t limit, uint32_t want,
                                       Run&& run) const {
  Walk w;
  const uint64_t stop = std::min(limit, published_);
  uint64_t seq = from;
  while (seq < stop && w.samples < want) {
    const uint32_t slot = SlotOf(seq);
    const Slot& s = slots_[slot];
    const uint64_t samples_end = std::min(s.first_seq + s.valid, stop);
    if (seq < samples_end) {
      const auto n = static_cast<uint32_t>(std::min<uint64_t>(want - w.samples, samples_end - seq));
      run(first_slot_ + slot, static_cast<uint32_t>(seq - s.first_seq), n);
      w.samples += n;
      seq += n;
      if (w.samples == want) break;
    }
    seq = std::min(s.end(), stop);  // over the slot's holes
  }
  w.end = seq;
  w.complete = std::max(from, published_) >= limit;
  return w;
}

SlotTable::Walk SlotTable::Find(uint64_t from, uint64_t limit, uint32_t want) const {
  return WalkSamples(from, limit, want, [](uint32_t, uint32_t, uint32_t) {});
}

uint64_t SlotTable::SkipHoles(uint64_t from, uint64_t limit) const {
  const uint64_t stop = std::min(limit, published_);
  uint64_t seq = from;
  while (seq < stop) {
    const Slot& s = slots_[SlotOf(seq)];
    if (seq < s.first_seq + s.valid) break;
    seq = std::min(s.end(), stop);
  }
  return seq;
}

uint64_t SlotTable::CountSamples(uint64_t from, uint64_t to) const {
  if (to <= from) return 0;
  uint64_t samples = to - from;
  for (const auto& [first, slot] : by_seq_) {
    const Slot& s = slots_[slot];
    if (s.state != State::kReady) continue;
    const uint64_t lo = std::max(from, first + s.valid);
    const uint64_t hi = std::min(to, s.end());
    if (lo < hi) samples -= hi - lo;
  }
  return samples;
}

std::vector<uint32_t> SlotTable::Lease(uint64_t from, uint32_t count,
                                       std::vector<Segment>& segments,
                                       std::vector<int64_t>& indices) {
  std::vector<uint32_t> pinned;
  const Walk w =
      WalkSamples(from, published_, count, [&](uint32_t slot, uint32_t offset, uint32_t n) {
        Slot& s = slots_[Local(slot)];
        segments.push_back(Segment{slot, offset, n, s.epoch, s.ring});
        indices.insert(indices.end(), s.indices.begin() + offset, s.indices.begin() + offset + n);
        s.leases += 1;
        pinned.push_back(slot);
      });
  BATCHCAST_CHECK(w.samples == count) << "only " << w.samples << " of " << count
                                      << " samples from seq " << from << " are published";
  return pinned;
}

void SlotTable::Unpin(const std::vector<uint32_t>& slots) {
  for (uint32_t slot : slots) {
    Slot& s = slots_[Local(slot)];
    BATCHCAST_CHECK(s.leases > 0);
    s.leases -= 1;
  }
}

bool SlotTable::FullFrom(uint64_t seq) const {
  for (const Slot& s : slots_) {
    if (s.state != State::kReady || s.end() <= seq) return false;
  }
  return true;
}

SlotTable::Counts SlotTable::Count() const {
  Counts c;
  for (const Slot& s : slots_) {
    c.free += s.state == State::kFree;
    c.writing += s.state == State::kWriting;
    c.ready += s.state == State::kReady;
    c.leased += s.leases > 0;
  }
  return c;
}

}  // namespace batchcast
