// DeviceBuffer and PinnedBuffer of batchcast/cuda/runtime.h (CUDA builds).
#include <cuda_runtime_api.h>

#include <string>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda/runtime.h"
#include "ipc_exports.h"

namespace batchcast::cuda {

// ---- DeviceBuffer ----

void internal::DeviceBufferTraits::Destroy(const Handle& h) noexcept {
  if (h.exported) internal::ExportedMemory().Remove(h.data);
  DeviceGuard g(h.device);
  (void)cudaFree(h.data);
}

Result<DeviceBuffer> DeviceBuffer::Create(int device, size_t bytes) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  void* p = nullptr;
  Status s = BATCHCAST_CUDA_CHECK(cudaMalloc(&p, bytes));
  if (!s.ok()) {
    return Status(s.code(), "cannot allocate " + std::to_string(bytes >> 20) +
                                " MiB on cuda:" + std::to_string(device) + ": " + s.message());
  }
  return DeviceBuffer(
      Traits::Handle{.data = static_cast<uint8_t*>(p), .size = bytes, .device = device});
}

Result<IpcHandle> DeviceBuffer::ExportIpc() {
  cudaIpcMemHandle_t h;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaIpcGetMemHandle(&h, handle_->data)));
  handle_.mutable_handle()->exported = true;
  return internal::ExportedMemory().Add(h, {handle_->data, handle_->device});
}

// ---- PinnedBuffer ----

void internal::PinnedBufferTraits::Destroy(const Handle& h) noexcept { (void)cudaFreeHost(h.data); }

Result<PinnedBuffer> PinnedBuffer::Create(size_t bytes) {
  void* p = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaMallocHost(&p, bytes)));
  return PinnedBuffer(Traits::Handle{static_cast<uint8_t*>(p), bytes});
}

}  // namespace batchcast::cuda
