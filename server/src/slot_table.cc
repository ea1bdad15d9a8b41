#include "slot_table.h"

#include <algorithm>

#include "core/src/logging.h"

namespace batchcast {

SlotTable::SlotTable(uint32_t window, uint32_t batch_size) : slots_(window) {
  for (Slot& s : slots_) s.indices.resize(batch_size);
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

std::optional<uint32_t> SlotTable::FindWritable(uint64_t min_cursor) const {
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == State::kFree) return i;
  }
  const Slot* oldest = OldestUnleased();
  if (oldest != nullptr && oldest->end() <= min_cursor) {
    return by_seq_.at(oldest->first_seq);
  }
  return std::nullopt;
}

const SlotTable::Slot* SlotTable::OldestUnleased() const {
  for (const auto& [first, slot] : by_seq_) {
    const Slot& s = slots_[slot];
    if (s.state == State::kReady && s.leases == 0 && s.end() <= published_) return &s;
  }
  return nullptr;
}

SlotGrant SlotTable::Begin(uint32_t slot, uint32_t epoch, std::span<const int64_t> indices) {
  Slot& s = slots_[slot];
  BATCHCAST_CHECK(s.state != State::kWriting && s.leases == 0);
  BATCHCAST_CHECK(!indices.empty() && indices.size() <= s.indices.size());
  if (s.state == State::kReady) by_seq_.erase(s.first_seq);
  s.state = State::kWriting;
  s.first_seq = next_seq_;
  s.count = static_cast<uint32_t>(indices.size());
  s.epoch = epoch;
  std::copy(indices.begin(), indices.end(), s.indices.begin());
  by_seq_[s.first_seq] = slot;
  next_seq_ += s.count;
  return SlotGrant{slot, s.first_seq, s.count, s.indices.data()};
}

bool SlotTable::Commit(uint32_t slot) {
  if (slot >= slots_.size() || slots_[slot].state != State::kWriting) return false;
  slots_[slot].state = State::kReady;
  while (true) {
    auto it = by_seq_.find(published_);
    if (it == by_seq_.end() || slots_[it->second].state != State::kReady) break;
    published_ += slots_[it->second].count;
  }
  return true;
}

std::vector<uint32_t> SlotTable::Lease(uint64_t first, uint32_t count,
                                       std::vector<Segment>& segments,
                                       std::vector<int64_t>& indices) {
  BATCHCAST_CHECK(first + count <= published_)
      << "seqs up to " << first + count << " are not published yet";
  std::vector<uint32_t> pinned;
  const uint64_t end = first + count;
  for (uint64_t seq = first; seq < end;) {
    auto it = by_seq_.upper_bound(seq);
    BATCHCAST_CHECK(it != by_seq_.begin()) << "seq " << seq << " is not in the ring";
    --it;
    const uint32_t slot = it->second;
    Slot& s = slots_[slot];
    BATCHCAST_CHECK(s.state == State::kReady && seq >= s.first_seq && seq < s.end())
        << "seq " << seq << " is not in a ready slot";
    const auto offset = static_cast<uint32_t>(seq - s.first_seq);
    const auto n = static_cast<uint32_t>(std::min(s.end(), end) - seq);
    segments.push_back(Segment{slot, offset, n, s.epoch});
    indices.insert(indices.end(), s.indices.begin() + offset, s.indices.begin() + offset + n);
    s.leases += 1;
    pinned.push_back(slot);
    seq += n;
  }
  return pinned;
}

void SlotTable::Unpin(const std::vector<uint32_t>& slots) {
  for (uint32_t slot : slots) {
    BATCHCAST_CHECK(slots_[slot].leases > 0);
    slots_[slot].leases -= 1;
  }
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
