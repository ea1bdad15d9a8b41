#include "cuda_image_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/src/logging.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/cuda_image/augment.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "cpu_file_cache.h"
#include "cuda_batch_buffers.h"
#include "decode_route.h"
#include "file_prefetcher.h"
#include "image_dataset.h"
#include "thread_pool.h"

namespace batchcast {
namespace {

// True when an EOI marker (FF D9) is among the file's last 32 bytes (encoders
// may pad after it). A truncated file has none and goes to the CPU decoder,
// which reports it (hardware decoders do not always).
bool EndsWithEoi(const std::string& path) {
  Result<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return false;
  const int fd = *opened;
  struct stat st {};
  bool found = false;
  if (fstat(fd, &st) == 0 && st.st_size >= 4) {
    uint8_t tail[32];
    const off_t n = std::min<off_t>(st.st_size, 32);
    if (pread(fd, tail, static_cast<size_t>(n), st.st_size - n) == n) {
      for (off_t i = n - 2; i >= 0 && !found; --i) found = tail[i] == 0xFF && tail[i + 1] == 0xD9;
    }
  }
  close(fd);
  return found;
}

uint64_t CountFlagged(const ImageDataset& dataset) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < dataset.size(); ++i) n += dataset.file(static_cast<int64_t>(i)).flag;
  return n;
}

// FillBatch runs four stages, in order, on the pipeline thread (stages 1 and
// the fallback of 2 spread their samples over the pool):
//   1. RouteSamples: read the files (or find them read ahead) and pick each
//      sample's DecodeRoute; CPU-decode the samples whose route says so.
//   2. DecodeOnGpu: nvJPEG batched decode of the kNvJpeg samples into the
//      arena; if nvJPEG rejects the batch, its files are routed again with
//      force_cpu.
//   3. UploadCpuDecoded: the CPU-decoded images into pinned memory, one copy
//      to the device, and new cache entries into their places.
//   4. LaunchAugment: one descriptor per sample kept and the labels, then the
//      fused kernel into the slot, then the set's `done` event.
// Every device operation is queued on SlotView::stream, in that order, so the
// cache and arena writes precede the kernel that reads them.
// Dropped samples (Note [Dropped files]): every failure is known after stage
// 2 (a read or CPU decode fails in stage 1 or in the CPU fallback of an
// nvJPEG-rejected batch; nvJPEG itself fails whole batches only), so stage 4
// gives the kept samples consecutive output positions (the kernel's `out` and
// the label copy) instead of moving data, and compacts SlotView::indices.
class CudaImageSource : public Source {
 public:
  CudaImageSource(std::unique_ptr<ImageDataset> dataset, int device,
                  std::unique_ptr<cuda::NvJpegDecoder> decoder, int threads)
      : dataset_(std::move(dataset)),
        device_(device),
        decoder_(std::move(decoder)),
        pool_(std::max(1, threads - 1)),
        cache_(*dataset_, kCpuFileCacheBytes),
        router_(*dataset_, cache_, pool_.size()),
        gpu_files_(CountFlagged(*dataset_)),
        prefetcher_(*dataset_, threads > 1) {
    const image::TransformOptions& t = dataset_->transform();
    params_.size = t.size;
    params_.dtype = t.dtype;
    params_.nchw = t.nchw;
    for (int c = 0; c < 3; ++c) {
      params_.mean[c] = t.mean[c];
      params_.std[c] = t.std[c];
    }
  }

  ~CudaImageSource() override {
    prefetcher_.Stop();
    for (BatchBuffers& s : sets_) {
      if (s.done.valid()) (void)s.done.Synchronize();
    }
  }

  Status Init() {
    for (BatchBuffers& s : sets_) {
      BATCHCAST_ASSIGN_OR_RETURN(s.done, cuda::Event::Create(device_, false, true));
    }
    return cache_.Allocate(device_);
  }

  uint64_t size() const override { return dataset_->size(); }
  MemoryKind output_memory() const override { return MemoryKind::kCuda; }
  std::vector<FieldSpec> fields() const override { return dataset_->fields(MemoryKind::kCuda); }

