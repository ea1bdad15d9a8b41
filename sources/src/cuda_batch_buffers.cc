#include "cuda_batch_buffers.h"

namespace batchcast {

Status Grow(cuda::DeviceBuffer& b, int device, size_t bytes) {
  if (b.size() >= bytes) return Status::Ok();
  b = cuda::DeviceBuffer();
  BATCHCAST_ASSIGN_OR_RETURN(b, cuda::DeviceBuffer::Create(device, bytes + bytes / 4));
  return Status::Ok();
}

Status Grow(cuda::PinnedBuffer& b, size_t bytes) {
  if (b.size() >= bytes) return Status::Ok();
  b = cuda::PinnedBuffer();
  BATCHCAST_ASSIGN_OR_RETURN(b, cuda::PinnedBuffer::Create(bytes + bytes / 4));
  return Status::Ok();
}

}  // namespace batchcast
