// DecodeRoute: where the GPU image source decodes one sample, and
// SampleRouter, which picks it and does the sample's CPU part (stage 1 of
// CudaImageSource::FillBatch, and the CPU fallback of stage 2).
//
// Routes, by the file's scan (ImageDataset::File::flag: nvJPEG takes it) and
// Note [CPU-decoded file cache]:
//   kNvJpeg          nvJPEG takes the file: its bytes go to the batched
//                    decode (stage 2), which writes the full image into the
//                    batch's arena.
//   kCachedFullImage the cache holds the file's full image: nothing to read
//                    or decode.
//   kCpuFullForCache the file has a cache place but is not there yet: it is
//                    decoded whole on the CPU now; stage 3 uploads it into
//                    its place and the sample turns kCachedFullImage.
//   kCpuCropped      any other file (and every file of a batch nvJPEG
//                    rejected): its crop is decoded on the CPU, DCT-scaled as
//                    the CPU path does, and uploaded for this batch only
//                    (formats other than JPEG: Note [Other formats on the
//                    GPU path]).
//   kDropped         the file failed (now or in an earlier batch) and
//                    on_error=skip: no sample (Note [Dropped files],
//                    image_dataset.h); the kernel writes nothing for it.
// The kernel reads kNvJpeg and kCachedFullImage samples from a full-size
// image (scaled by averaging box x box blocks), kCpuCropped ones from the
// uploaded crop (box 1).
//
// Note [Other formats on the GPU path]
// A file of another format than JPEG (Note [Image formats],
// batchcast/image/image_format.h) is never a hardware candidate: the scan
// never flags it (ImageDataset's classify hook runs for JPEG files only), so
// it takes the fallback decoders' routes. kCpuCropped decodes it whole
// (image::ImageDecoder, gray replicated to RGB) and uploads only its crop;
// kCpuFullForCache uploads the whole image into its cache place. Its plan has
// no DCT scaling (PlanCrop with allow_dct_scaling false: the rect is the crop
// itself, the kernel's box 1), which is what the CPU path does with it, so
// the same augmentation kernel resizes the same crop from the same pixels as
// the CPU path: the crop rect of (seed, epoch, index) is the one a JPEG of
// the same size gets, and the pixels agree with the CPU path's within the
// kernel's rounding (tests/gpu/gpu_image_test.cc, MixedFormats...).
//
// Thread-safety: SampleRouter::Route may run on several threads at once with
// distinct `worker` numbers and distinct samples.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "batchcast/image/crop_planner.h"
#include "batchcast/image/image_decoder.h"
#include "batchcast/image/jpeg.h"
#include "cpu_file_cache.h"
#include "file_prefetcher.h"
#include "image_dataset.h"
#include "transcode_cache.h"