  std::string description() const override {
    return dataset_->Describe(decoder_->backend_name() + " on cuda:" + std::to_string(device_) +
                              ", " + std::to_string(dataset_->size() - gpu_files_) +
                              " files decoded on the CPU");
  }

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    std::vector<std::pair<std::string, int64_t>> out = dataset_->counters();
    out.insert(out.end(), {{"files_gpu_decodable", static_cast<int64_t>(gpu_files_)},
                           {"gpu_decoded", gpu_decoded_.load()},
                           {"cpu_decoded", cpu_decoded_.load()},
                           {"gpu_batch_failures", gpu_batch_failures_.load()},
                           {"cpu_file_cache_bytes", static_cast<int64_t>(cache_.bytes())},
                           {"cpu_file_cache_hits", cache_.hits()}});
    return out;
  }

  Result<uint32_t> FillBatch(const SlotView& slot, const ReadAhead& next) override;

 private:
  // Routes sample i; a dropped one gets DecodeRoute::kDropped.
  Status Route(int worker, const SlotView& slot, BatchBuffers& set, size_t i, bool force_cpu) {
    return router_
        .Route(worker, slot.epoch, slot.indices[i], set.files[i], set.samples[i], force_cpu)
        .status();
  }
  Status RouteSamples(const SlotView& slot, BatchBuffers& set);
  // The number of samples nvJPEG decoded.
  Result<size_t> DecodeOnGpu(const SlotView& slot, BatchBuffers& set, int state);
  Status UploadCpuDecoded(const SlotView& slot, BatchBuffers& set);
  // The number of samples kept (written to positions 0..kept-1).
  Result<uint32_t> LaunchAugment(const SlotView& slot, BatchBuffers& set);

  const std::unique_ptr<ImageDataset> dataset_;
  cuda::AugmentParams params_;
  const int device_;
  const std::unique_ptr<cuda::NvJpegDecoder> decoder_;
  ThreadPool pool_;
  CpuFileCache cache_;  // Note [CPU-decoded file cache]
  SampleRouter router_;
  const uint64_t gpu_files_;
  BatchBuffers sets_[2];  // nvJPEG decode state k works for sets_[k]
  int next_set_ = 0;
  FilePrefetcher prefetcher_;  // writes sets_[k].files: declared after sets_
  // Counters, read by counters() on other threads.
  std::atomic<int64_t> gpu_decoded_{0};
  std::atomic<int64_t> cpu_decoded_{0};
  std::atomic<int64_t> gpu_batch_failures_{0};
};

Result<uint32_t> CudaImageSource::FillBatch(const SlotView& slot, const ReadAhead& next) {
  if (slot.device.kind != MemoryKind::kCuda || slot.device.index != device_ ||
      slot.field_data.size() != 2) {
    return InternalError("CudaImageSource writes only device slots of cuda:" +
                         std::to_string(device_));
  }
  const int state = next_set_;
  BatchBuffers& set = sets_[state];
  next_set_ ^= 1;
  // The files of this batch were (most likely) read during the last call;
  // the next batch's are read while this one decodes.
  prefetcher_.Wait();
  prefetcher_.Start(&sets_[next_set_].files, next.indices);
  // The previous batch that used this set is done with its buffers.
  BATCHCAST_RETURN_IF_ERROR(set.done.Synchronize());
  const size_t n = slot.count();
  if (set.files.size() < n) set.files.resize(n);
  if (set.samples.size() < n) set.samples.resize(n);

  BATCHCAST_RETURN_IF_ERROR(RouteSamples(slot, set));
  BATCHCAST_ASSIGN_OR_RETURN(const size_t gpu_decoded, DecodeOnGpu(slot, set, state));
  const auto cpu_decoded = std::count_if(set.samples.begin(), set.samples.begin() + n,
                                         [](const GpuSample& s) { return DecodedOnCpu(s.route); });
  BATCHCAST_RETURN_IF_ERROR(UploadCpuDecoded(slot, set));
  BATCHCAST_ASSIGN_OR_RETURN(const uint32_t kept, LaunchAugment(slot, set));
  gpu_decoded_.fetch_add(static_cast<int64_t>(gpu_decoded));
  cpu_decoded_.fetch_add(static_cast<int64_t>(cpu_decoded));
  return kept;
}

// Stage 1.
Status CudaImageSource::RouteSamples(const SlotView& slot, BatchBuffers& set) {
  return pool_.TryParallelFor(static_cast<int64_t>(slot.count()), [&](int worker, int64_t i) {
    return Route(worker, slot, set, static_cast<size_t>(i), /*force_cpu=*/false);
  });
}

// Stage 2.
Result<size_t> CudaImageSource::DecodeOnGpu(const SlotView& slot, BatchBuffers& set, int state) {
  std::vector<size_t> gpu_ids;
  size_t arena_bytes = 0;
  for (size_t i = 0; i < slot.count(); ++i) {
    GpuSample& s = set.samples[i];
    if (s.route != DecodeRoute::kNvJpeg) continue;
    const image::JpegInfo& info = dataset_->file(slot.indices[i]).info;
    s.offset = arena_bytes;
    arena_bytes += AlignUp(static_cast<size_t>(info.width) * 3 * static_cast<size_t>(info.height));
    gpu_ids.push_back(i);
  }
  if (gpu_ids.empty()) return size_t{0};
  BATCHCAST_RETURN_IF_ERROR(Grow(set.arena, device_, arena_bytes));
  std::vector<std::span<const uint8_t>> jpegs;
  std::vector<cuda::NvJpegDecoder::Output> outputs;
  for (size_t i : gpu_ids) {
    const std::vector<uint8_t>& bytes = set.files[i].bytes;
    const image::JpegInfo& info = dataset_->file(slot.indices[i]).info;
    jpegs.emplace_back(bytes.data(), bytes.size());
    outputs.push_back(
        {set.arena.data() + set.samples[i].offset, static_cast<size_t>(info.width) * 3});
  }
  const Status st = decoder_->DecodeBatch(state, jpegs, outputs, slot.stream);
  if (st.ok()) return gpu_ids.size();
  if (st.code() != StatusCode::kDataLoss) return st;
  // A file nvJPEG rejects spoils its batch: decode this batch on the CPU.
  gpu_batch_failures_.fetch_add(1);
  BC_LOG_WARN("nvJPEG rejected a batch ({}); decoding its {} files on the CPU", st.message(),
              gpu_ids.size());
  BATCHCAST_RETURN_IF_ERROR(
      pool_.TryParallelFor(static_cast<int64_t>(gpu_ids.size()), [&](int worker, int64_t k) {
        return Route(worker, slot, set, gpu_ids[static_cast<size_t>(k)], /*force_cpu=*/true);
      }));
  return size_t{0};
}

