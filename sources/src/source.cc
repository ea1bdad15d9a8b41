#include "batchcast/sources/source.h"

#include <algorithm>

#include "thread_pool.h"

namespace batchcast {

class SampleSource::Pool : public ThreadPool {
  using ThreadPool::ThreadPool;
};

SampleSource::SampleSource(int workers) : workers_(std::max(1, workers)) {}
SampleSource::~SampleSource() = default;

Status SampleSource::FillBatch(const SlotView& slot, const ReadAhead& /*next*/) {
  if (!pool_) pool_ = std::make_unique<Pool>(workers_);
  return pool_->TryParallelFor(static_cast<int64_t>(slot.count()), [&](int worker, int64_t i) {
    uint8_t* out[16];
    const size_t nf = std::min<size_t>(slot.field_data.size(), 16);
    for (size_t f = 0; f < nf; ++f) out[f] = slot.sample(f, static_cast<size_t>(i));
    return FillSample(worker, slot.epoch, slot.indices[static_cast<size_t>(i)],
                      std::span<uint8_t* const>(out, nf));
  });
}

}  // namespace batchcast
