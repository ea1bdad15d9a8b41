#include "lane.h"

#include <algorithm>

#include "batchcast/core/check.h"

namespace batchcast {

Lane::Lane(uint32_t first_slot, uint32_t slots, uint32_t batch_size, uint64_t epoch_len)
    : epoch_len_(epoch_len), batch_size_(batch_size), table_(slots, batch_size, first_slot) {
  BATCHCAST_CHECK(slots > 0 && epoch_len > 0 && batch_size > 0);
}

void Lane::Assign(Owner owner, uint64_t from) {
  BATCHCAST_CHECK(Free());
  owner_ = std::move(owner);
  merge_at.reset();
  table_.Restart(BatchStart(from, epoch_len_, batch_size_));
  ++owners;
}

void Lane::Release() {
  owner_.reset();
  merge_at.reset();
}

uint64_t Lane::BatchStart(uint64_t seq, uint64_t epoch_len, uint32_t batch_size) {
  const uint64_t epoch_start = seq / epoch_len * epoch_len;
  return epoch_start + (seq - epoch_start) / batch_size * batch_size;
}

uint32_t Lane::BatchCount(uint64_t first, uint64_t epoch_len, uint32_t batch_size,
                          uint64_t stream_end) {
  if (first >= stream_end) return 0;
  const uint64_t epoch_end = first / epoch_len * epoch_len + epoch_len;
  return static_cast<uint32_t>(
      std::min({uint64_t{batch_size}, epoch_end - first, stream_end - first}));
}

uint64_t Lane::SlotsFor(uint64_t samples, uint32_t batch_size) {
  // Its first batch may hold one sample of it, and it may cross the end of
  // a producer epoch, whose last batch may be short.
  return (samples + batch_size - 1) / batch_size + 2;
}

}  // namespace batchcast
