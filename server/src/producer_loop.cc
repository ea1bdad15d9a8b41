#include "producer_loop.h"

#include <algorithm>

#include "lane.h"

namespace batchcast {
namespace {

// Epoch orders kept: the shared stream's current and next, the lane's
// current and next.
constexpr size_t kOrders = 4;

}  // namespace

ProducerLoop::ProducerLoop(Sampler sampler, Source* source, Scheduler* scheduler,
                           SlotPublisher* publisher, uint32_t batch_size, uint64_t epochs)
    : sampler_(std::move(sampler)),
      source_(source),
      scheduler_(scheduler),
      publisher_(publisher),
      batch_size_(batch_size),
      stream_end_(epochs == 0 ? UINT64_MAX : epochs * sampler_.epoch_len()) {}

const std::vector<int64_t>& ProducerLoop::Order(uint64_t epoch) {
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  if (orders_.size() >= kOrders) {
    // Forget the epoch farthest from this one (the others are in use).
    auto far = std::max_element(orders_.begin(), orders_.end(), [&](const auto& a, const auto& b) {
      return (a.first > epoch ? a.first - epoch : epoch - a.first) <
             (b.first > epoch ? b.first - epoch : epoch - b.first);
    });
    orders_.erase(far);
  }
  return orders_.emplace(epoch, sampler_.EpochOrder(epoch)).first->second;
}

ReadAhead ProducerLoop::NextSamples(uint64_t end) {
  const uint64_t L = sampler_.epoch_len();
  const uint32_t n = Lane::BatchCount(end, L, batch_size_, stream_end_);
  if (n == 0) return ReadAhead{};
  const std::vector<int64_t>& order = Order(end / L);
  return ReadAhead{std::span<const int64_t>(order.data() + end % L, n),
                   static_cast<uint32_t>(end / L)};
}

Result<uint32_t> ProducerLoop::WriteBatch(const Scheduler::Work& work) {
  const SlotGrant& grant = work.grant;
  const uint64_t L = sampler_.epoch_len();
  {
    const std::vector<int64_t>& order = Order(work.epoch);
    const uint64_t off = grant.first_seq % L;
    std::copy(order.begin() + static_cast<ptrdiff_t>(off),
              order.begin() + static_cast<ptrdiff_t>(off + grant.count), grant.indices);
  }
  const ReadAhead next = NextSamples(grant.first_seq + grant.count);
  BATCHCAST_ASSIGN_OR_RETURN(SlotView target, publisher_->Begin(grant, work.epoch));
  BATCHCAST_ASSIGN_OR_RETURN(const uint32_t valid, source_->FillBatch(target, next));
  if (valid > target.count()) {
    return InternalError("the source wrote " + std::to_string(valid) + " samples into a slot of " +
                         std::to_string(target.count()));
  }
  BATCHCAST_RETURN_IF_ERROR(publisher_->Publish(target, valid));  // the rest are holes
  return valid;
}

Status ProducerLoop::CountSharedBatch(const Scheduler::Work& work, uint32_t valid) {
  const uint64_t L = sampler_.epoch_len();
  const uint64_t off = work.grant.first_seq % L;
  if (work.epoch != shared_epoch_ || off == 0) {
    shared_epoch_ = work.epoch;
    shared_written_ = 0;
    shared_whole_ = off == 0;  // the stream may have moved into the middle of it
  }
  shared_written_ += valid;
  if (off + work.grant.count == L && shared_whole_ && shared_written_ == 0) {
    // Every sample was dropped (Note [Dropped files]): consumers would see
    // an empty epoch, and every later one too. Stop, so that each gets this.
    return DataLossError("epoch " + std::to_string(work.epoch) + " produced no sample: all " +
                         std::to_string(L) +
                         " failed to read or decode (the server's log names each file)");
  }
  return Status::Ok();
}

Status ProducerLoop::Run() {
  while (true) {
    BATCHCAST_ASSIGN_OR_RETURN(const Scheduler::Work work,
                               scheduler_->BeginWork(Clock::time_point::max()));
    BATCHCAST_ASSIGN_OR_RETURN(const uint32_t valid, WriteBatch(work));
    if (work.lane) continue;
    BATCHCAST_RETURN_IF_ERROR(CountSharedBatch(work, valid));
    if (work.grant.first_seq + work.grant.count == stream_end_) scheduler_->EndStream();
  }
}

}  // namespace batchcast
