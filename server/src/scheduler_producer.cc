// Scheduler: the producer's side: beginning and committing batches (Note
// [Leases], Note [Producer start and stream end]), the stream end and stop.
#include <algorithm>

#include "batchcast/core/check.h"
#include "core/src/logging.h"
#include "scheduler.h"

namespace batchcast {

// Note [Resume]: a reader waiting for the lane counts as attached, so a
// server restarted with --min-consumers waits for its resuming jobs too.
size_t Scheduler::AttachedCount() const {
  size_t n = 0;
  for (const auto& [_, c] : consumers_) n += c.attached && c.confirmed ? 1 : 0;
  return n;
}

uint64_t Scheduler::MinPinningCursor() const {
  uint64_t m = MergePinLocked().value_or(UINT64_MAX);
  for (const auto& [_, c] : consumers_) {
    if (c.PinsCursor()) m = std::min(m, c.cursor.position());
  }
  return m;
}

bool Scheduler::MayWriteLocked() const {
  // Note [Resume]: the shared stream is written only while someone reads it.
  if (!SharedReadLocked()) return false;
  return started_ || AttachedCount() >= std::max<uint32_t>(1, config_.min_consumers);
}

std::optional<uint32_t> Scheduler::FindWritableSlotLocked() const {
  const uint64_t min_cursor = MinPinningCursor();
  // Note [Consumer groups]: the groups' pins.
  std::vector<std::pair<const ConsumerGroup*, bool>> groups;
  for (const auto& [_, g] : groups_) {
    // Note [Resume]: a group that reads outside the shared stream pins it
    // only by the merge pin (MinPinningCursor).
    if (g->Live() && GroupConfirmedLocked(*g) && g->lane != LaneState::kWaiting &&
        !g->cut_from_lane) {
      groups.emplace_back(g.get(), FrontierPinsLocked(*g));
    }
  }
  return slots_.FindWritable([&](uint64_t first, uint64_t end) {
    if (end > min_cursor) return true;
    for (const auto& [g, frontier_pins] : groups) {
      if (g->Needs(first, end, frontier_pins)) return true;
    }
    return false;
  });
}

void Scheduler::EndBlockedLocked(Clock::time_point now) {
  if (blocked_since_) blocked_total_ += now - *blocked_since_;
  blocked_since_.reset();
}

Result<std::optional<SlotGrant>> Scheduler::TryBeginBatch(uint32_t epoch,
                                                          std::span<const int64_t> indices) {
  MutexLock lock(&mu_);
  return TryBeginLocked(epoch, indices);
}

Result<std::optional<SlotGrant>> Scheduler::TryBeginLocked(uint32_t epoch,
                                                           std::span<const int64_t> indices) {
  const size_t count = indices.size();
  if (count == 0 || count > config_.batch_size) {
    return InvalidArgumentError("a producer batch holds 1 to " +
                                std::to_string(config_.batch_size) + " samples, got " +
                                std::to_string(count));
  }
  if (stopped_) return CancelledError("server stopped");
  const uint64_t L = config_.epoch_len;
  const uint64_t next_seq = slots_.next_seq();
  if (next_seq / L != epoch || (next_seq + count - 1) / L != epoch) {
    return InvalidArgumentError(
        "batch of " + std::to_string(count) + " samples for producer epoch " +
        std::to_string(epoch) + " does not fit: the stream is at sample " +
        std::to_string(next_seq % L) + " of epoch " + std::to_string(next_seq / L) +
        ", whose length is " + std::to_string(L));
  }
  if (next_seq >= stream_end_) return OutOfRangeError("the stream has ended");
  const std::optional<uint32_t> slot = SharedSlotLocked(/*log_wait=*/true);
  if (!slot) return std::optional<SlotGrant>();
  BeganSharedLocked();
  return std::optional<SlotGrant>(slots_.Begin(*slot, epoch, indices));
}

std::optional<uint32_t> Scheduler::SharedSlotLocked(bool log_wait) {
  if (!MayWriteLocked()) {
    // Paused, not blocked: no consumer holds the producer up, so neither the
    // lag policy (Note [Lag policy]) nor producer_blocked_s counts this time.
    EndBlockedLocked(env_->Now());
    if (log_wait && !started_ && !warned_waiting_) {
      BC_LOG_INFO("waiting for {} consumer(s) before the first write ({} connected)",
                  std::max<uint32_t>(1, config_.min_consumers), AttachedCount());
      warned_waiting_ = true;
    }
    return std::nullopt;
  }
  const std::optional<uint32_t> slot = FindWritableSlotLocked();
  if (!slot && !blocked_since_) blocked_since_ = env_->Now();
  return slot;
}

void Scheduler::BeganSharedLocked() {
  EndBlockedLocked(env_->Now());
  warned_all_leased_ = false;
  started_ = true;
  ++batches_begun_;
}

Result<SlotGrant> Scheduler::BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                                        Clock::time_point deadline) {
  MutexLock lock(&mu_);
  while (true) {
    BATCHCAST_ASSIGN_OR_RETURN(std::optional<SlotGrant> grant, TryBeginLocked(epoch, indices));
    if (grant) return *grant;
    if (Clock::now() >= deadline) return DeadlineExceededError("no slot became free in time");
    // Every change that can make a slot writable signals producer_cv_.
    ++producer_waits_;
    producer_cv_.WaitUntil(&mu_, deadline);
  }
}

Status Scheduler::Commit(uint32_t slot, std::optional<uint32_t> valid) {
  {
    MutexLock lock(&mu_);
    // Note [Resume]: a lane slot, or one of the ring's.
    SlotTable& t = lane_ && lane_->table().Owns(slot) ? lane_->table() : slots_;
    const bool writing = t.Owns(slot) && t.slot(slot).state == SlotTable::State::kWriting;
    if (!writing) {
      return InvalidArgumentError("slot " + std::to_string(slot) +
                                  " is not being written: it was committed already or never "
                                  "begun");
    }
    const uint32_t count = t.slot(slot).count;
    if (valid && *valid > count) {
      return InvalidArgumentError("slot " + std::to_string(slot) + " spans " +
                                  std::to_string(count) + " seqs; it cannot hold " +
                                  std::to_string(*valid) + " samples");
    }
    BATCHCAST_CHECK(t.Commit(slot, valid.value_or(count)));
    ++(&t == &slots_ ? batches_written_ : lane_->batches_written);
    // Note [Placement]: what each ring decoded (the lane's batches too).
    RingCounts& rc = ring_counts_[t.slot(slot).ring];
    rc.batches_written += 1;
    rc.samples_decoded += t.slot(slot).valid;
    RingBusyLocked(t.slot(slot).ring, false);
    ServeAllLocked();
    NotifyProducer();  // published() moved: an older slot may be writable now
  }
  if (wakeup_) wakeup_();
  return Status::Ok();
}

void Scheduler::EndStream() {
  {
    MutexLock lock(&mu_);
    stream_end_ = std::min(stream_end_, slots_.next_seq());
    started_ = true;
    EndBlockedLocked(env_->Now());
    ServeAllLocked();
    NotifyProducer();
  }
  if (wakeup_) wakeup_();
}

void Scheduler::Stop() {
  MutexLock lock(&mu_);
  stopped_ = true;
  // A stopped producer waits for nothing: its waits end in the stats here.
  EndBlockedLocked(env_->Now());
  for (uint32_t ring = 0; ring < ring_work_.size(); ++ring) RingWaitsForTurnLocked(ring, false);
  NotifyProducer();
}

}  // namespace batchcast
