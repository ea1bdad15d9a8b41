#include "decode_route.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "batchcast/image/transcode.h"

namespace batchcast {
namespace {

// Copies `rect` of a decoded RGB image into `out` as packed rows
// (rect.w * 3 bytes each). REQUIRES: rect inside the image.
void PackRgb(const image::DecodedImage& img, const image::PixelRect& rect,
             std::vector<uint8_t>& out) {
  const size_t row = static_cast<size_t>(rect.w) * 3;
  out.resize(row * static_cast<size_t>(rect.h));
  for (int y = 0; y < rect.h; ++y) {
    std::memcpy(out.data() + row * y,
                img.data + img.stride * (rect.y + y) + static_cast<size_t>(rect.x) * 3, row);
  }
}

}  // namespace

SampleRouter::SampleRouter(ImageDataset& dataset, CpuFileCache& cache, int workers,
                           TranscodeCache* transcode, HardwareSupports supports)
    : dataset_(dataset),
      cache_(cache),
      decoders_(static_cast<size_t>(workers)),
      transcode_(transcode != nullptr && transcode->enabled() ? transcode : nullptr),
      supports_(std::move(supports)) {}

Result<SampleFill> SampleRouter::Route(int worker, uint32_t epoch, int64_t index, FileBuffer& file,
                                       GpuSample& sample, RouteFor mode) {
  BATCHCAST_ASSIGN_OR_RETURN(const SampleFill fill, dataset_.Decode(index, [&](int64_t i) {
    return RouteOnce(worker, epoch, i, file, sample, mode);
  }));
  if (fill == SampleFill::kDropped) sample.route = DecodeRoute::kDropped;
  return fill;
}

bool SampleRouter::Transcoded(int64_t index, FileBuffer& file) {
  const image::JpegInfo& info = dataset_.file(index).info;
  using CS = image::JpegInfo::ColorSpace;
  if (!info.progressive || (info.color != CS::kYCbCr && info.color != CS::kGray) ||
      transcode_->refused(index)) {
    return false;
  }
  if (transcode_->Get(index, &file.bytes)) {
    file.index = index;
    return true;
  }
  if (file.index != index) {
    if (!file.Read(dataset_.reader(), index).ok()) return false;  // the CPU route reports it
  }
  // Only while the budget has room: beyond it the file is decoded on the CPU
  // (transcoding it again every epoch would cost about as much).
  if (!transcode_->HasRoom(file.bytes.size())) return false;
  Result<std::vector<uint8_t>> baseline =
      image::TranscodeToBaseline(file.bytes, image::EffectiveMaxPixels(dataset_.transform()));
  if (!baseline.ok() || (supports_ && !supports_(*baseline))) {
    transcode_->MarkRefused(index);  // corrupt (the CPU decoder reports it), or still refused
    return false;
  }
  (void)transcode_->Put(index, *baseline);
  file.bytes = std::move(*baseline);
  transcoded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Status SampleRouter::RouteOnce(int worker, uint32_t epoch, int64_t index, FileBuffer& file,
                               GpuSample& sample, RouteFor mode) {
  const bool force_cpu = mode == RouteFor::kForceCpu;
  const bool cacheable = !force_cpu && cache_.has_place(index);
  if (cacheable && cache_.holds(index)) {
    cache_.CountHit();
    sample.route = DecodeRoute::kCachedFullImage;
    sample.plan = PlanFromScan(epoch, index);
    return Status::Ok();
  }
  if (mode == RouteFor::kHardware && transcode_ != nullptr && !dataset_.file(index).flag &&
      Transcoded(index, file)) {
    sample.route = DecodeRoute::kNvJpeg;  // Note [Transcoded progressive files]
    sample.plan = PlanFromScan(epoch, index);
    return Status::Ok();
  }
  if (file.index != index) BATCHCAST_RETURN_IF_ERROR(file.Read(dataset_.reader(), index));
  if (!force_cpu && dataset_.file(index).flag) {
    sample.route = DecodeRoute::kNvJpeg;
    sample.plan = PlanFromScan(epoch, index);
    return Status::Ok();
  }
  Decoders& decoders = decoders_[static_cast<size_t>(worker)];
  return cacheable ? DecodeFull(decoders, epoch, index, file, sample)
                   : DecodeCrop(decoders, epoch, index, file, sample);
}

image::CropPlan SampleRouter::PlanFromScan(uint32_t epoch, int64_t index) const {
  const ImageDataset::File& f = dataset_.file(index);
  // Note [Other formats on the GPU path]: box 1 for formats decoded whole.
  return image::PlanCrop(dataset_.transform(), epoch, index, f.info.width, f.info.height,
                         /*allow_dct_scaling=*/f.format == image::ImageFormat::kJpeg);
}

Status SampleRouter::DecodeFull(Decoders& decoders, uint32_t epoch, int64_t index,
                                const FileBuffer& file, GpuSample& sample) {
  const ImageDataset::File& f = dataset_.file(index);
  const uint64_t max_pixels = image::EffectiveMaxPixels(dataset_.transform());
  Result<image::DecodedImage> img =
      f.format == image::ImageFormat::kJpeg
          ? decoders.jpeg.DecodeRgb(file.bytes, max_pixels)
          : decoders.other.Decode(file.bytes, max_pixels, /*gray_as_rgb=*/true);
  if (img.ok() &&
      (img->width != f.info.width || img->height != f.info.height || img->channels != 3)) {
    img = DataLossError("decoded size differs from the header's");
  }
  BATCHCAST_RETURN_IF_ERROR(img.status());
  PackRgb(*img, {0, 0, img->width, img->height}, sample.decoded);
  sample.route = DecodeRoute::kCpuFullForCache;
  sample.plan = PlanFromScan(epoch, index);
  return Status::Ok();
}

Status SampleRouter::DecodeCrop(Decoders& decoders, uint32_t epoch, int64_t index,
                                const FileBuffer& file, GpuSample& sample) {
  const image::TransformOptions& t = dataset_.transform();
  const uint64_t max_pixels = image::EffectiveMaxPixels(t);
  image::DecodedImage img;
  image::PixelRect rect;
  if (dataset_.file(index).format == image::ImageFormat::kJpeg) {
    BATCHCAST_ASSIGN_OR_RETURN(image::JpegInfo info,
                               decoders.jpeg.ReadHeader(file.bytes, max_pixels));
    sample.plan = image::PlanCrop(t, epoch, index, info.width, info.height);
    BATCHCAST_ASSIGN_OR_RETURN(
        img, decoders.jpeg.Decode(sample.plan.decode.scale_denom, sample.plan.decode.rect,
                                  /*gray_as_rgb=*/true));
    rect = {0, 0, img.width, img.height};
  } else {
    // Note [Other formats on the GPU path]: decoded whole, its crop uploaded.
    BATCHCAST_ASSIGN_OR_RETURN(img, decoders.other.Decode(file.bytes, max_pixels,
                                                          /*gray_as_rgb=*/true));
    sample.plan = image::PlanCrop(t, epoch, index, img.width, img.height,
                                  /*allow_dct_scaling=*/false);
    rect = sample.plan.decode.rect;
  }
  PackRgb(img, rect, sample.decoded);
  sample.decoded_w = rect.w;
  sample.decoded_h = rect.h;
  sample.route = DecodeRoute::kCpuCropped;
  return Status::Ok();
}

image::PixelRect DecodeRegion(const image::DecodePlan& plan, int width, int height) {
  constexpr int kMcu = 16;
  const int box = plan.scale_denom;
  const int x0 = plan.rect.x * box / kMcu * kMcu;
  const int y0 = plan.rect.y * box / kMcu * kMcu;
  const int x1 = std::min(((plan.rect.x + plan.rect.w) * box + kMcu - 1) / kMcu * kMcu, width);
  const int y1 = std::min(((plan.rect.y + plan.rect.h) * box + kMcu - 1) / kMcu * kMcu, height);
  return {x0, y0, x1 - x0, y1 - y0};
}

}  // namespace batchcast
