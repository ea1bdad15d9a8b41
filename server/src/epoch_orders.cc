#include "epoch_orders.h"

#include <algorithm>

namespace batchcast {

EpochOrders::EpochOrders(Sampler sampler, uint64_t epochs)
    : sampler_(std::move(sampler)), epochs_(epochs) {}

std::shared_ptr<const std::vector<int64_t>> EpochOrders::Order(uint64_t epoch) {
  MutexLock lock(&mu_);
  if (!orders_.contains(epoch) && orders_.size() >= kKept) {
    // Forget the epoch farthest from this one.
    auto far = std::max_element(orders_.begin(), orders_.end(), [&](const auto& a, const auto& b) {
      return (a.first > epoch ? a.first - epoch : epoch - a.first) <
             (b.first > epoch ? b.first - epoch : epoch - b.first);
    });
    orders_.erase(far);
  }
  std::shared_ptr<const std::vector<int64_t>>& order = orders_[epoch];
  if (!order) order = std::make_shared<const std::vector<int64_t>>(sampler_.EpochOrder(epoch));
  return order;
}

Status EpochOrders::Record(uint64_t epoch, uint64_t offset, uint64_t seqs, uint64_t valid) {
  MutexLock lock(&mu_);
  const uint64_t L = sampler_.epoch_len();
  Written& w = written_[epoch];
  if (w.seq.empty()) w.seq.resize(L);
  for (uint64_t k = offset; k < std::min(offset + seqs, L); ++k) {
    if (!w.seq[k]) ++w.distinct;
    w.seq[k] = true;
  }
  w.samples += valid;
  if (w.distinct < L) {
    if (written_.size() > kKept) {
      // The farthest other epoch, the map's first or last (the stream moved
      // away from it).
      const uint64_t first = written_.begin()->first, last = written_.rbegin()->first;
      written_.erase(epoch - first >= last - epoch ? first : last);
    }
    return Status::Ok();
  }
  const bool empty = w.samples == 0;
  written_.erase(epoch);
  if (!empty) return Status::Ok();
  // Every sample was dropped (Note [Dropped files]): consumers would see an
  // empty epoch, and every later one too. Stop, so that each gets this.
  return DataLossError("epoch " + std::to_string(epoch) + " produced no sample: all " +
                       std::to_string(sampler_.epoch_len()) +
                       " failed to read or decode (the server's log names each file)");
}

}  // namespace batchcast
