#include "producer_loop.h"

#include <algorithm>

namespace batchcast {

ProducerLoop::ProducerLoop(EpochOrders* orders, uint32_t ring, Source* source, Scheduler* scheduler,
                           SlotPublisher* publisher, uint32_t batch_size, AttachPoint* attach)
    : orders_(orders),
      ring_(ring),
      source_(source),
      scheduler_(scheduler),
      publisher_(publisher),
      batch_size_(batch_size),
      attach_(attach) {}

ReadAhead ProducerLoop::NextSamples(uint64_t next_seq,
                                    std::shared_ptr<const std::vector<int64_t>>& keep) {
  const uint64_t L = orders_->epoch_len();
  const uint64_t epoch = next_seq / L;
  ReadAhead next;
  if (orders_->epochs() != 0 && epoch >= orders_->epochs()) return next;
  keep = orders_->Order(epoch);
  const uint64_t off = next_seq % L;
  const size_t n = std::min<size_t>(batch_size_, keep->size() - off);
  next.indices = std::span<const int64_t>(keep->data() + off, n);
  next.epoch = static_cast<uint32_t>(epoch);
  return next;
}

Result<uint32_t> ProducerLoop::WriteBatch(const Scheduler::Work& work) {
  const SlotGrant& grant = work.grant;
  const uint64_t L = orders_->epoch_len();
  const uint32_t epoch = work.epoch;
  const std::shared_ptr<const std::vector<int64_t>> order = orders_->Order(epoch);
  const auto first = order->begin() + static_cast<ptrdiff_t>(grant.first_seq % L);
  std::copy(first, first + grant.count, grant.indices);
  std::shared_ptr<const std::vector<int64_t>> next_order;
  // The read-ahead hint: the lane's next batch, or this ring's next batch of
  // the shared stream (Note [Placement]), else none: the stream's next is
  // another ring's, and reading it ahead would take it from a shard reader
  // that the rings share (MakeSources) before that ring asks for it.
  const uint64_t after = grant.first_seq + grant.count;
  const std::optional<uint64_t> ahead =
      work.lane ? std::optional<uint64_t>(after) : scheduler_->PredictNextBatch(ring_);
  ReadAhead next = ahead ? NextSamples(*ahead, next_order) : ReadAhead{};
  next.guess = !work.lane && scheduler_->PlacesByDemand();
  if (attach_ != nullptr) {
    // Note [Attached producers]: the holder writes the slot and records its
    // event; committing is still this thread's.
    attach_->Poll();
    BATCHCAST_ASSIGN_OR_RETURN(const std::optional<uint32_t> held,
                               attach_->Delegate(grant, epoch, next, dropped_));
    if (held) {
      // What the holder dropped counts as this ring's source's drops, and
      // its files are known bad here too, should this thread fill the ring
      // again.
      if (!dropped_.empty()) BATCHCAST_RETURN_IF_ERROR(source_->DroppedElsewhere(dropped_));
      BATCHCAST_RETURN_IF_ERROR(scheduler_->Commit(grant.slot, *held));
      return *held;
    }
  }
  BATCHCAST_ASSIGN_OR_RETURN(SlotView target, publisher_->Begin(grant, epoch));
  BATCHCAST_ASSIGN_OR_RETURN(const uint32_t valid, source_->FillBatch(target, next));
  if (valid > target.count()) {
    return InternalError("the source wrote " + std::to_string(valid) + " samples into a slot of " +
                         std::to_string(target.count()));
  }
  BATCHCAST_RETURN_IF_ERROR(publisher_->Publish(target, valid));  // the rest are holes
  return valid;
}

// The stream's end is the Scheduler's (SchedulerConfig::stream_end): after
// the last batch BeginWork waits until the server stops.
Status ProducerLoop::Run() {
  while (true) {
    // With an attach socket, it is answered while the ring waits for work.
    Result<Scheduler::Work> begun = scheduler_->BeginWork(
        ring_, attach_ != nullptr ? Clock::now() + std::chrono::milliseconds(100)
                                  : Clock::time_point::max());
    if (attach_ != nullptr && begun.status().code() == StatusCode::kDeadlineExceeded) {
      attach_->Poll();
      continue;
    }
    BATCHCAST_ASSIGN_OR_RETURN(const Scheduler::Work work, std::move(begun));
    BATCHCAST_ASSIGN_OR_RETURN(const uint32_t valid, WriteBatch(work));
    if (work.lane) continue;  // Note [Resume]: a catch-up, not the stream
    BATCHCAST_RETURN_IF_ERROR(orders_->Record(
        work.epoch, work.grant.first_seq % orders_->epoch_len(), work.grant.count, valid));
  }
}

}  // namespace batchcast
