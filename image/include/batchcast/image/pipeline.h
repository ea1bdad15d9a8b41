// CpuImagePipeline: image bytes -> one transformed sample (the CPU hot path).
//
// Other formats than JPEG (PNG, WebP, BMP, TIFF, PNM; told from the bytes:
// Note [Image formats], image_format.h) are decoded whole (ImageDecoder) and
// then take the path of a JPEG decoded at DCT scale 1: the same crop for the
// same (epoch, index) and image size, the crop's pixels resized and written
// as below. The rest of this comment is about JPEG.
//
// Per image: parse the header, plan the crop (PlanCrop of crop_planner.h:
// TrainCrop / EvalCrop and PlanDecode of transform.h), decode only the crop's
// rectangle at the planned DCT scale (libjpeg-turbo: 1/2, 1/4 or 1/8 while
// the scaled crop stays at least size x size), resize it to size x size with
// OpenCV, then flip, normalize ((x / 255 - mean) / std, computed in float32
// exactly as torchvision's ToTensor + Normalize do), convert to the dtype
// (float16 and bfloat16 round to nearest even) and write the layout, all in
// one pass over the resized 8-bit image (per-channel lookup tables). uint8
// output skips normalization (flip and layout still apply). Grayscale JPEGs
// are resized on one channel and replicated to three; CMYK/YCCK become RGB as
// in jpeg.h.
//
// Resize: bilinear with pixel-centre alignment (as PIL): cv::resize
// INTER_LINEAR from the crop box, or, when DCT scaling put the box's edges
// between scaled pixels, cv::warpAffine (INTER_LINEAR) with the exact
// fractional box, so the geometry is always the crop's. Reductions of more than
// 2x (only when DCT scaling is capped at 1/8) use cv::resize INTER_AREA. The
// crop itself is whole source pixels (CropParams), which for eval is within
// 0.5 source pixels per edge of torchvision's fractional box.
//
// Accuracy vs torchvision on PIL images (tests/python/test_image_reference.py,
// "photo-like" 200x150 .. 1024x768 JPEGs: RGB 4:2:0/4:4:4, progressive, gray,
// CMYK; |ours - reference| in normalized units, 1 unit ~ 57 of 255 levels):
//   eval  (Resize(round(size/0.875), BILINEAR) + CenterCrop + ToTensor + Normalize):
//         mean <= 0.017, 99th percentile <= 0.21, max <= 0.81
//         (asserted: mean < 0.02, p99 < 0.25, max < 1.0; uint8 output: mean < 1.2
//         levels, p99 < 14, max < 57)
//   train (PIL crop of the same CropParams + resize BILINEAR + flip):
//         mean <= 0.011, p99 <= 0.13, max <= 0.53 (asserted: 0.015, 0.2, 0.8)
// The differences come from PIL's BILINEAR widening its filter when it
// downscales (antialias; OpenCV's bilinear does not, and DCT scaling is another
// low-pass), from the eval box rounding, and are largest at sharp edges. For a
// given resized 8-bit image the float outputs are bit-identical to torch's.
//
// Speed (RelWithDebInfo, thread CPU time on the shared 2-core dev VM,
// train/224/float32, tools/make_dataset.py images: mostly 500x375, quality
// 75..95; `benchmarks/cpu_pipeline_cost DIR`): about 530 us per image (~1,900
// images/s per core), of which ~365 us is the header and region decode and
// the rest resize (~85 us, OpenCV) and the output pass (~40 us). The decode
// is bound by entropy (Huffman) decoding, which no crop or DCT scale avoids:
// a whole-image decode at 1/8 scale (almost nothing but entropy decoding)
// costs ~335 us on the same files. torchvision on PIL costs ~2.5-3 ms of CPU
// per image there. No per-image allocation beyond libjpeg's own per-image
// pools: the decode and resize buffers grow to the largest image seen and
// are reused.
//
// Thread-safety: NOT thread-safe; use one pipeline per worker thread (it owns a
// libjpeg decoder and scratch buffers). The first pipeline constructed in a
// process sets OpenCV's thread count to 1 (cv::setNumThreads), so that
// cv::resize does not start its own threads: batchcast parallelizes across
// pipelines.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "batchcast/core/status.h"
#include "batchcast/image/image_decoder.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/image/transform.h"

namespace batchcast::image {

// Knobs for tests and experiments; the defaults are what production uses.
struct PipelineTuning {
  bool allow_dct_scaling = true;     // false: always decode at full size
  bool allow_cropped_decode = true;  // false: always decode the whole image
  enum class Interpolation { kAuto, kLinear, kArea } interpolation = Interpolation::kAuto;
};

class CpuImagePipeline {
 public:
  // REQUIRES: ValidateTransformOptions(options).ok().
  explicit CpuImagePipeline(TransformOptions options, PipelineTuning tuning = {});
  ~CpuImagePipeline();
  CpuImagePipeline(const CpuImagePipeline&) = delete;
  CpuImagePipeline& operator=(const CpuImagePipeline&) = delete;
  // A moved-from pipeline may only be destroyed or assigned to.
  CpuImagePipeline(CpuImagePipeline&&) noexcept;
  CpuImagePipeline& operator=(CpuImagePipeline&&) noexcept;

  const TransformOptions& options() const { return options_; }
  size_t output_bytes() const { return OutputBytes(options_); }

  // Decodes `bytes` (a JPEG or another format of image_format.h), applies the
  // transform of sample (epoch, index) and writes output_bytes() bytes to
  // `out`. When `crop_used` is not null it receives the crop applied (source
  // coordinates). Errors: DataLoss (not an image batchcast decodes, corrupt,
  // truncated, unsupported colour space or variant: the message says why),
  // ResourceExhausted (width * height > max_pixels). `out` is unspecified after
  // an error.
  // REQUIRES: `out` points to output_bytes() writable bytes.
  Status Process(std::span<const uint8_t> bytes, uint32_t epoch, int64_t index, void* out,
                 CropParams* crop_used = nullptr);

  // Like Process but with a given crop (train and eval alike), e.g. one the
  // caller computed from ReadJpegInfo. InvalidArgument when the crop is empty
  // or not inside the image.
  Status ProcessWithCrop(std::span<const uint8_t> bytes, const CropParams& crop, void* out);

 private:
  Status Run(std::span<const uint8_t> bytes, const CropParams* fixed_crop, uint32_t epoch,
             int64_t index, void* out, CropParams* crop_used);

  TransformOptions options_;
  PipelineTuning tuning_;
  JpegDecoder decoder_;
  ImageDecoder other_;  // the other formats
  struct Scratch;
  // The resized image (OpenCV) and the pass that writes the output
  // (SampleWriter, image/src/sample_writer.h).
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace batchcast::image
