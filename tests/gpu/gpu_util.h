// Helpers of the GPU tests: skip without a GPU, copy device batches to host.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "batchcast/client/batch.h"
#include "batchcast/cuda/runtime.h"

namespace batchcast::testing {

// GTEST_SKIP()s the calling test when no CUDA device can be used.
#define BC_REQUIRE_GPU()                                                              \
  do {                                                                                \
    auto _n = ::batchcast::cuda::DeviceCount();                                       \
    if (!_n.ok()) GTEST_SKIP() << "no usable CUDA device: " << _n.status().message(); \
  } while (0)

// The bytes of a field, copied to the host when they are in device memory
// (ordered after the batch on `stream`, which must be its delivery stream).
inline std::vector<uint8_t> HostBytes(const FieldView& f, CudaStreamRef stream = {}) {
  std::vector<uint8_t> out(f.bytes);
  if (f.device.kind == MemoryKind::kCuda) {
    Status s = cuda::CopyAsync(out.data(), f.data, f.bytes, stream);
    if (s.ok()) s = cuda::SynchronizeStream(stream);
    if (!s.ok()) ADD_FAILURE() << s.ToString();
  } else {
    std::copy_n(static_cast<const uint8_t*>(f.data), f.bytes, out.data());
  }
  return out;
}

}  // namespace batchcast::testing
