#include "batchcast/image/transform.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "batchcast/core/check.h"
#include "core/src/sampler.h"

namespace batchcast::image {
namespace {

// Python's round(): to nearest, ties to even (independent of the FP rounding mode).
double RoundHalfEven(double v) {
  const double floor = std::floor(v);
  const double diff = v - floor;
  if (diff > 0.5) return floor + 1.0;
  if (diff < 0.5) return floor;
  return std::fmod(floor, 2.0) == 0.0 ? floor : floor + 1.0;
}

int RoundToInt(double v) { return static_cast<int>(RoundHalfEven(v)); }

// Uniform double in [0, 1) from the top 53 bits of one SplitMix64 draw.
double UniformUnit(uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
}

// Uniform integer in [0, n) by rejection (no modulo bias). REQUIRES: n >= 1.
int64_t RandInt(uint64_t& state, uint64_t n) {
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % n + 1) % n;  // largest multiple of n, minus 1
  uint64_t x;
  do {
    x = SplitMix64(state);
  } while (x > limit);
  return static_cast<int64_t>(x % n);
}

bool IsFinite(float v) { return std::isfinite(v); }

}  // namespace

Status ValidateTransformOptions(const TransformOptions& o) {
  if (o.size < 1 || o.size > kMaxTransformSize) {
    return InvalidArgumentError("size " + std::to_string(o.size) + " must be in [1, " +
                                std::to_string(kMaxTransformSize) + "]");
  }
  if (o.dtype != DType::kFloat32 && o.dtype != DType::kFloat16 && o.dtype != DType::kBFloat16 &&
      o.dtype != DType::kUInt8) {
    return InvalidArgumentError("dtype " + std::string(DTypeName(o.dtype)) +
                                " is not supported for images: use float32, float16, bfloat16 "
                                "or uint8");
  }
  for (int c = 0; c < 3; ++c) {
    if (!IsFinite(o.mean[c])) {
      return InvalidArgumentError("mean[" + std::to_string(c) + "] must be finite");
    }
    if (!IsFinite(o.std[c]) || !(o.std[c] > 0.0f)) {
      return InvalidArgumentError("std[" + std::to_string(c) + "] = " + std::to_string(o.std[c]) +
                                  " must be finite and positive");
    }
  }
  if (!IsFinite(o.scale_min) || !IsFinite(o.scale_max) || !(o.scale_min > 0.0f) ||
      !(o.scale_min <= o.scale_max)) {
    return InvalidArgumentError("crop scale range [" + std::to_string(o.scale_min) + ", " +
                                std::to_string(o.scale_max) +
                                "] must satisfy 0 < scale_min <= scale_max");
  }
  if (!IsFinite(o.ratio_min) || !IsFinite(o.ratio_max) || !(o.ratio_min > 0.0f) ||
      !(o.ratio_min <= o.ratio_max)) {
    return InvalidArgumentError("crop ratio range [" + std::to_string(o.ratio_min) + ", " +
                                std::to_string(o.ratio_max) +
                                "] must satisfy 0 < ratio_min <= ratio_max");
  }
  return Status::Ok();
}

size_t OutputBytes(const TransformOptions& options) {
  const size_t s = static_cast<size_t>(options.size);
  return 3 * s * s * DTypeSize(options.dtype);
}

uint64_t EffectiveMaxPixels(const TransformOptions& options) {
  return options.max_pixels == 0 ? kDefaultMaxPixels : options.max_pixels;
}

