// Device helpers of the tests and of bc_test_consumer: skip without a usable
// GPU, read a field's bytes wherever they live (device batches are copied to
// the host), check a batch of the synthetic source against its formula.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "batchcast/client/batch.h"
#include "batchcast/cuda/runtime.h"
#include "core/src/synthetic.h"

// GTEST_SKIP()s the calling test (or fixture SetUp) when no CUDA device can be used.
#define BC_REQUIRE_GPU()                                                              \
  do {                                                                                \
    auto _n = ::batchcast::cuda::DeviceCount();                                       \
    if (!_n.ok()) GTEST_SKIP() << "no usable CUDA device: " << _n.status().message(); \
  } while (0)

namespace batchcast::testing {

// Sets *out to the bytes of a field. Device memory is copied on `stream` (the
// batch's delivery stream, so that the copy is ordered after the batch) and
// the stream synchronized; the error of either CUDA call is returned.
inline Status ReadToHost(const FieldView& f, CudaStreamRef stream, std::vector<uint8_t>* out) {
  out->resize(f.bytes);
  if (f.device.kind != MemoryKind::kCuda) {
    std::copy_n(static_cast<const uint8_t*>(f.data), f.bytes, out->data());
    return Status::Ok();
  }
  BATCHCAST_RETURN_IF_ERROR(cuda::CopyAsync(out->data(), f.data, f.bytes, stream));
  return cuda::SynchronizeStream(stream);
}

// The number of samples of `batch` whose `image` bytes differ from the
// synthetic formula (core/synthetic.h) for their index, plus those whose
// `label` differs; the batch size when a field is missing. Device batches are
// copied to the host on `stream` (their delivery stream); an error of the
// copies is returned instead.
inline Result<int64_t> FormulaMismatches(const Batch& batch, CudaStreamRef stream) {
  auto image = batch.field("image");
  auto label = batch.field("label");
  if (!image.ok() || !label.ok()) return static_cast<int64_t>(batch.size());
  std::vector<uint8_t> img, lab;
  BATCHCAST_RETURN_IF_ERROR(ReadToHost(*image, stream, &img));
  BATCHCAST_RETURN_IF_ERROR(ReadToHost(*label, stream, &lab));
  const size_t per = image->bytes / batch.size();
  int64_t bad = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t index = batch.indices()[i];
    if (synthetic::FirstMismatch(index, {img.data() + i * per, per}) >= 0) ++bad;
    int64_t l;
    std::memcpy(&l, lab.data() + sizeof(int64_t) * i, sizeof(int64_t));
    if (l != synthetic::Label(index)) ++bad;
  }
  return bad;
}

}  // namespace batchcast::testing
