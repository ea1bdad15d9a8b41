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
//                    the CPU path does, and uploaded for this batch only.
//   kDropped         the file failed (now or in an earlier batch) and
//                    on_error=skip: no sample (Note [Dropped files],
//                    image_dataset.h); the kernel writes nothing for it.
// The kernel reads kNvJpeg and kCachedFullImage samples from a full-size
// image (scaled by averaging box x box blocks), kCpuCropped ones from the
// uploaded crop (box 1).
//
// Thread-safety: SampleRouter::Route may run on several threads at once with
// distinct `worker` numbers and distinct samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "batchcast/image/crop_planner.h"
#include "batchcast/image/jpeg.h"
#include "cpu_file_cache.h"
#include "file_prefetcher.h"
#include "image_dataset.h"

namespace batchcast {

enum class DecodeRoute : uint8_t {
  kNvJpeg,
  kCachedFullImage,
  kCpuFullForCache,
  kCpuCropped,
  kDropped
};

// The kernel reads the sample from a full-size image in device memory.
inline bool ReadsFullImage(DecodeRoute r) {
  return r == DecodeRoute::kNvJpeg || r == DecodeRoute::kCachedFullImage;
}
// The sample was decoded on the CPU in this batch (stage 3 uploads it).
inline bool DecodedOnCpu(DecodeRoute r) {
  return r == DecodeRoute::kCpuFullForCache || r == DecodeRoute::kCpuCropped;
}

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
};

class SampleRouter {
 public:
  // `workers` CPU decoders, for Route calls with worker in [0, workers).
  // The dataset and the cache must outlive the router.
  SampleRouter(ImageDataset& dataset, CpuFileCache& cache, int workers);

  // Routes sample `index` of `epoch` into `sample`: reads its file into `file`
  // unless `file` holds it already (or the route needs no bytes), and decodes
  // it on the CPU when the route says so. A file that fails follows Note
  // [Dropped files] (image_dataset.h): kDropped (sample.route too) with
  // on_error=skip, its error with fail. force_cpu: the route is kCpuCropped
  // whatever the file (nvJPEG rejected its batch).
  Result<SampleFill> Route(int worker, uint32_t epoch, int64_t index, FileBuffer& file,
                           GpuSample& sample, bool force_cpu);

 private:
  Status RouteOnce(int worker, uint32_t epoch, int64_t index, FileBuffer& file, GpuSample& sample,
                   bool force_cpu);
  Status DecodeFull(image::JpegDecoder& decoder, uint32_t epoch, int64_t index,
                    const FileBuffer& file, GpuSample& sample);
  Status DecodeCrop(image::JpegDecoder& decoder, uint32_t epoch, int64_t index,
                    const FileBuffer& file, GpuSample& sample);
  image::CropPlan PlanFromScan(uint32_t epoch, int64_t index) const;

  ImageDataset& dataset_;
  CpuFileCache& cache_;
  std::vector<image::JpegDecoder> decoders_;  // one per worker
};

}  // namespace batchcast
