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

ConsumerCursor ConsumerCursor::Resumed(uint64_t epoch_len, uint32_t batch_size, bool drop_last,
                                       uint32_t epoch, uint32_t step, uint64_t epoch_start,
                                       uint64_t position, uint64_t skipped) {
  BATCHCAST_CHECK(InvalidPlace(epoch_len, epoch, epoch_start, position).empty());
  ConsumerCursor c(epoch_start - uint64_t{epoch} * epoch_len, epoch_len, batch_size, drop_last);
  c.epoch_ = epoch;
  c.step_ = step;
  c.position_ = position;
  c.skipped_ = skipped;
  return c;
}

std::string ConsumerCursor::InvalidPlace(uint64_t epoch_len, uint32_t epoch, uint64_t epoch_start,
                                         uint64_t position) {
  if (epoch_start / epoch_len < epoch) {
    return "epoch " + std::to_string(epoch) + " cannot start at seq " +
           std::to_string(epoch_start) + " (before " + std::to_string(epoch) + " epochs of " +
           std::to_string(epoch_len) + ")";
  }
  if (position < epoch_start || position - epoch_start > epoch_len) {
    return "seq " + std::to_string(position) + " is not in the epoch of " +
           std::to_string(epoch_len) + " seqs from seq " + std::to_string(epoch_start);
  }
  return "";
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
