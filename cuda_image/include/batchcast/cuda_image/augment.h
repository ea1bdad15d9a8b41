// The fused augmentation kernel of the GPU path (docs/semantics.md, "GPU path"): from
// decoded RGB images in device memory straight into ring slots, in one pass:
// random-resized-crop + bilinear resize + horizontal flip + normalize + dtype
// + layout. No CUDA headers.
//
// It reproduces the CPU pipeline (batchcast/image/pipeline.h) for the same
// CropParams: the crop is resized the way the CPU path resizes its decoded
// rectangle (OpenCV INTER_LINEAR with half-pixel centres and replicated
// borders, or INTER_AREA beyond a 2x reduction), the resized pixel is rounded
// to 8 bits, and normalization is (v / 255 - mean) / std in float32, rounded to
// nearest even for float16/bfloat16, so that equal resized bytes give
// bit-identical outputs. The CPU path's libjpeg DCT scaling (decoding at 1/d
// size when the crop is at least d times the output) is emulated by averaging
// d x d blocks of the full-size image (`box`). What remains different is the
// JPEG decoder's own rounding (nvJPEG vs libjpeg-turbo IDCT and chroma
// upsampling) and DCT scaling vs box averaging: see tests/gpu for the measured
// difference.
//
// Thread-safety: launches are asynchronous on `stream`.
#pragma once

#include <cstdint>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/dtype.h"
#include "batchcast/core/status.h"

namespace batchcast::cuda {

// One sample of a batch. The source is interleaved 8-bit RGB in device memory.
struct AugmentSample {
  const uint8_t* src = nullptr;
  int64_t pitch = 0;  // bytes between rows of src
  int32_t src_w = 0;  // src size in pixels (full-size image, or a pre-scaled crop)
  int32_t src_h = 0;
  int32_t box = 1;     // 1, 2, 4 or 8: the "scaled image" averages box x box blocks of src
  int32_t rect_x = 0;  // the region to resize, in scaled-image pixels
  int32_t rect_y = 0;
  int32_t rect_w = 0;
  int32_t rect_h = 0;
  int32_t flip = 0;  // 1: mirror horizontally after the resize
  int32_t area = 0;  // 1: area (box) resampling instead of bilinear
  int32_t pad_ = 0;
  void* out = nullptr;  // device: the sample's output (3 * size * size elements)
};

struct AugmentParams {
  int size = 224;
  DType dtype = DType::kFloat32;  // float32 | float16 | bfloat16 | uint8 (no normalize)
  bool nchw = true;
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
};

// Whether the CPU path would use INTER_AREA for a rect_w x rect_h region
// resized to size x size (a reduction by more than 2x in either direction).
inline bool UsesAreaResampling(int rect_w, int rect_h, int size) {
  return rect_w >= size && rect_h >= size && (rect_w > 2 * size || rect_h > 2 * size);
}

// Runs the kernel over `count` samples whose descriptors are in DEVICE memory.
// REQUIRES: params.size >= 1, every rect non-empty and inside the scaled image.
Status AugmentAsync(const AugmentSample* device_samples, int count, const AugmentParams& params,
                    CudaStreamRef stream);

}  // namespace batchcast::cuda
