#include "nvjpeg_batch.h"

#include <algorithm>
#include <cstring>

#include "batchcast/cuda/runtime.h"
#include "decode_route.h"

namespace batchcast {

NvJpegBatch::NvJpegBatch(const ImageDataset& dataset, int device,
                         std::vector<std::unique_ptr<cuda::NvJpegDecoder>> decoders, bool regions,
                         StageTimes* stages, Stages stage_ids)
    : dataset_(dataset),
      device_(device),
      decoders_(std::move(decoders)),
      regions_(regions && decoders_.front()->takes_regions()),
      stages_(stages),
      stage_ids_(stage_ids) {
  for (size_t c = 1; c < decoders_.size(); ++c) {
    side_calls_.push_back(std::make_unique<BackgroundTask>());
  }
}

Status NvJpegBatch::InitBuffers(BatchBuffers& set, StreamPriority priority) const {
  set.jpegs.resize(decoders_.size());
  set.outputs.resize(decoders_.size());
  for (size_t c = 1; c < decoders_.size(); ++c) {
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(device_, priority));
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Event done, cuda::Event::Create(device_));
    set.side_streams.push_back(std::move(stream));
    set.side_done.push_back(std::move(done));
  }
  return Status::Ok();
}

void NvJpegBatch::StageFiles(BatchBuffers& set, std::span<const int64_t> indices) {
  set.staged_at.assign(indices.size(), BatchBuffers::StagedFile{});
  auto stageable = [&](size_t i) {
    const int64_t index = indices[i];
    return index >= 0 && set.files[i].index == index && dataset_.file(index).flag;
  };
  size_t bytes = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (stageable(i)) bytes += set.files[i].bytes.size();
  }
  if (bytes == 0) return;
  // On a failure nothing is staged: Decode copies the files itself, and the
  // pipeline thread meets the error again.
  {
    StageTimes::Scope timed(stages_, stage_ids_.gpu_wait);
    if (!set.done.Synchronize().ok()) return;
  }
  StageTimes::Scope timed(stages_, stage_ids_.read);
  const cuda::DeviceGuard on_device(device_);  // cudaMallocHost on this thread
  if (!on_device.status().ok() || !Grow(set.staged, bytes).ok()) return;
  size_t offset = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!stageable(i)) continue;
    const std::vector<uint8_t>& file = set.files[i].bytes;
    std::memcpy(set.staged.data() + offset, file.data(), file.size());
    set.staged_at[i] = {indices[i], offset, file.size()};
    offset += file.size();
  }
}

const BatchBuffers::StagedFile* NvJpegBatch::Staged(const SlotView& slot, const BatchBuffers& set,
                                                    size_t i) {
  if (i >= set.staged_at.size()) return nullptr;
  const BatchBuffers::StagedFile& s = set.staged_at[i];
  // The same file in set.files too. Its bytes were not replaced by a
  // transcode: only files the engine refuses (flag false) are transcoded, and
  // StageFiles stages flagged files only.
  const bool same = s.index >= 0 && s.index == slot.indices[i] && set.files[i].index == s.index &&
                    set.files[i].bytes.size() == s.size;
  return same ? &s : nullptr;
}

Status NvJpegBatch::Decode(const SlotView& slot, BatchBuffers& set, int state,
                           std::span<const size_t> ids) {
  size_t arena_bytes = 0, file_bytes = 0;
  for (size_t i : ids) {
    const image::JpegInfo& info = dataset_.file(slot.indices[i]).info;
    GpuSample& s = set.samples[i];
    // Note [Region decode].
    s.region = regions_ ? DecodeRegion(s.plan.decode, info.width, info.height)
                        : image::PixelRect{0, 0, info.width, info.height};
    s.offset = arena_bytes;
    arena_bytes += AlignUp(static_cast<size_t>(s.region.w) * 3 * static_cast<size_t>(s.region.h));
    if (Staged(slot, set, i) == nullptr) file_bytes += set.files[i].bytes.size();
  }
  BATCHCAST_RETURN_IF_ERROR(Grow(set.arena, device_, arena_bytes));
  // Note [Pinned bitstreams].
  BATCHCAST_RETURN_IF_ERROR(Grow(set.bitstreams, file_bytes));
  size_t file_offset = 0;
  const size_t calls = std::max<size_t>(1, std::min(decoders_.size(), ids.size()));
  for (size_t c = 0; c < calls; ++c) {
    std::vector<std::span<const uint8_t>>& jpegs = set.jpegs[c];
    std::vector<cuda::NvJpegDecoder::Output>& outputs = set.outputs[c];
    jpegs.clear();
    outputs.clear();
    for (size_t k = c * ids.size() / calls; k < (c + 1) * ids.size() / calls; ++k) {
      const size_t i = ids[k];
      if (const BatchBuffers::StagedFile* staged = Staged(slot, set, i)) {
        jpegs.emplace_back(set.staged.data() + staged->offset, staged->size);
      } else {
        const std::vector<uint8_t>& bytes = set.files[i].bytes;
        uint8_t* pinned = set.bitstreams.data() + file_offset;
        std::memcpy(pinned, bytes.data(), bytes.size());
        file_offset += bytes.size();
        jpegs.emplace_back(pinned, bytes.size());
      }
      const GpuSample& s = set.samples[i];
      cuda::NvJpegDecoder::Output out{set.arena.data() + s.offset,
                                      static_cast<size_t>(s.region.w) * 3};
      if (regions_) {
        out.region_x = s.region.x;
        out.region_y = s.region.y;
        out.region_w = s.region.w;
        out.region_h = s.region.h;
      }
      outputs.push_back(out);
    }
  }
  for (size_t c = 1; c < calls; ++c) {
    side_calls_[c - 1]->Start([this, &set, state, c]() -> Status {
      const CudaStreamRef stream = set.side_streams[c - 1].ref();
      Status decoded = decoders_[c]->DecodeBatch(state, set.jpegs[c], set.outputs[c], stream);
      // Recorded even after a failure: it covers whatever the call queued.
      Status recorded = set.side_done[c - 1].Record(stream);
      return decoded.ok() ? recorded : decoded;
    });
  }
  Status status = decoders_[0]->DecodeBatch(state, set.jpegs[0], set.outputs[0], slot.stream);
  for (size_t c = 1; c < calls; ++c) {
    Status side = side_calls_[c - 1]->Wait();
    // Ordered after the side stream's work, even when the call failed.
    if (Status wait = set.side_done[c - 1].BlockStream(slot.stream); side.ok() && !wait.ok()) {
      side = std::move(wait);
    }
    if (!side.ok() && (status.ok() || (status.code() == StatusCode::kDataLoss &&
                                       side.code() != StatusCode::kDataLoss))) {
      status = std::move(side);  // the first failure, or one worse than DataLoss
    }
  }
  return status;
}

}  // namespace batchcast
