#include "producer_loop.h"

#include <algorithm>

namespace batchcast {

ProducerLoop::ProducerLoop(EpochOrders* orders, uint32_t ring, Source* source, Scheduler* scheduler,
                           SlotPublisher* publisher, uint32_t batch_size)
    : orders_(orders),
      ring_(ring),
      source_(source),
      scheduler_(scheduler),
      publisher_(publisher),
      batch_size_(batch_size) {}

ReadAhead ProducerLoop::NextSamples(uint64_t end,
                                    std::shared_ptr<const std::vector<int64_t>>& keep) {
  const uint64_t L = orders_->epoch_len();
  const uint64_t epoch = end / L;
  ReadAhead next;
  if (orders_->epochs() != 0 && epoch >= orders_->epochs()) return next;
  keep = orders_->Order(epoch);
  const uint64_t off = end % L;
  const size_t n = std::min<size_t>(batch_size_, keep->size() - off);
  next.indices = std::span<const int64_t>(keep->data() + off, n);
  next.epoch = static_cast<uint32_t>(epoch);
  return next;
}

Result<uint32_t> ProducerLoop::WriteBatch(const SlotGrant& grant) {
  const uint64_t L = orders_->epoch_len();
  const auto epoch = static_cast<uint32_t>(grant.first_seq / L);
  const std::shared_ptr<const std::vector<int64_t>> order = orders_->Order(epoch);
  const auto first = order->begin() + static_cast<ptrdiff_t>(grant.first_seq % L);
  std::copy(first, first + grant.count, grant.indices);
  std::shared_ptr<const std::vector<int64_t>> next_order;
  // The read-ahead hint: this ring's next batch (Note [Placement]), else the
  // stream's next.
  const ReadAhead next = NextSamples(
      scheduler_->PredictNextBatch(ring_).value_or(grant.first_seq + grant.count), next_order);
  BATCHCAST_ASSIGN_OR_RETURN(SlotView target, publisher_->Begin(grant, epoch));
  BATCHCAST_ASSIGN_OR_RETURN(const uint32_t valid, source_->FillBatch(target, next));
  if (valid > target.count()) {
    return InternalError("the source wrote " + std::to_string(valid) + " samples into a slot of " +
                         std::to_string(target.count()));
  }
  BATCHCAST_RETURN_IF_ERROR(publisher_->Publish(target, valid));  // the rest are holes
  return valid;
}

Status ProducerLoop::Run() {
  while (true) {
    Result<SlotGrant> grant = scheduler_->BeginPlacedBatch(ring_, Clock::time_point::max());
    if (!grant.ok() && grant.status().code() == StatusCode::kOutOfRange) break;
    if (!grant.ok()) return grant.status();
    BATCHCAST_ASSIGN_OR_RETURN(const uint32_t valid, WriteBatch(*grant));
    BATCHCAST_RETURN_IF_ERROR(
        orders_->Record(grant->first_seq / orders_->epoch_len(), grant->count, valid));
  }
  scheduler_->EndStream();
  return Status::Ok();
}

}  // namespace batchcast
