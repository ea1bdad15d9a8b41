#include "cuda_image_source.h"

#include <algorithm>
#include <atomic>

#include "augment_launch.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "core/src/logging.h"
#include "cpu_file_cache.h"
#include "cuda_batch_buffers.h"
#include "decode_route.h"
#include "eoi_probe.h"
#include "file_prefetcher.h"
#include "image_dataset.h"
#include "nvjpeg_batch.h"
#include "split_decode.h"
#include "stage_times.h"
#include "thread_pool.h"
#include "transcode_cache.h"

namespace batchcast {
namespace {

uint64_t CountFlagged(const ImageDataset& dataset) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < dataset.size(); ++i) n += dataset.file(static_cast<int64_t>(i)).flag;
  return n;
}

// FillBatch, on the pipeline thread:
//   1.+2. SplitDecoder::Decode (split_decode.h, Note [Concurrent fallback
//      decode] and Note [Fallback ahead]): the files the engine takes, found
//      read ahead (or read now), go to the nvJPEG hardware batch into the
//      arena; the other files were decoded on the CPU pool while the last
//      batch's hardware call was in flight, and the fallback decodes of the
//      next batch start now, beside this batch's hardware call; a refused
//      batch goes to the CPU.
//      The hardware batch is NvJpegBatch::Decode (nvjpeg_batch.h, Note
//      [Split hardware batch]).
//   3. AugmentLauncher::Upload (augment_launch.h): the CPU-decoded images
//      into pinned memory, one copy to the device, and new cache entries into
//      their places.
//   4. AugmentLauncher::Launch: one descriptor per sample kept and the
//      labels, then the fused kernel into the slot, then the set's `done`
//      event.
// Every device operation is queued on SlotView::stream, in that order, so the
// cache and arena writes precede the kernel that reads them. The next batch's
// fallback round and its read-ahead write only the other buffer set's host
// vectors (`files` at distinct positions, `samples`), sized before they start.
// With the device cache on, the fallback decodes run in their own batch
// (RunSplitDecode's way): whether a sample is a hardware candidate then
// depends on what the pipeline thread has put in the cache.
// Dropped samples (Note [Dropped files]): every failure is known after
// stage 2 (a read or CPU decode fails; nvJPEG itself fails whole
// batches only), so stage 4 gives the kept samples consecutive output
// positions (KeepInOrder: the kernel's `out` and the label copy) instead of
// moving data, and compacts SlotView::indices.
class CudaImageSource : public Source {
 public:
  // `workers` fallback decoders besides the pipeline thread; a device cache
  // of `cache_bytes` (0: none); one decoder per nvJPEG call of a hardware
  // batch (Note [Split hardware batch]); side streams at `priority` (Note
  // [Server stream priority]); hardware decodes of the crop's region only
  // when `regions` and the decoders take them (Note [Region decode]); the
  // next batch's files read on `read_threads` threads (file_prefetcher.h).
  CudaImageSource(std::shared_ptr<ImageDataset> dataset, int device,
                  std::vector<std::unique_ptr<cuda::NvJpegDecoder>> decoders, int workers,
                  size_t cache_bytes, size_t transcode_bytes, StreamPriority priority, bool regions,
                  int read_threads)
      : dataset_(std::move(dataset)),
        device_(device),
        priority_(priority),
        pool_(workers),
        stages_({{"read", 1 + workers},  // the pool and the read-ahead thread
                 {"hw_decode", 1},
                 {"fallback_decode", workers},
                 {"augment", 1},
                 {"gpu_wait", 2},  // the pipeline and the read-ahead thread
                 {"fallback_wait", 1}}),
        hw_(*dataset_, device, std::move(decoders), regions, &stages_,
            {.read = kRead, .gpu_wait = kGpuWait}),
        cache_(*dataset_, cache_bytes),
        // Transcoding needs the next batch's round (Note [Fallback ahead]).
        transcode_(dataset_->size(), cache_bytes == 0 ? transcode_bytes : 0),
        router_(*dataset_, cache_, pool_.size(), &transcode_,
                [d = &hw_.decoder()](std::span<const uint8_t> jpeg) { return d->Supports(jpeg); }),
        augment_(*dataset_, cache_, device),
        gpu_files_(CountFlagged(*dataset_)),
        fallback_ahead_(cache_bytes == 0),
        prefetcher_(*dataset_, true, &stages_, kRead, read_threads),
        split_(pool_, &stages_,
               {.read = kRead,
                .hw_decode = kHwDecode,
                .fallback_decode = kFallbackDecode,
                .fallback_wait = kFallbackWait}) {}

