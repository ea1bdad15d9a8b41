// SampleWriter: the CPU pipeline's last pass. From the resized 8-bit image it
// writes one output sample: horizontal flip, normalization, dtype conversion
// and layout (NCHW or NHWC), all in one pass over the image.
//
// The values: output element (channel c, source byte v) is
//   float32   n = (float(v) / 255.0f - mean[c]) / std[c]   (IEEE float32 ops,
//             as torchvision's ToTensor + Normalize compute it)
//   float16   n rounded to nearest even (FloatToHalf, half.h)
//   bfloat16  n rounded to nearest even (FloatToBFloat16)
//   uint8     v (no normalization)
// Gray sources (one channel) are replicated to the three output channels.
//
// One pass over the rows of the source: every output element is its
// channel's table entry (3 x 256 elements of the dtype, computed once), so
// for a given resized byte the output is bit-identical to torch's.
// (An AVX2 version of this pass measured no faster in the pipeline: with
// float32 output the pass is bound by writing the 602 KB per 224 x 224
// sample to memory, not by computing it.)
//
// Thread-safety: Write is const and may run concurrently on distinct outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "batchcast/core/dtype.h"
#include "batchcast/image/transform.h"

namespace batchcast::image {

class SampleWriter {
 public:
  // REQUIRES: ValidateTransformOptions(options).ok().
  explicit SampleWriter(const TransformOptions& options);

  // Writes OutputBytes(options) bytes to `out` from the size x size image at
  // `src` (rows `stride` bytes apart, `channels` interleaved bytes per pixel),
  // mirrored left-right when `flip`.
  // REQUIRES: channels is 1 or 3; out holds OutputBytes(options) bytes.
  void Write(const uint8_t* src, size_t stride, int channels, bool flip, void* out) const;

 private:
  int size_;
  DType dtype_;
  bool nchw_;
  // Per-channel tables: byte v of channel c -> output element (3 x 256
  // elements of the dtype).
  std::vector<uint8_t> lut_;
};

}  // namespace batchcast::image
