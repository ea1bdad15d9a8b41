#include "batchcast/sources/source.h"

#include <algorithm>
#include <cstring>

#include "batchcast/core/check.h"
#include "thread_pool.h"

namespace batchcast {

namespace {

// Moves the samples of `slot` whose written[i] is non-zero down to positions
// 0..valid-1 (memmove per field, host memory), in order, rewrites
// slot.indices[0..valid) to name them, and returns valid.
uint32_t CompactSlot(const SlotView& slot, std::span<const uint8_t> written) {
  BATCHCAST_CHECK(written.size() == slot.count());
  uint32_t valid = 0;
  for (size_t i = 0; i < written.size(); ++i) {
    if (written[i] == 0) continue;
    if (valid != i) {
      BATCHCAST_CHECK(slot.device.kind == MemoryKind::kHost)
          << "CompactSlot moves samples in host memory only";
      for (size_t f = 0; f < slot.field_data.size(); ++f) {
        std::memmove(slot.sample(f, valid), slot.sample(f, i), slot.field_bytes[f]);
      }
      slot.indices[valid] = slot.indices[i];
    }
    ++valid;
  }
  return valid;
}

}  // namespace

class SampleSource::Pool : public ThreadPool {
  using ThreadPool::ThreadPool;
};

SampleSource::SampleSource(int workers) : workers_(std::max(1, workers)) {}
SampleSource::~SampleSource() = default;

Result<uint32_t> SampleSource::FillBatch(const SlotView& slot, const ReadAhead& /*next*/) {
  if (!pool_) pool_ = std::make_unique<Pool>(workers_);
  written_.assign(slot.count(), 0);
  BATCHCAST_RETURN_IF_ERROR(
      pool_->TryParallelFor(static_cast<int64_t>(slot.count()), [&](int worker, int64_t i) {
        uint8_t* out[16];
        const size_t nf = std::min<size_t>(slot.field_data.size(), 16);
        for (size_t f = 0; f < nf; ++f) out[f] = slot.sample(f, static_cast<size_t>(i));
        BATCHCAST_ASSIGN_OR_RETURN(
            const SampleFill fill,
            FillSample(worker, slot.epoch, slot.indices[static_cast<size_t>(i)],
                       std::span<uint8_t* const>(out, nf)));
        written_[static_cast<size_t>(i)] = fill == SampleFill::kWritten ? 1 : 0;
        return Status::Ok();
      }));
  return CompactSlot(slot, written_);
}

}  // namespace batchcast
