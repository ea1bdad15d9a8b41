#include "cpu_file_cache.h"

#include "cuda_batch_buffers.h"

namespace batchcast {

CpuFileCache::CpuFileCache(const ImageDataset& dataset, size_t budget_bytes)
    : offset_(dataset.size(), -1), filled_(dataset.size(), 0) {
  for (size_t i = 0; i < dataset.size(); ++i) {
    const ImageDataset::File& f = dataset.file(static_cast<int64_t>(i));
    if (f.flag) continue;
    const size_t need = AlignUp(size_t(f.info.width) * f.info.height * 3);
    if (bytes_ + need > budget_bytes) continue;
    offset_[i] = static_cast<int64_t>(bytes_);
    bytes_ += need;
    ++places_;
  }
}

Status CpuFileCache::Allocate(int device) {
  if (bytes_ > 0) {
    BATCHCAST_ASSIGN_OR_RETURN(buffer_, cuda::DeviceBuffer::Create(device, bytes_));
  }
  return Status::Ok();
}

Status CpuFileCache::Fill(int64_t index, const uint8_t* host, size_t bytes, CudaStreamRef stream) {
  BATCHCAST_RETURN_IF_ERROR(
      cuda::CopyAsync(buffer_.data() + offset_[static_cast<size_t>(index)], host, bytes, stream));
  filled_[static_cast<size_t>(index)] = 1;
  return Status::Ok();
}

}  // namespace batchcast