  ~CudaImageSource() override {
    prefetcher_.Stop();
    split_.Collect();
    for (BatchBuffers& s : sets_) {
      if (s.done.valid()) (void)s.done.Synchronize();
    }
  }

  Status Init() {
    for (BatchBuffers& s : sets_) {
      BATCHCAST_ASSIGN_OR_RETURN(s.done, cuda::Event::Create(device_, false, true));
      BATCHCAST_RETURN_IF_ERROR(hw_.InitBuffers(s, priority_));
    }
    return cache_.Allocate(device_);
  }

  // The start log lines of Note [CPU-decoded file cache] and Note
  // [Transcoded progressive files].
  void LogDeviceCache() const {
    if (transcode_.enabled()) {
      BC_LOG_INFO(
          "transcode cache: progressive JPEGs re-encoded as baseline for the hardware "
          "engine, up to {} MiB of host memory (--transcode-cache-mb)",
          transcode_.budget() >> 20);
    } else {
      BC_LOG_INFO("transcode cache: off ({})",
                  cache_.bytes() > 0 ? "the device cache is on" : "--transcode-cache-mb 0");
    }
    if (cache_.bytes() == 0) {
      BC_LOG_INFO("device cache of CPU-decoded files: off (--device-cache-mb 0)");
    } else {
      BC_LOG_INFO("device cache of CPU-decoded files: on, {} MiB for {} of the {} CPU files",
                  cache_.bytes() >> 20, cache_.places(), dataset_->size() - gpu_files_);
    }
  }

  uint64_t size() const override { return dataset_->size(); }
  std::vector<uint64_t> sample_groups() const override { return dataset_->sample_groups(); }
  uint64_t listing_digest() const override { return dataset_->ListingDigest(); }
  Status SaveListing(const std::string& path) const override { return dataset_->SaveListing(path); }
  Status DroppedElsewhere(std::span<const int64_t> indices) override {
    return dataset_->DroppedElsewhere(indices);
  }
  MemoryKind output_memory() const override { return MemoryKind::kCuda; }
  std::vector<FieldSpec> fields() const override { return dataset_->fields(MemoryKind::kCuda); }

  std::string description() const override {
    return dataset_->Describe(
        hw_.decoder().backend_name() +
        (hw_.calls() > 1 ? " (" + std::to_string(hw_.calls()) + " calls per batch)"
                         : std::string()) +
        " on cuda:" + std::to_string(device_) +
        (priority_ == StreamPriority::kHigh ? " (high-priority streams)" : "") +
        (hw_.regions() ? ", crop regions" : ", whole images") + ", " +
        std::to_string(dataset_->size() - gpu_files_) + " files decoded on the CPU, device cache " +
        (cache_.bytes() > 0 ? std::to_string(cache_.bytes() >> 20) + " MiB" : std::string("off")) +
        ", transcode cache " +
        (transcode_.enabled() ? std::to_string(transcode_.budget() >> 20) + " MiB"
                              : std::string("off")));
  }

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    std::vector<std::pair<std::string, int64_t>> out = dataset_->counters();
    out.insert(out.end(), {{"files_gpu_decodable", static_cast<int64_t>(gpu_files_)},
                           {"gpu_decoded", gpu_decoded_.load()},
                           {"cpu_decoded", cpu_decoded_.load()},
                           {"gpu_batch_failures", gpu_batch_failures_.load()},
                           {"device_cache_on", cache_.bytes() > 0 ? 1 : 0},
                           {"cpu_file_cache_bytes", static_cast<int64_t>(cache_.bytes())},
                           {"cpu_file_cache_hits", cache_.hits()},
                           {"transcoded", router_.transcoded()},
                           {"transcode_cache_files", transcode_.files()},
                           {"transcode_cache_bytes", static_cast<int64_t>(transcode_.bytes())},
                           {"transcode_cache_hits", transcode_.hits()},
                           {"transcode_refused", transcode_.refused_files()}});
    return out;
  }
  std::vector<std::string> dataset_counters() const override {
    std::vector<std::string> out = dataset_->counter_names();
    out.insert(out.end(), {"files_gpu_decodable", "device_cache_on"});
    return out;
  }
  std::vector<StageTime> stage_times() const override { return stages_.Read(); }
  void Cancel() override { dataset_->Cancel(); }

  Result<uint32_t> FillBatch(const SlotView& slot, const ReadAhead& next) override;

 private:
  // Stage indices of stages_ (docs/stats.md producer_stage_s).
  enum Stage : size_t { kRead, kHwDecode, kFallbackDecode, kAugment, kGpuWait, kFallbackWait };
  class BatchOps;

  // Shared with the sources of the server's other rings (MakeSources).
  const std::shared_ptr<ImageDataset> dataset_;
  const int device_;
  const StreamPriority priority_;
  ThreadPool pool_;  // the fallback decoders (worker 0: the calling thread)
  StageTimes stages_;
  NvJpegBatch hw_;            // stage 2's hardware batch (Note [Split hardware batch])
  CpuFileCache cache_;        // Note [CPU-decoded file cache]
  TranscodeCache transcode_;  // Note [Transcoded progressive files]
  SampleRouter router_;
  AugmentLauncher augment_;  // stages 3 and 4
  const uint64_t gpu_files_;
  BatchBuffers sets_[2];  // nvJPEG decode state k works for sets_[k]
  int next_set_ = 0;
  const bool fallback_ahead_;  // Note [Fallback ahead] (not with the device cache)
  FilePrefetcher prefetcher_;  // writes sets_[k].files: declared after sets_
  SplitDecoder split_;         // its rounds use the members above: declared last
  // Counters, read by counters() on other threads.
  std::atomic<int64_t> gpu_decoded_{0};
  std::atomic<int64_t> cpu_decoded_{0};
  std::atomic<int64_t> gpu_batch_failures_{0};
};

