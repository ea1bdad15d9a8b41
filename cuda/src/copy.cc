// Copies, stream synchronization and the stream-ordered allocator of
// batchcast/cuda/runtime.h (CUDA builds).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda/runtime.h"
#include "core/src/mutex.h"

namespace batchcast::cuda {
namespace {

cudaStream_t Raw(CudaStreamRef stream) { return static_cast<cudaStream_t>(stream.handle()); }

}  // namespace

Status CopyAsync(void* dst, const void* src, size_t bytes, CudaStreamRef stream) {
  if (bytes == 0) return Status::Ok();
  return BATCHCAST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, Raw(stream)));
}

Result<bool> CanAccessPeer(int device, int peer) {
  int can = 0;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer)));
  return can != 0;
}

Status CopyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                     CudaStreamRef stream) {
  if (bytes == 0) return Status::Ok();
  return BATCHCAST_CUDA_CHECK(
      cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, Raw(stream)));
}

Status Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  return BATCHCAST_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

Status MemsetAsync(void* dst, int value, size_t bytes, CudaStreamRef stream) {
  if (bytes == 0) return Status::Ok();
  return BATCHCAST_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, Raw(stream)));
}

Status SynchronizeStream(CudaStreamRef stream) {
  return BATCHCAST_CUDA_CHECK(cudaStreamSynchronize(Raw(stream)));
}

namespace {

// One pool per device, created on first use and kept for the process's life.
Result<cudaMemPool_t> PoolFor(int device) {
  static Mutex mu;
  static auto* const pools BC_PT_GUARDED_BY(mu) = new std::map<int, cudaMemPool_t>();
  MutexLock lock(&mu);
  if (auto it = pools->find(device); it != pools->end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaMemPoolCreate(&pool, &props)));
  uint64_t keep = UINT64_MAX;  // keep freed blocks for reuse
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)));
  (*pools)[device] = pool;
  return pool;
}

}  // namespace

Result<void*> AllocAsync(int device, size_t bytes, CudaStreamRef stream) {
  BATCHCAST_ASSIGN_OR_RETURN(cudaMemPool_t pool, PoolFor(device));
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  void* p = nullptr;
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, Raw(stream))));
  return p;
}

Status FreeAsync(int device, void* ptr, CudaStreamRef stream) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  return BATCHCAST_CUDA_CHECK(cudaFreeAsync(ptr, Raw(stream)));
}

}  // namespace batchcast::cuda
