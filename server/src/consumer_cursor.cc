#include "consumer_cursor.h"

#include <algorithm>

#include "core/src/logging.h"

namespace batchcast {

ConsumerCursor::ConsumerCursor(uint64_t start, uint64_t epoch_len, uint32_t batch_size,
                               bool drop_last)
    : start_(start),
      epoch_len_(epoch_len),
      batch_size_(batch_size),
      drop_last_(drop_last),
      position_(start) {
  BATCHCAST_CHECK(epoch_len > 0 && batch_size > 0);
}

uint64_t ConsumerCursor::JoinStart(JoinPolicy join, uint64_t floor, uint64_t epoch_len) {
  if (join == JoinPolicy::kImmediate) return floor;
  return (floor + epoch_len - 1) / epoch_len * epoch_len;
}

uint64_t ConsumerCursor::BatchesPerEpoch(uint64_t epoch_len, uint32_t batch_size, bool drop_last) {
  return drop_last ? epoch_len / batch_size : (epoch_len + batch_size - 1) / batch_size;
}

uint64_t ConsumerCursor::EpochStart() const { return start_ + uint64_t{epoch_} * epoch_len_; }

uint64_t ConsumerCursor::EpochEnd(uint64_t stream_end) const {
  return std::min(EpochStart() + epoch_len_, stream_end);
}

ConsumerCursor::Plan ConsumerCursor::PlanNext(uint64_t stream_end, Supply supply) const {
  if (EpochStart() >= stream_end) return Plan{Plan::Kind::kStreamEnded, 0};
  const uint64_t end = EpochEnd(stream_end);
  if (position_ >= end || (drop_last_ && end - position_ < batch_size_)) {
    return Plan{Plan::Kind::kEndOfEpoch, 0};
  }
  if (supply.samples >= batch_size_) return Plan{Plan::Kind::kBatch, batch_size_};
  if (!supply.complete) return Plan{Plan::Kind::kWait, 0};
  if (supply.samples == 0 || drop_last_) return Plan{Plan::Kind::kEndOfEpoch, 0};
  return Plan{Plan::Kind::kBatch, supply.samples};
}

void ConsumerCursor::EndEpoch(uint64_t stream_end) {
  position_ = std::max(position_, EpochEnd(stream_end));
  epoch_ += 1;
  step_ = 0;
}

void ConsumerCursor::Advance(uint64_t to, uint64_t stream_end) {
  const uint64_t end = EpochEnd(stream_end);
  BATCHCAST_CHECK(position_ < to && to <= end) << "a batch crosses the consumer's epoch end";
  position_ = to;
  step_ += 1;
  if (drop_last_ && end > position_ && end - position_ < batch_size_) position_ = end;
}

void ConsumerCursor::PassTo(uint64_t to, uint64_t stream_end) {
  position_ = std::max(position_, std::min(to, EpochEnd(stream_end)));
}

void ConsumerCursor::SkipTo(uint64_t target, uint64_t samples) {
  if (target <= position_) return;
  skipped_ += samples;
  position_ = target;
}

}  // namespace batchcast
