#include "decode_route.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "batchcast/image/transcode.h"

namespace batchcast {
namespace {

// Copies a decoded RGB image into `out` as packed rows (width * 3 bytes each).
void PackRgb(const image::DecodedImage& img, std::vector<uint8_t>& out) {
  const size_t row = static_cast<size_t>(img.width) * 3;
  out.resize(row * static_cast<size_t>(img.height));
  for (int y = 0; y < img.height; ++y) {
    std::memcpy(out.data() + row * y, img.data + img.stride * y, row);
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
  image::JpegDecoder& decoder = decoders_[static_cast<size_t>(worker)];
  return cacheable ? DecodeFull(decoder, epoch, index, file, sample)
                   : DecodeCrop(decoder, epoch, index, file, sample);
}

image::CropPlan SampleRouter::PlanFromScan(uint32_t epoch, int64_t index) const {
  const image::JpegInfo& info = dataset_.file(index).info;
  return image::PlanCrop(dataset_.transform(), epoch, index, info.width, info.height);
}

Status SampleRouter::DecodeFull(image::JpegDecoder& decoder, uint32_t epoch, int64_t index,
                                const FileBuffer& file, GpuSample& sample) {
  const image::JpegInfo& info = dataset_.file(index).info;
  Result<image::DecodedImage> img =
      decoder.DecodeRgb(file.bytes, image::EffectiveMaxPixels(dataset_.transform()));
  if (img.ok() && (img->width != info.width || img->height != info.height || img->channels != 3)) {
    img = DataLossError("decoded size differs from the header's");
  }
  BATCHCAST_RETURN_IF_ERROR(img.status());
  PackRgb(*img, sample.decoded);
  sample.route = DecodeRoute::kCpuFullForCache;
  sample.plan = PlanFromScan(epoch, index);
  return Status::Ok();
}

Status SampleRouter::DecodeCrop(image::JpegDecoder& decoder, uint32_t epoch, int64_t index,
                                const FileBuffer& file, GpuSample& sample) {
  const image::TransformOptions& t = dataset_.transform();
  BATCHCAST_ASSIGN_OR_RETURN(image::JpegInfo info,
                             decoder.ReadHeader(file.bytes, image::EffectiveMaxPixels(t)));
  sample.plan = image::PlanCrop(t, epoch, index, info.width, info.height);
  BATCHCAST_ASSIGN_OR_RETURN(image::DecodedImage img,
                             decoder.Decode(sample.plan.decode.scale_denom, sample.plan.decode.rect,
                                            /*gray_as_rgb=*/true));
  PackRgb(img, sample.decoded);
  sample.decoded_w = img.width;
  sample.decoded_h = img.height;
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