namespace batchcast {

enum class DecodeRoute : uint8_t {
  kNvJpeg,
  kCachedFullImage,
  kCpuFullForCache,
  kCpuCropped,
  kDropped
};

// The kernel reads the sample from a full-size decode in device memory (the
// whole image, or for kNvJpeg its region: Note [Region decode]).
inline bool ReadsFullImage(DecodeRoute r) {
  return r == DecodeRoute::kNvJpeg || r == DecodeRoute::kCachedFullImage;
}
// The sample was decoded on the CPU in this batch (stage 3 uploads it).
inline bool DecodedOnCpu(DecodeRoute r) {
  return r == DecodeRoute::kCpuFullForCache || r == DecodeRoute::kCpuCropped;
}

// What SampleRouter::Route may do with a sample, by when it is routed
// relative to its batch's hardware call.
enum class RouteFor : uint8_t {
  // Before the hardware call: a file the engine takes is only read (kNvJpeg);
  // a progressive one may be transcoded and join the hardware batch (Note
  // [Transcoded progressive files]); the others are decoded on the CPU.
  kHardware,
  // Beside the hardware call (already submitted): decoded on the CPU.
  kCpu,
  // The engine refused the batch: decoded on the CPU whatever the file.
  kForceCpu,
};

// Note [Region decode]: a sample's fused kernel reads only its crop (the
// plan's rect, times scale_denom in full-size pixels): with the train
// transform 8-100 % of the image, with eval the centre square. nvJPEG's
// hardware backend entropy-decodes the whole file whatever it is asked, but
// given a region per image (nvjpegDecodeBatchedEx) it colour-converts and
// writes only that region. So the server's GPU work per image beside a
// trainer (nvJPEG's conversion and the arena's writes, then the kernel's
// reads) and the arena shrink with the crop. The region is widened outward
// to multiples of 16 pixels (the largest JPEG MCU): its offset is then a
// multiple of any box (1..8), so the kernel's box grid stays where the CPU
// path's DCT scaling puts it, and its edges fall on MCU edges. The kernel
// reads the region as its image (AugmentLauncher::Launch): the source
// at the region's origin, the rect shifted by region.x / box and
// region.y / box. tests/gpu checks that a region holds the full decode's
// pixels. It changed no measured rate (the engine's rate bounds the server),
// but keeps the arena and nvJPEG's conversion small (docs/design.md, "GPU
// path"). --no-nvjpeg-region (SourceOptions::nvjpeg_region) decodes whole
// images.
//
// The region of a width x height image that `plan` reads, widened as above
// and clipped to the image. REQUIRES: plan's rect inside the image scaled by
// plan.scale_denom (image::PlanDecode's).
image::PixelRect DecodeRegion(const image::DecodePlan& plan, int width, int height);

// One sample's state inside a batch.
struct GpuSample {
  DecodeRoute route = DecodeRoute::kCpuCropped;
  // The crop, and for full images the box (decode.scale_denom) and the
  // region (decode.rect, scaled pixels) the kernel reads; for kCpuCropped,
  // decode.rect is what was decoded.
  image::CropPlan plan;
  // CPU routes: RGB rows, packed: kCpuFullForCache the full image,
  // kCpuCropped the decoded rect (decoded_w x decoded_h).
  std::vector<uint8_t> decoded;
  int decoded_w = 0;
  int decoded_h = 0;
  // kNvJpeg: in the batch's arena; CPU routes: in its upload buffer.
  size_t offset = 0;
  // kNvJpeg: the part of the image decoded (full-size pixels; Note [Region
  // decode]); w == 0: all of it.
  image::PixelRect region;
};

class SampleRouter {
 public:
  // Whether the hardware engine takes a JPEG (NvJpegDecoder::Supports).
  using HardwareSupports = std::function<bool(std::span<const uint8_t>)>;

  // `workers` CPU decoders, for Route calls with worker in [0, workers).
  // `transcode` (Note [Transcoded progressive files]; null or disabled: none)
  // with `supports` to check its results. The dataset and the caches must
  // outlive the router.
  SampleRouter(ImageDataset& dataset, CpuFileCache& cache, int workers,
               TranscodeCache* transcode = nullptr, HardwareSupports supports = {});

  // Routes sample `index` of `epoch` into `sample`: reads its file into `file`
  // unless `file` holds it already (or the route needs no bytes), and decodes
  // it on the CPU when the route says so (`mode`, above). A file that fails
  // follows Note [Dropped files] (image_dataset.h): kDropped (sample.route
  // too) with on_error=skip, its error with fail. A transcoded file's route
  // is kNvJpeg and `file` holds its baseline bytes.
  Result<SampleFill> Route(int worker, uint32_t epoch, int64_t index, FileBuffer& file,
                           GpuSample& sample, RouteFor mode);

  // Files transcoded (and sent to the engine) so far, kept or not.
  int64_t transcoded() const { return transcoded_.load(std::memory_order_relaxed); }

 private:
  Status RouteOnce(int worker, uint32_t epoch, int64_t index, FileBuffer& file, GpuSample& sample,
                   RouteFor mode);
  // Note [Transcoded progressive files]: true when `file` now holds baseline
  // bytes of `index` the engine takes (kept, or transcoded now).
  bool Transcoded(int64_t index, FileBuffer& file);
  // The CPU decoders of one worker: JPEG, and the other formats.
  struct Decoders {
    image::JpegDecoder jpeg;
    image::ImageDecoder other;
  };
  Status DecodeFull(Decoders& decoders, uint32_t epoch, int64_t index, const FileBuffer& file,
                    GpuSample& sample);
  Status DecodeCrop(Decoders& decoders, uint32_t epoch, int64_t index, const FileBuffer& file,
                    GpuSample& sample);
  // The sample's crop plan from the scan's header (Note [Other formats on
  // the GPU path]: without DCT scaling for formats other than JPEG).
  image::CropPlan PlanFromScan(uint32_t epoch, int64_t index) const;

  ImageDataset& dataset_;
  CpuFileCache& cache_;
  std::vector<Decoders> decoders_;   // one per worker
  TranscodeCache* const transcode_;  // null: none
  const HardwareSupports supports_;
  std::atomic<int64_t> transcoded_{0};
};

}  // namespace batchcast