// The GPU source's side of Note [Concurrent fallback decode]: the samples of
// one batch, decoded into buffer set `state`.
class CudaImageSource::BatchOps : public SplitDecodeOps {
 public:
  // The batch in `slot`.
  BatchOps(CudaImageSource& source, const SlotView& slot, int state)
      : src_(source), slot_(&slot), epoch_(slot.epoch), indices_(slot.indices), state_(state) {}
  // The batch expected next (Note [Fallback ahead]): its fallback decodes only.
  BatchOps(CudaImageSource& source, uint32_t epoch, std::span<const int64_t> indices, int state)
      : src_(source),
        slot_(nullptr),
        epoch_(epoch),
        owned_(indices.begin(), indices.end()),
        indices_(owned_),
        state_(state) {}
  bool HardwareCandidate(size_t i) const override {
    const int64_t index = indices_[i];
    return src_.dataset_->file(index).flag ||
           (src_.cache_.has_place(index) && src_.cache_.holds(index));
  }
  Status Route(int worker, size_t i, RouteFor mode) override {
    BatchBuffers& set = src_.sets_[state_];
    return src_.router_.Route(worker, epoch_, indices_[i], set.files[i], set.samples[i], mode)
        .status();
  }
  Status DecodeHardware(std::span<const size_t> ids) override {
    if (slot_ == nullptr) return InternalError("a batch read ahead has no slot to decode into");
    return src_.hw_.Decode(*slot_, src_.sets_[state_], state_, ids);
  }
  const GpuSample& sample(size_t i) const override { return src_.sets_[state_].samples[i]; }
  uint64_t FallbackCost(size_t i) const override {
    const image::JpegInfo& info = src_.dataset_->file(indices_[i]).info;
    return static_cast<uint64_t>(info.width) * static_cast<uint64_t>(info.height);
  }

 private:
  CudaImageSource& src_;
  const SlotView* const slot_;
  const uint32_t epoch_;
  const std::vector<int64_t> owned_;
  const std::span<const int64_t> indices_;
  const int state_;
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
  BatchBuffers& ahead_set = sets_[next_set_];
  // The files of this batch were (most likely) read during the last call, and
  // its fallback decodes done (Note [Fallback ahead]); the next batch's are
  // read and decoded while this one decodes, into the other set, sized now.
  {
    // The read-ahead thread's reads and copies (Note [Pinned bitstreams]).
    StageTimes::Scope timed(&stages_, kRead);
    prefetcher_.Wait(slot.indices);
  }
  split_.Collect();
  const bool ahead = fallback_ahead_ && !next.indices.empty();
  std::vector<int64_t> reads(next.indices.begin(), next.indices.end());
  if (ahead) {
    if (ahead_set.files.size() < reads.size()) ahead_set.files.resize(reads.size());
    if (ahead_set.samples.size() < reads.size()) ahead_set.samples.resize(reads.size());
    for (int64_t& index : reads) {
      // The fallback round reads its own files.
      if (index >= 0 && static_cast<uint64_t>(index) < dataset_->size() &&
          !dataset_->file(index).flag) {
        index = -1;
      }
    }
  }
  // Note [Pinned bitstreams]: the thread then stages the hardware candidates.
  prefetcher_.Start(
      &ahead_set.files, reads,
      [this, &ahead_set](std::span<const int64_t> read) { hw_.StageFiles(ahead_set, read); },
      next.guess);
  {
    // The previous batch that used this set is done with its buffers.
    StageTimes::Scope timed(&stages_, kGpuWait);
    BATCHCAST_RETURN_IF_ERROR(set.done.Synchronize());
  }
  const size_t n = slot.count();
  if (set.files.size() < n) set.files.resize(n);
  if (set.samples.size() < n) set.samples.resize(n);

