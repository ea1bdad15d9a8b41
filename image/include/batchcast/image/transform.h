// Image transform options and the geometry of the train/eval transforms: the
// crop box (in source pixels) and flip of each sample, and how a crop is
// decoded (DCT scale and decoded rectangle).
//
// Train = torchvision RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip
//         + ToTensor + Normalize(mean, std).
// Eval  = torchvision Resize(round(size / 0.875)) + CenterCrop(size) + ToTensor
//         + Normalize(mean, std)   (Resize(256) + CenterCrop(224) for size 224).
//
// The crop parameters are a pure function of (options, epoch, index, image
// size), computed on the host, so the CPU pipeline and the GPU kernel make the
// same crops and tests can rebuild the output from a reference.
//
// Thread-safety: everything here is a pure function.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "batchcast/core/dtype.h"
#include "batchcast/core/status.h"
#include "batchcast/image/jpeg.h"

namespace batchcast::image {

struct TransformOptions {
  enum class Kind { kTrain, kEval };
  Kind kind = Kind::kTrain;
  int size = 224;                 // the output is size x size, 3 channels
  DType dtype = DType::kFloat32;  // float32 | float16 | bfloat16 | uint8 (uint8 skips normalize)
  bool nchw = true;               // layout [3, size, size] (true) or [size, size, 3]
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};  // in [0, 1] units, like torchvision
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  // RandomResizedCrop: fraction of the image area and aspect-ratio (w / h) range.
  float scale_min = 0.08f;
  float scale_max = 1.0f;
  float ratio_min = 3.0f / 4.0f;
  float ratio_max = 4.0f / 3.0f;
  uint64_t seed = 0;
  // Bound on width * height of one input image; 0 means kDefaultMaxPixels
  // (178,956,970, Pillow's decompression-bomb error threshold).
  uint64_t max_pixels = 0;
};

inline constexpr int kMaxTransformSize = 8192;

// InvalidArgument (naming the option) unless: 1 <= size <= kMaxTransformSize;
// dtype is float32, float16, bfloat16 or uint8; mean finite and std finite and
// > 0; 0 < scale_min <= scale_max; 0 < ratio_min <= ratio_max (all finite).
Status ValidateTransformOptions(const TransformOptions& options);

// Bytes of one output image: 3 * size * size * DTypeSize(dtype).
size_t OutputBytes(const TransformOptions& options);

// max_pixels with 0 replaced by kDefaultMaxPixels.
uint64_t EffectiveMaxPixels(const TransformOptions& options);

// A crop box [x, x + w) x [y, y + h) in source pixel coordinates (always
// non-empty and inside the image) and whether to flip horizontally after it.
struct CropParams {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
  bool flip = false;
  friend bool operator==(const CropParams&, const CropParams&) = default;
};

// Train crop: torchvision RandomResizedCrop.get_params + RandomHorizontalFlip
// (p = 0.5), with batchcast's portable generator instead of torch's:
//
//   state = MixSeed(seed, epoch, uint64(index));   U() = (SplitMix64(state) >> 11) * 2^-53
//   RandInt(n) = SplitMix64(state) % n, rejecting draws >= 2^64 - 2^64 % n
//   area = width * height
//   repeat 10 times:
//     target_area = area * (scale_min + (scale_max - scale_min) * U())
//     aspect = exp(log(ratio_min) + (log(ratio_max) - log(ratio_min)) * U())
//     w = round(sqrt(target_area * aspect)); h = round(sqrt(target_area / aspect))
//     if 0 < w <= width and 0 < h <= height:
//       y = RandInt(height - h + 1); x = RandInt(width - w + 1); goto flip
//   fallback (center crop, aspect clamped to the ratio range):
//     in_ratio = width / height
//     in_ratio < ratio_min: w = width,  h = round(w / ratio_min)
//     in_ratio > ratio_max: h = height, w = round(h * ratio_max)
//     otherwise:            w = width,  h = height
//     y = (height - h) / 2; x = (width - w) / 2     (integer division)
//   flip: flip = (SplitMix64(state) >> 63) == 1
//
// All arithmetic in double; round() is round-half-to-even (Python's round).
// REQUIRES: ValidateTransformOptions(options).ok(); width, height >= 1.
CropParams TrainCrop(const TransformOptions& options, uint32_t epoch, int64_t index, int width,
                     int height);

// Eval crop: the source box that torchvision's Resize(R) + CenterCrop(size)
// shows, with R = round(size / 0.875) (256 for 224), never below size:
//
//   short side -> R, long side -> floor(R * long / short)   (new_w x new_h)
//   top = round((new_h - size) / 2), left = round((new_w - size) / 2)  (half-to-even)
//   exact box: x0 = left * width / new_w, x1 = (left + size) * width / new_w,
//              y0 = top * height / new_h, y1 = (top + size) * height / new_h
//   x = round(x0), w = round(x1) - x  (likewise y, h); clamped inside the image, w, h >= 1
//
// So each edge is within 0.5 source pixels of torchvision's fractional box.
// flip is false. REQUIRES: ValidateTransformOptions(options).ok(); width, height >= 1.
CropParams EvalCrop(const TransformOptions& options, int width, int height);

// How to decode a crop: libjpeg DCT scale 1/scale_denom, the rectangle to
// decode (in scaled-image coordinates) and where the crop lies in it.
struct DecodePlan {
  int scale_denom = 1;
  PixelRect rect;
  // The crop box [box_x, box_x + box_w) x [box_y, box_y + box_h) relative to
  // rect's origin, in scaled pixels: the crop divided by scale_denom, so
  // fractional when the crop's edges are not multiples of it.
  double box_x = 0;
  double box_y = 0;
  double box_w = 0;
  double box_h = 0;
  // True when the box edges are whole pixels (always when scale_denom == 1).
  bool box_is_integral() const;
};

// scale_denom is the largest of 1, 2, 4, 8 with crop.w >= out_size * d and
// crop.h >= out_size * d, so the decoded crop is never smaller than the output
// (1 when !allow_dct_scaling). rect is the smallest whole-pixel rectangle that
// holds the scaled crop box: [floor(x / d), ceil((x + w) / d)) and likewise in y
// (exactly the crop when d == 1).
// REQUIRES: the crop is non-empty and inside the width x height image; out_size >= 1.
DecodePlan PlanDecode(int width, int height, const CropParams& crop, int out_size,
                      bool allow_dct_scaling = true);

}  // namespace batchcast::image
