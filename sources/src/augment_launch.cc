#include "augment_launch.h"

#include <cstring>
#include <vector>

#include "batchcast/cuda/runtime.h"
#include "decode_route.h"
#include "split_decode.h"

namespace batchcast {

AugmentLauncher::AugmentLauncher(const ImageDataset& dataset, CpuFileCache& cache, int device)
    : dataset_(dataset), cache_(cache), device_(device) {
  const image::TransformOptions& t = dataset_.transform();
  params_.size = t.size;
  params_.dtype = t.dtype;
  params_.nchw = t.nchw;
  for (int c = 0; c < 3; ++c) {
    params_.mean[c] = t.mean[c];
    params_.std[c] = t.std[c];
  }
}

Status AugmentLauncher::Upload(const SlotView& slot, BatchBuffers& set) {
  const size_t n = slot.count();
  size_t upload_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    GpuSample& s = set.samples[i];
    if (!DecodedOnCpu(s.route)) continue;
    s.offset = upload_bytes;
    upload_bytes += AlignUp(s.decoded.size());
  }
  if (upload_bytes == 0) return Status::Ok();
  BATCHCAST_RETURN_IF_ERROR(Grow(set.upload, upload_bytes));
  BATCHCAST_RETURN_IF_ERROR(Grow(set.uploaded, device_, upload_bytes));
  for (size_t i = 0; i < n; ++i) {
    GpuSample& s = set.samples[i];
    if (!DecodedOnCpu(s.route)) continue;
    uint8_t* host = set.upload.data() + s.offset;
    std::memcpy(host, s.decoded.data(), s.decoded.size());
    if (s.route == DecodeRoute::kCpuFullForCache) {
      // Note [CPU-decoded file cache]: into its place, before the kernel.
      BATCHCAST_RETURN_IF_ERROR(cache_.Fill(slot.indices[i], host, s.decoded.size(), slot.stream));
      s.route = DecodeRoute::kCachedFullImage;
    }
  }
  return cuda::CopyAsync(set.uploaded.data(), set.upload.data(), upload_bytes, slot.stream);
}

// Sample i goes to position `kept` (the samples before it that were not
// dropped), and slot.indices[kept] names it.
Result<uint32_t> AugmentLauncher::Launch(const SlotView& slot, BatchBuffers& set) {
  const size_t n = slot.count();
  const size_t desc_bytes = AlignUp(n * sizeof(cuda::AugmentSample));
  const size_t label_bytes = n * sizeof(int64_t);
  BATCHCAST_RETURN_IF_ERROR(Grow(set.host_desc, desc_bytes + label_bytes));
  BATCHCAST_RETURN_IF_ERROR(Grow(set.dev_desc, device_, desc_bytes));
  auto* desc = reinterpret_cast<cuda::AugmentSample*>(set.host_desc.data());
  auto* labels = reinterpret_cast<int64_t*>(set.host_desc.data() + desc_bytes);
  const std::vector<size_t> keep = KeepInOrder(std::span<const GpuSample>(set.samples.data(), n));
  uint32_t kept = 0;
  for (size_t i : keep) {
    const GpuSample& s = set.samples[i];
    const int64_t index = slot.indices[i];
    const ImageDataset::File& f = dataset_.file(index);
    const image::DecodePlan& plan = s.plan.decode;
    cuda::AugmentSample& d = desc[kept];
    d = cuda::AugmentSample{};
    if (ReadsFullImage(s.route)) {
      // The arena holds the decoded region (Note [Region decode]), the cache
      // whole images.
      const bool arena = s.route == DecodeRoute::kNvJpeg;
      const image::PixelRect r =
          arena ? s.region : image::PixelRect{0, 0, f.info.width, f.info.height};
      d.src = arena ? set.arena.data() + s.offset : cache_.image(index);
      d.pitch = static_cast<int64_t>(r.w) * 3;
      d.src_w = r.w;
      d.src_h = r.h;
      d.box = plan.scale_denom;
      d.rect_x = plan.rect.x - r.x / plan.scale_denom;
      d.rect_y = plan.rect.y - r.y / plan.scale_denom;
    } else {
      d.src = set.uploaded.data() + s.offset;
      d.pitch = static_cast<int64_t>(s.decoded_w) * 3;
      d.src_w = s.decoded_w;
      d.src_h = s.decoded_h;
      d.box = 1;
    }
    d.rect_w = plan.rect.w;
    d.rect_h = plan.rect.h;
    d.flip = s.plan.crop.flip ? 1 : 0;
    d.area = cuda::UsesAreaResampling(d.rect_w, d.rect_h, params_.size) ? 1 : 0;
    d.out = slot.sample(0, kept);
    labels[kept] = f.entry.label;
    slot.indices[kept] = index;
    ++kept;
  }
  if (kept > 0) {
    BATCHCAST_RETURN_IF_ERROR(cuda::CopyAsync(set.dev_desc.data(), set.host_desc.data(),
                                              kept * sizeof(cuda::AugmentSample), slot.stream));
    BATCHCAST_RETURN_IF_ERROR(
        cuda::CopyAsync(slot.field_data[1], labels, kept * sizeof(int64_t), slot.stream));
    BATCHCAST_RETURN_IF_ERROR(
        cuda::AugmentAsync(reinterpret_cast<const cuda::AugmentSample*>(set.dev_desc.data()),
                           static_cast<int>(kept), params_, slot.stream));
  }
  BATCHCAST_RETURN_IF_ERROR(set.done.Record(slot.stream));
  return kept;
}

}  // namespace batchcast