// Stage 3.
Status CudaImageSource::UploadCpuDecoded(const SlotView& slot, BatchBuffers& set) {
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

// Stage 4: sample i goes to position `kept` (the samples before it that were
// not dropped), and slot.indices[kept] names it.
Result<uint32_t> CudaImageSource::LaunchAugment(const SlotView& slot, BatchBuffers& set) {
  const size_t n = slot.count();
  const size_t desc_bytes = AlignUp(n * sizeof(cuda::AugmentSample));
  const size_t label_bytes = n * sizeof(int64_t);
  BATCHCAST_RETURN_IF_ERROR(Grow(set.host_desc, desc_bytes + label_bytes));
  BATCHCAST_RETURN_IF_ERROR(Grow(set.dev_desc, device_, desc_bytes));
  auto* desc = reinterpret_cast<cuda::AugmentSample*>(set.host_desc.data());
  auto* labels = reinterpret_cast<int64_t*>(set.host_desc.data() + desc_bytes);
  uint32_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const GpuSample& s = set.samples[i];
    if (s.route == DecodeRoute::kDropped) continue;
    const int64_t index = slot.indices[i];
    const ImageDataset::File& f = dataset_->file(index);
    const image::DecodePlan& plan = s.plan.decode;
    cuda::AugmentSample& d = desc[kept];
    d = cuda::AugmentSample{};
    if (ReadsFullImage(s.route)) {
      d.src = s.route == DecodeRoute::kNvJpeg ? set.arena.data() + s.offset : cache_.image(index);
      d.pitch = static_cast<int64_t>(f.info.width) * 3;
      d.src_w = f.info.width;
      d.src_h = f.info.height;
      d.box = plan.scale_denom;
      d.rect_x = plan.rect.x;
      d.rect_y = plan.rect.y;
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

}  // namespace

Result<std::unique_ptr<Source>> MakeCudaImageSource(const SourceOptions& options) {
  if (!cuda::BuiltWithCuda() || !cuda::BuiltWithNvJpeg()) {
    return UnavailableError(std::string("this build of batchcast has no ") +
                            (cuda::BuiltWithCuda() ? "nvJPEG" : "CUDA support") +
                            " for --decode gpu");
  }
  BATCHCAST_CHECK(options.device.is_cuda());
  const int device = options.device.index;
  // Bad transform options are reported before the device is looked at.
  BATCHCAST_RETURN_IF_ERROR(MakeTransformOptions(options).status());
  BATCHCAST_RETURN_IF_ERROR(
      cuda::CheckDevice(device).WithContext("--device " + DeviceName(options.device)));
  BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<cuda::NvJpegDecoder> decoder,
                             cuda::NvJpegDecoder::Create(device, 2));
  // Scan every header (as the CPU path does) and decide where each file decodes.
  // CPU threads: the pipeline's own (decodes what the GPU cannot) and one that
  // reads the next batch's files; --workers sets the total.
  const int threads = options.workers > 0 ? options.workers : 2;
  using CS = image::JpegInfo::ColorSpace;
  BATCHCAST_ASSIGN_OR_RETURN(
      std::unique_ptr<ImageDataset> dataset,
      ImageDataset::Open(options, threads,
                         [&](const std::string& path, std::span<const uint8_t> header,
                             const image::JpegInfo& info) {
                           return !info.progressive &&
                                  (info.color == CS::kYCbCr || info.color == CS::kGray) &&
                                  decoder->Supports(header) && EndsWithEoi(path);
                         }));
  const uint64_t gpu = CountFlagged(*dataset);
  BC_LOG_INFO("{} files for {}, {} for the CPU decoder", gpu, decoder->backend_name(),
              dataset->size() - gpu);
  auto source =
      std::make_unique<CudaImageSource>(std::move(dataset), device, std::move(decoder), threads);
  BATCHCAST_RETURN_IF_ERROR(source->Init());
  return std::unique_ptr<Source>(std::move(source));
}

}  // namespace batchcast
