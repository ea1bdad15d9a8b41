// Stream and Event of batchcast/cuda/runtime.h (CUDA builds).
#include <cuda_runtime_api.h>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda/runtime.h"
#include "ipc_exports.h"

namespace batchcast::cuda {

// ---- Stream ----

void internal::StreamTraits::Destroy(const Handle& h) noexcept {
  DeviceGuard g(h.device);
  (void)cudaStreamDestroy(h.stream);
}

Result<Stream> Stream::Create(int device, StreamPriority priority) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  // CUDA's convention: lower numbers are higher priorities; 0 is the default.
  int least = 0, greatest = 0;
  if (priority == StreamPriority::kHigh) {
    BATCHCAST_RETURN_IF_ERROR(
        BATCHCAST_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest)));
  }
  cudaStream_t s = nullptr;
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest)));
  return Stream(Traits::Handle{s, device});
}

Result<int> Stream::Priority() const {
  int priority = 0;
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaStreamGetPriority(handle_->stream, &priority)));
  return priority;
}

Status Stream::Synchronize() const {
  return BATCHCAST_CUDA_CHECK(cudaStreamSynchronize(handle_->stream));
}

// ---- Event ----

void internal::EventTraits::Destroy(const Handle& h) noexcept {
  if (h.exported) internal::ExportedEvents().Remove(h.event);
  if (h.owned) (void)cudaEventDestroy(h.event);
}

Result<Event> Event::Create(int device, bool interprocess, bool blocking_sync) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  unsigned flags = cudaEventDisableTiming;
  if (interprocess) flags |= cudaEventInterprocess;
  if (blocking_sync) flags |= cudaEventBlockingSync;
  cudaEvent_t e = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags)));
  return Event(Traits::Handle{.event = e, .device = device});
}

Result<Event> Event::OpenIpc(const IpcHandle& handle, int device) {
  // An event of this very process (Note [CUDA IPC lifetimes]): a reference.
  if (auto local = internal::ExportedEvents().Find(handle)) {
    return Event(Traits::Handle{.event = static_cast<cudaEvent_t>(local->pointer),
                                .device = local->device,
                                .owned = false});
  }
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  cudaEvent_t e = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(
      cudaIpcOpenEventHandle(&e, internal::RawHandle<cudaIpcEventHandle_t>(handle))));
  return Event(Traits::Handle{.event = e, .device = device});
}

Result<IpcHandle> Event::ExportIpc() {
  cudaIpcEventHandle_t h;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaIpcGetEventHandle(&h, handle_->event)));
  handle_.mutable_handle()->exported = true;
  return internal::ExportedEvents().Add(h, {handle_->event, handle_->device});
}

Status Event::Record(CudaStreamRef stream) const {
  if (stream.is_legacy_default()) {
    // The legacy default stream is the current device's: make it the event's.
    DeviceGuard g(handle_->device);
    BATCHCAST_RETURN_IF_ERROR(g.status());
    return BATCHCAST_CUDA_CHECK(cudaEventRecord(handle_->event, nullptr));
  }
  return BATCHCAST_CUDA_CHECK(
      cudaEventRecord(handle_->event, static_cast<cudaStream_t>(stream.handle())));
}

Status Event::BlockStream(CudaStreamRef stream) const {
  if (stream.is_legacy_default()) {
    DeviceGuard g(handle_->device);
    BATCHCAST_RETURN_IF_ERROR(g.status());
    return BATCHCAST_CUDA_CHECK(cudaStreamWaitEvent(nullptr, handle_->event, 0));
  }
  return BATCHCAST_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle()), handle_->event, 0));
}

Result<bool> Event::Query() const {
  const cudaError_t e = cudaEventQuery(handle_->event);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  return BATCHCAST_CUDA_CHECK(e);
}

Status Event::Synchronize() const {
  return BATCHCAST_CUDA_CHECK(cudaEventSynchronize(handle_->event));
}

}  // namespace batchcast::cuda
