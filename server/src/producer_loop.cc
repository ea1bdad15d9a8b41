#include "producer_loop.h"

#include <algorithm>

namespace batchcast {

ProducerLoop::ProducerLoop(Sampler sampler, Source* source, Scheduler* scheduler,
                           SlotPublisher* publisher, uint32_t batch_size, uint64_t epochs)
    : sampler_(std::move(sampler)),
      source_(source),
      scheduler_(scheduler),
      publisher_(publisher),
      batch_size_(batch_size),
      epochs_(epochs) {}

std::vector<int64_t> ProducerLoop::TakeOrder(uint64_t epoch) {
  if (next_order_.empty()) return sampler_.EpochOrder(epoch);
  std::vector<int64_t> order = std::move(next_order_);
  next_order_.clear();
  return order;
}

ReadAhead ProducerLoop::NextSamples(const std::vector<int64_t>& order, uint64_t epoch, uint64_t off,
                                    size_t n) {
  ReadAhead next;
  if (off + n < order.size()) {
    const size_t next_n = std::min<size_t>(batch_size_, order.size() - off - n);
    next.indices = std::span<const int64_t>(order.data() + off + n, next_n);
    next.epoch = static_cast<uint32_t>(epoch);
  } else if (epochs_ == 0 || epoch + 1 < epochs_) {
    // The epoch's last batch: the next one opens the next epoch, whose order
    // is computed now and kept for it.
    next_order_ = sampler_.EpochOrder(epoch + 1);
    next.indices = std::span<const int64_t>(next_order_.data(),
                                            std::min<size_t>(batch_size_, next_order_.size()));
    next.epoch = static_cast<uint32_t>(epoch + 1);
  }
  return next;
}

Result<uint32_t> ProducerLoop::WriteBatch(uint32_t epoch, std::span<const int64_t> indices,
                                          const ReadAhead& next) {
  BATCHCAST_ASSIGN_OR_RETURN(SlotGrant grant,
                             scheduler_->BeginBatch(epoch, indices, Clock::time_point::max()));
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
  const uint64_t L = sampler_.epoch_len();
  for (uint64_t epoch = 0; epochs_ == 0 || epoch < epochs_; ++epoch) {
    const std::vector<int64_t> order = TakeOrder(epoch);
    uint64_t written = 0;
    for (uint64_t off = 0; off < L; off += batch_size_) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(batch_size_, L - off));
      const ReadAhead next = NextSamples(order, epoch, off, n);
      BATCHCAST_ASSIGN_OR_RETURN(const uint32_t valid,
                                 WriteBatch(static_cast<uint32_t>(epoch),
                                            std::span<const int64_t>(order.data() + off, n), next));
      written += valid;
    }
    if (written == 0 && L > 0) {
      // Every sample was dropped (Note [Dropped files]): consumers would see
      // an empty epoch, and every later one too. Stop, so that each gets this.
      return DataLossError("epoch " + std::to_string(epoch) + " produced no sample: all " +
                           std::to_string(L) +
                           " failed to read or decode (the server's log names each file)");
    }
  }
  scheduler_->EndStream();
  return Status::Ok();
}

}  // namespace batchcast