  BatchOps ops(*this, slot, state);
  AheadBatch ahead_batch;
  if (ahead) {
    ahead_batch.epoch = next.epoch;
    ahead_batch.indices.assign(next.indices.begin(), next.indices.end());
    ahead_batch.ops = std::make_unique<BatchOps>(*this, next.epoch, next.indices, next_set_);
  }
  BATCHCAST_ASSIGN_OR_RETURN(
      const SplitDecodeResult decoded,
      split_.Decode(BatchKey{slot.epoch, slot.indices}, ops, std::move(ahead_batch)));
  if (decoded.hw_refused) {
    gpu_batch_failures_.fetch_add(1);
    BC_LOG_WARN_LIMITED("nvJPEG rejected a batch ({}); decoded its files on the CPU",
                        decoded.hw_error.message());
  }
  StageTimes::Scope timed(&stages_, kAugment);
  BATCHCAST_RETURN_IF_ERROR(augment_.Upload(slot, set));
  BATCHCAST_ASSIGN_OR_RETURN(const uint32_t kept, augment_.Launch(slot, set));
  gpu_decoded_.fetch_add(static_cast<int64_t>(decoded.hw_decoded));
  cpu_decoded_.fetch_add(static_cast<int64_t>(decoded.cpu_decoded));
  return kept;
}

}  // namespace

Result<std::unique_ptr<Source>> MakeCudaImageSource(const SourceOptions& options,
                                                    DatasetShare* share) {
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
  std::vector<std::unique_ptr<cuda::NvJpegDecoder>> decoders;
  for (int c = 0; c < std::max(1, options.nvjpeg_calls); ++c) {
    BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<cuda::NvJpegDecoder> d,
                               cuda::NvJpegDecoder::Create(device));
    decoders.push_back(std::move(d));
  }
  cuda::NvJpegDecoder* const decoder = decoders.front().get();
  // Scan every header (as the CPU path does) and decide where each file decodes.
  // CPU threads: --workers fallback decoders (default 2) besides the
  // pipeline's own and the one that reads the next batch's files.
  const int workers = options.workers > 0 ? options.workers : 2;
  const int threads = workers + 1;
  using CS = image::JpegInfo::ColorSpace;
  const auto gpu_decodable = [&](const std::string& path, std::span<const uint8_t> header,
                                 bool whole, const image::JpegInfo& info) {
    return !info.progressive && (info.color == CS::kYCbCr || info.color == CS::kGray) &&
           decoder->Supports(header) && EndsWithEoi(path, header, whole);
  };
  BATCHCAST_ASSIGN_OR_RETURN(
      std::shared_ptr<ImageDataset> dataset, SharedDataset(share, [&](uint32_t readers) {
        return ImageDataset::Open(options, threads, gpu_decodable, nullptr, readers);
      }));
  const uint64_t gpu = CountFlagged(*dataset);
  BC_LOG_INFO("{} files for {}, {} for the CPU decoder ({} fallback threads beside it)", gpu,
              decoder->backend_name(), dataset->size() - gpu, workers);
  auto source = std::make_unique<CudaImageSource>(
      std::move(dataset), device, std::move(decoders), workers, options.device_cache_mb << 20,
      options.transcode_cache_mb << 20, options.gpu_priority, options.nvjpeg_region,
      options.read_threads);
  BATCHCAST_RETURN_IF_ERROR(source->Init());
  source->LogDeviceCache();
  return std::unique_ptr<Source>(std::move(source));
}

}  // namespace batchcast
