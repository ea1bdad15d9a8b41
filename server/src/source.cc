#include "batchcast/server/source.h"

#include <atomic>
#include <mutex>

#include "batchcast/server/thread_pool.h"

namespace batchcast {

Status SampleSource::FillBatch(ThreadPool& pool, BatchTarget& target) {
  std::mutex mu;
  Status first_error;
  std::atomic<bool> failed{false};
  pool.ParallelFor(static_cast<int64_t>(target.indices.size()), [&](int worker, int64_t i) {
    if (failed.load(std::memory_order_relaxed)) return;
    uint8_t* out[16];
    const size_t nf = target.field_data.size();
    for (size_t f = 0; f < nf; ++f) out[f] = target.field_data[f] + i * target.field_bytes[f];
    Status s = FillSample(worker, target.epoch, target.indices[i], std::span<uint8_t* const>(out, nf));
    if (!s.ok()) {
      std::lock_guard lock(mu);
      if (first_error.ok()) first_error = std::move(s);
      failed = true;
    }
  });
  return first_error;
}

}  // namespace batchcast