CropParams TrainCrop(const TransformOptions& options, uint32_t epoch, int64_t index, int width,
                     int height) {
  BATCHCAST_CHECK(width >= 1 && height >= 1) << "image " << width << "x" << height;
  uint64_t state = MixSeed(options.seed, epoch, static_cast<uint64_t>(index));
  const double area = static_cast<double>(width) * static_cast<double>(height);
  const double scale_min = options.scale_min;
  const double scale_max = options.scale_max;
  const double log_ratio_min = std::log(static_cast<double>(options.ratio_min));
  const double log_ratio_max = std::log(static_cast<double>(options.ratio_max));
  CropParams crop;
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target_area = area * (scale_min + (scale_max - scale_min) * UniformUnit(state));
    const double aspect =
        std::exp(log_ratio_min + (log_ratio_max - log_ratio_min) * UniformUnit(state));
    const double w = RoundHalfEven(std::sqrt(target_area * aspect));
    const double h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      crop.w = static_cast<int>(w);
      crop.h = static_cast<int>(h);
      crop.y = static_cast<int>(RandInt(state, static_cast<uint64_t>(height - crop.h + 1)));
      crop.x = static_cast<int>(RandInt(state, static_cast<uint64_t>(width - crop.w + 1)));
      found = true;
    }
  }
  if (!found) {
    const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
    if (in_ratio < options.ratio_min) {
      crop.w = width;
      crop.h = RoundToInt(crop.w / static_cast<double>(options.ratio_min));
    } else if (in_ratio > options.ratio_max) {
      crop.h = height;
      crop.w = RoundToInt(crop.h * static_cast<double>(options.ratio_max));
    } else {
      crop.w = width;
      crop.h = height;
    }
    // Guard the float corner cases (cannot trigger for sane ratios).
    crop.w = std::clamp(crop.w, 1, width);
    crop.h = std::clamp(crop.h, 1, height);
    crop.y = (height - crop.h) / 2;
    crop.x = (width - crop.w) / 2;
  }
  crop.flip = (SplitMix64(state) >> 63) == 1;
  return crop;
}

CropParams EvalCrop(const TransformOptions& options, int width, int height) {
  BATCHCAST_CHECK(width >= 1 && height >= 1) << "image " << width << "x" << height;
  const int64_t size = options.size;
  // round(size / 0.875) = round(8 * size / 7); never a tie since 7 is odd.
  const int64_t resize = std::max<int64_t>(size, (16 * size + 7) / 14);
  int64_t new_w;
  int64_t new_h;
  if (width <= height) {
    new_w = resize;
    new_h = resize * height / width;
  } else {
    new_h = resize;
    new_w = resize * width / height;
  }
  const double top = RoundHalfEven(static_cast<double>(new_h - size) / 2.0);
  const double left = RoundHalfEven(static_cast<double>(new_w - size) / 2.0);
  const double sx = static_cast<double>(width) / static_cast<double>(new_w);
  const double sy = static_cast<double>(height) / static_cast<double>(new_h);
  int x0 = RoundToInt(left * sx);
  int x1 = RoundToInt((left + static_cast<double>(size)) * sx);
  int y0 = RoundToInt(top * sy);
  int y1 = RoundToInt((top + static_cast<double>(size)) * sy);
  x0 = std::clamp(x0, 0, width - 1);
  y0 = std::clamp(y0, 0, height - 1);
  x1 = std::clamp(x1, x0 + 1, width);
  y1 = std::clamp(y1, y0 + 1, height);
  return CropParams{x0, y0, x1 - x0, y1 - y0, false};
}

DecodePlan PlanDecode(int width, int height, const CropParams& crop, int out_size,
                      bool allow_dct_scaling) {
  BATCHCAST_CHECK(out_size >= 1);
  BATCHCAST_CHECK(crop.w >= 1 && crop.h >= 1 && crop.x >= 0 && crop.y >= 0 &&
                  crop.x + crop.w <= width && crop.y + crop.h <= height)
      << "crop " << crop.x << "," << crop.y << " " << crop.w << "x" << crop.h
      << " outside the image " << width << "x" << height;
  int d = 1;
  if (allow_dct_scaling) {
    for (int candidate : {8, 4, 2}) {
      const int64_t need = static_cast<int64_t>(out_size) * candidate;
      if (crop.w >= need && crop.h >= need) {
        d = candidate;
        break;
      }
    }
  }
  DecodePlan plan;
  plan.scale_denom = d;
  const int x0 = crop.x / d;
  const int y0 = crop.y / d;
  const int x1 = static_cast<int>((static_cast<int64_t>(crop.x) + crop.w + d - 1) / d);
  const int y1 = static_cast<int>((static_cast<int64_t>(crop.y) + crop.h + d - 1) / d);
  plan.rect = PixelRect{x0, y0, x1 - x0, y1 - y0};
  plan.box_x = static_cast<double>(crop.x) / d - x0;
  plan.box_y = static_cast<double>(crop.y) / d - y0;
  plan.box_w = static_cast<double>(crop.w) / d;
  plan.box_h = static_cast<double>(crop.h) / d;
  return plan;
}

bool DecodePlan::box_is_integral() const {
  return box_x == std::floor(box_x) && box_y == std::floor(box_y) && box_w == std::floor(box_w) &&
         box_h == std::floor(box_h);
}

}  // namespace batchcast::image
