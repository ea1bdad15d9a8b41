// Small utility kernels behind opaque launchers (no CUDA headers): used by the
// GPU tests and benchmarks to read device batches on a consumer's stream.
//
// Thread-safety: launches are asynchronous on `stream` (a cudaStream_t, or
// nullptr for the current device's legacy default stream).
#pragma once

#include <cstddef>
#include <cstdint>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/status.h"

namespace batchcast::cuda {

// Writes to *device_out (device memory) a position-dependent checksum of the
// `bytes` bytes at `data` (device memory): sum over i of data[i] * (i % 65521 + 1)
// (mod 2^64). Asynchronous: read *device_out after the stream's work completes.
Status ChecksumAsync(const void* data, size_t bytes, uint64_t* device_out, CudaStreamRef stream);

// The same checksum computed on the host, for comparisons.
uint64_t HostChecksum(const void* data, size_t bytes);

// Keeps one thread block busy for `microseconds` (reads the GPU's global timer):
// stretches the GPU work queued on `stream` in tests.
Status SpinAsync(uint64_t microseconds, CudaStreamRef stream);

}  // namespace batchcast::cuda
