#include "batchcast/image/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "batchcast/core/check.h"
#include "batchcast/image/crop_planner.h"
#include "batchcast/image/half.h"

namespace batchcast::image {
namespace {

// Writes the 3 output channels of a size x size image from `src` (kSrcC = 1:
// gray, replicated; 3: RGB), mapping each byte through the channel's table.
template <typename T, int kSrcC>
void EmitNchw(const uint8_t* src, size_t stride, int size, bool flip, const T* lut, T* out) {
  const size_t plane = static_cast<size_t>(size) * size;
  for (int c = 0; c < 3; ++c) {
    const T* table = lut + 256 * c;
    const int sc = kSrcC == 1 ? 0 : c;
    T* dst = out + plane * c;
    for (int y = 0; y < size; ++y, dst += size) {
      const uint8_t* row = src + stride * y + sc;
      if (!flip) {
        for (int x = 0; x < size; ++x) dst[x] = table[row[x * kSrcC]];
      } else {
        const uint8_t* last = row + (size - 1) * kSrcC;
        for (int x = 0; x < size; ++x) dst[x] = table[last[-x * kSrcC]];
      }
    }
  }
}

template <typename T, int kSrcC>
void EmitNhwc(const uint8_t* src, size_t stride, int size, bool flip, const T* lut, T* out) {
  const T* t0 = lut;
  const T* t1 = lut + 256;
  const T* t2 = lut + 512;
  constexpr int k1 = kSrcC == 1 ? 0 : 1;
  constexpr int k2 = kSrcC == 1 ? 0 : 2;
  T* dst = out;
  for (int y = 0; y < size; ++y) {
    const uint8_t* row = src + stride * y;
    if (!flip) {
      for (int x = 0; x < size; ++x, dst += 3) {
        const uint8_t* p = row + x * kSrcC;
        dst[0] = t0[p[0]];
        dst[1] = t1[p[k1]];
        dst[2] = t2[p[k2]];
      }
    } else {
      for (int x = size - 1; x >= 0; --x, dst += 3) {
        const uint8_t* p = row + x * kSrcC;
        dst[0] = t0[p[0]];
        dst[1] = t1[p[k1]];
        dst[2] = t2[p[k2]];
      }
    }
  }
}

template <typename T>
void EmitTyped(const uint8_t* src, size_t stride, int src_channels, int size, bool nchw, bool flip,
               const uint8_t* lut_bytes, void* out) {
  const T* lut = reinterpret_cast<const T*>(lut_bytes);
  T* dst = static_cast<T*>(out);
  if (nchw) {
    if (src_channels == 1) {
      EmitNchw<T, 1>(src, stride, size, flip, lut, dst);
    } else {
      EmitNchw<T, 3>(src, stride, size, flip, lut, dst);
    }
  } else {
    if (src_channels == 1) {
      EmitNhwc<T, 1>(src, stride, size, flip, lut, dst);
    } else {
      EmitNhwc<T, 3>(src, stride, size, flip, lut, dst);
    }
  }
}

void LimitOpenCvThreads() {
  static std::once_flag once;
  std::call_once(once, [] { cv::setNumThreads(1); });
}

}  // namespace

struct CpuImagePipeline::Scratch {
  cv::Mat resized;
};

CpuImagePipeline::CpuImagePipeline(TransformOptions options, PipelineTuning tuning)
    : options_(options), tuning_(tuning), scratch_(std::make_unique<Scratch>()) {
  const Status valid = ValidateTransformOptions(options_);
  BATCHCAST_CHECK(valid.ok()) << valid.ToString();
  LimitOpenCvThreads();

  // Tables: byte v of channel c -> output element. Normalization is computed in
  // float32 as torchvision does (ToTensor: v / 255; Normalize: (t - mean) / std),
  // then rounded to the 16-bit formats, so for a given resized byte the output
  // is bit-identical to torch's.
  const size_t elem = DTypeSize(options_.dtype);
  lut_.assign(3 * 256 * elem, 0);
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      const size_t i = static_cast<size_t>(c) * 256 + v;
      const float t = static_cast<float>(v) / 255.0f;
      const float normalized = (t - options_.mean[c]) / options_.std[c];
      switch (options_.dtype) {
        case DType::kFloat32:
          std::memcpy(lut_.data() + i * 4, &normalized, 4);
          break;
        case DType::kFloat16: {
          const uint16_t h = FloatToHalf(normalized);
          std::memcpy(lut_.data() + i * 2, &h, 2);
          break;
        }
        case DType::kBFloat16: {
          const uint16_t b = FloatToBFloat16(normalized);
          std::memcpy(lut_.data() + i * 2, &b, 2);
          break;
        }
        case DType::kUInt8:
          lut_[i] = static_cast<uint8_t>(v);
          break;
        default:
          BATCHCAST_CHECK(false) << "unsupported dtype";
      }
    }
  }
}

CpuImagePipeline::~CpuImagePipeline() = default;
CpuImagePipeline::CpuImagePipeline(CpuImagePipeline&&) noexcept = default;
CpuImagePipeline& CpuImagePipeline::operator=(CpuImagePipeline&&) noexcept = default;

Status CpuImagePipeline::Process(std::span<const uint8_t> jpeg, uint32_t epoch, int64_t index,
                                 void* out, CropParams* crop_used) {
  return Run(jpeg, nullptr, epoch, index, out, crop_used);
}

Status CpuImagePipeline::ProcessWithCrop(std::span<const uint8_t> jpeg, const CropParams& crop,
                                         void* out) {
  return Run(jpeg, &crop, 0, 0, out, nullptr);
}

