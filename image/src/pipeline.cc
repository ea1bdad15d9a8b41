#include "batchcast/image/pipeline.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "batchcast/core/check.h"
#include "batchcast/image/crop_planner.h"
#include "batchcast/image/image_format.h"
#include "sample_writer.h"

namespace batchcast::image {
namespace {

void LimitOpenCvThreads() {
  static std::once_flag once;
  std::call_once(once, [] { cv::setNumThreads(1); });
}

}  // namespace

struct CpuImagePipeline::Scratch {
  explicit Scratch(const TransformOptions& options) : writer(options) {}
  SampleWriter writer;
  cv::Mat resized;
};

CpuImagePipeline::CpuImagePipeline(TransformOptions options, PipelineTuning tuning)
    : options_(options), tuning_(tuning) {
  const Status valid = ValidateTransformOptions(options_);
  BATCHCAST_CHECK(valid.ok()) << valid.ToString();
  LimitOpenCvThreads();
  scratch_ = std::make_unique<Scratch>(options_);
}

CpuImagePipeline::~CpuImagePipeline() = default;
CpuImagePipeline::CpuImagePipeline(CpuImagePipeline&&) noexcept = default;
CpuImagePipeline& CpuImagePipeline::operator=(CpuImagePipeline&&) noexcept = default;

Status CpuImagePipeline::Process(std::span<const uint8_t> bytes, uint32_t epoch, int64_t index,
                                 void* out, CropParams* crop_used) {
  return Run(bytes, nullptr, epoch, index, out, crop_used);
}

Status CpuImagePipeline::ProcessWithCrop(std::span<const uint8_t> bytes, const CropParams& crop,
                                         void* out) {
  return Run(bytes, &crop, 0, 0, out, nullptr);
}

Status CpuImagePipeline::Run(std::span<const uint8_t> bytes, const CropParams* fixed_crop,
                             uint32_t epoch, int64_t index, void* out, CropParams* crop_used) {
  BATCHCAST_CHECK(out != nullptr);
  // Note [Image formats]: JPEG by its bytes; any other format is decoded whole.
  // Unknown bytes go to the JPEG decoder too, which says what they are.
  const ImageFormat format = SniffImageFormat(bytes);
  const bool jpeg = format == ImageFormat::kJpeg || format == ImageFormat::kUnknown;
  const uint64_t max_pixels = EffectiveMaxPixels(options_);
  int width = 0, height = 0;
  if (jpeg) {
    BATCHCAST_ASSIGN_OR_RETURN(const JpegInfo info, decoder_.ReadHeader(bytes, max_pixels));
    width = info.width;
    height = info.height;
  } else {
    BATCHCAST_ASSIGN_OR_RETURN(const ImageHeader hdr, ReadImageHeader(bytes, max_pixels));
    width = hdr.width;
    height = hdr.height;
  }
  const bool dct_scaling = jpeg && tuning_.allow_dct_scaling;
  const int size = options_.size;
  CropPlan planned;
  if (fixed_crop != nullptr) {
    const CropParams& c = *fixed_crop;
    if (c.w < 1 || c.h < 1 || c.x < 0 || c.y < 0 || c.x + c.w > width || c.y + c.h > height) {
      return InvalidArgumentError("crop " + std::to_string(c.w) + "x" + std::to_string(c.h) + "+" +
                                  std::to_string(c.x) + "+" + std::to_string(c.y) +
                                  " is not inside the " + std::to_string(width) + "x" +
                                  std::to_string(height) + " image");
    }
    planned.crop = c;
    planned.decode = PlanDecode(width, height, c, size, dct_scaling);
  } else {
    planned = PlanCrop(options_, epoch, index, width, height, dct_scaling);
  }
  const CropParams& crop = planned.crop;
  const DecodePlan& plan = planned.decode;
  if (crop_used != nullptr) *crop_used = crop;
  DecodedImage image;
  const uint8_t* base = nullptr;
  if (!jpeg) {
    // The whole image, then its crop (plan.rect, at scale 1).
    BATCHCAST_ASSIGN_OR_RETURN(image, other_.Decode(bytes, max_pixels, /*gray_as_rgb=*/false));
    base =
        image.data + image.stride * plan.rect.y + static_cast<size_t>(plan.rect.x) * image.channels;
  } else if (tuning_.allow_cropped_decode) {
    BATCHCAST_ASSIGN_OR_RETURN(image, decoder_.Decode(plan.scale_denom, plan.rect, false));
    base = image.data;
  } else {
    const PixelRect whole{0, 0, ScaledDimension(width, plan.scale_denom),
                          ScaledDimension(height, plan.scale_denom)};
    BATCHCAST_ASSIGN_OR_RETURN(image, decoder_.Decode(plan.scale_denom, whole, false));
    base =
        image.data + image.stride * plan.rect.y + static_cast<size_t>(plan.rect.x) * image.channels;
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
      scratch_->writer.Write(src.data, src.step, channels, crop.flip, out);
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
  scratch_->writer.Write(resized.data, resized.step, channels, crop.flip, out);
  return Status::Ok();
}

}  // namespace batchcast::image
