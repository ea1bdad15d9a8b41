// Utility kernels of batchcast/cuda/kernels.h.
#include <cuda_runtime.h>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda/kernels.h"

namespace batchcast::cuda {
namespace {

__global__ void ChecksumKernel(const uint8_t* data, size_t bytes, unsigned long long* out) {
  unsigned long long sum = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += stride) {
    sum += static_cast<unsigned long long>(data[i]) * (i % 65521 + 1);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, sum);
}

// Stops after `nanoseconds` of the global timer, or after the cycles that
// many nanoseconds take at 2 GHz, whichever comes first (the global timer of
// some virtual machines advances coarsely, or not at all).
__global__ void SpinKernel(unsigned long long nanoseconds) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  const long long c0 = clock64();
  const long long max_cycles = static_cast<long long>(nanoseconds) * 2;
  unsigned long long now = start;
  while (now - start < nanoseconds && clock64() - c0 < max_cycles) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
}

}  // namespace

Status ChecksumAsync(const void* data, size_t bytes, uint64_t* device_out, CudaStreamRef stream) {
  auto s = static_cast<cudaStream_t>(stream.handle());
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaMemsetAsync(device_out, 0, sizeof(uint64_t), s)));
  if (bytes == 0) return Status::Ok();
  const int threads = 256;
  const size_t want = (bytes + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 1024 ? want : 1024);
  ChecksumKernel<<<blocks, threads, 0, s>>>(static_cast<const uint8_t*>(data), bytes,
                                            reinterpret_cast<unsigned long long*>(device_out));
  return BATCHCAST_CUDA_CHECK(cudaGetLastError());
}

uint64_t HostChecksum(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes; ++i) sum += static_cast<uint64_t>(p[i]) * (i % 65521 + 1);
  return sum;
}

Status SpinAsync(uint64_t microseconds, CudaStreamRef stream) {
  SpinKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream.handle())>>>(
      static_cast<unsigned long long>(microseconds) * 1000ull);
  return BATCHCAST_CUDA_CHECK(cudaGetLastError());
}

}  // namespace batchcast::cuda