Status CpuImagePipeline::Run(std::span<const uint8_t> jpeg, const CropParams* fixed_crop,
                             uint32_t epoch, int64_t index, void* out, CropParams* crop_used) {
  BATCHCAST_CHECK(out != nullptr);
  BATCHCAST_ASSIGN_OR_RETURN(JpegInfo info,
                             decoder_.ReadHeader(jpeg, EffectiveMaxPixels(options_)));
  const int size = options_.size;
  CropPlan planned;
  if (fixed_crop != nullptr) {
    const CropParams& c = *fixed_crop;
    if (c.w < 1 || c.h < 1 || c.x < 0 || c.y < 0 || c.x + c.w > info.width ||
        c.y + c.h > info.height) {
      return InvalidArgumentError("crop " + std::to_string(c.w) + "x" + std::to_string(c.h) + "+" +
                                  std::to_string(c.x) + "+" + std::to_string(c.y) +
                                  " is not inside the " + std::to_string(info.width) + "x" +
                                  std::to_string(info.height) + " image");
    }
    planned.crop = c;
    planned.decode = PlanDecode(info.width, info.height, c, size, tuning_.allow_dct_scaling);
  } else {
    planned = PlanCrop(options_, epoch, index, info.width, info.height, tuning_.allow_dct_scaling);
  }
  const CropParams& crop = planned.crop;
  const DecodePlan& plan = planned.decode;
  if (crop_used != nullptr) *crop_used = crop;
  PixelRect decode_rect = plan.rect;
  if (!tuning_.allow_cropped_decode) {
    decode_rect = PixelRect{0, 0, ScaledDimension(info.width, plan.scale_denom),
                            ScaledDimension(info.height, plan.scale_denom)};
  }
  BATCHCAST_ASSIGN_OR_RETURN(DecodedImage image,
                             decoder_.Decode(plan.scale_denom, decode_rect, false));
  const uint8_t* base = image.data;
  if (!tuning_.allow_cropped_decode) {
    base += image.stride * plan.rect.y + static_cast<size_t>(plan.rect.x) * image.channels;
  }
  const int channels = image.channels;
  const cv::Mat decoded(plan.rect.h, plan.rect.w, CV_8UC(channels), const_cast<uint8_t*>(base),
                        image.stride);

  // Filter: bilinear, except INTER_AREA (a box filter) for reductions of more
  // than 2x, which only happen when DCT scaling is capped at 1/8 (or off).
  using Interpolation = PipelineTuning::Interpolation;
  const bool area = tuning_.interpolation == Interpolation::kArea ||
                    (tuning_.interpolation == Interpolation::kAuto && plan.box_w >= size &&
                     plan.box_h >= size && (plan.box_w > 2.0 * size || plan.box_h > 2.0 * size));
  cv::Mat& resized = scratch_->resized;
  resized.create(size, size, CV_8UC(channels));  // reuses the buffer after the first image
  if (area || plan.box_is_integral()) {
    // A whole-pixel box: exact when integral, else (INTER_AREA only) the
    // fractional box with its edges rounded half up.
    const auto round_edge = [](double v, int hi) {
      return std::clamp(static_cast<int>(std::floor(v + 0.5)), 0, hi);
    };
    const int x0 = round_edge(plan.box_x, plan.rect.w - 1);
    const int y0 = round_edge(plan.box_y, plan.rect.h - 1);
    const int x1 = std::max(x0 + 1, round_edge(plan.box_x + plan.box_w, plan.rect.w));
    const int y1 = std::max(y0 + 1, round_edge(plan.box_y + plan.box_h, plan.rect.h));
    const cv::Mat src = decoded(cv::Rect(x0, y0, x1 - x0, y1 - y0));
    if (src.cols == size && src.rows == size) {
      Emit(src.data, src.step, channels, crop.flip, out);
      return Status::Ok();
    }
    cv::resize(src, resized, cv::Size(size, size), 0, 0, area ? cv::INTER_AREA : cv::INTER_LINEAR);
  } else {
    // DCT-scaled crop whose edges fall between scaled pixels: bilinear
    // sampling of the exact box (the sampling positions of cv::resize
    // INTER_LINEAR: pixel centres, dst -> src = box_x + (x + 0.5) * sx - 0.5).
    const double sx = plan.box_w / size;
    const double sy = plan.box_h / size;
    const cv::Matx23d dst_to_src(sx, 0.0, plan.box_x + 0.5 * sx - 0.5,  //
                                 0.0, sy, plan.box_y + 0.5 * sy - 0.5);
    cv::warpAffine(decoded, resized, dst_to_src, cv::Size(size, size),
                   cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_REPLICATE);
  }
  Emit(resized.data, resized.step, channels, crop.flip, out);
  return Status::Ok();
}

void CpuImagePipeline::Emit(const uint8_t* src, size_t src_stride, int src_channels, bool flip,
                            void* out) const {
  const int size = options_.size;
  const bool nchw = options_.nchw;
  switch (DTypeSize(options_.dtype)) {
    case 4:
      EmitTyped<float>(src, src_stride, src_channels, size, nchw, flip, lut_.data(), out);
      break;
    case 2:
      EmitTyped<uint16_t>(src, src_stride, src_channels, size, nchw, flip, lut_.data(), out);
      break;
    case 1:
      EmitTyped<uint8_t>(src, src_stride, src_channels, size, nchw, flip, lut_.data(), out);
      break;
    default:
      BATCHCAST_CHECK(false) << "unsupported dtype size";
  }
}

}  // namespace batchcast::image
