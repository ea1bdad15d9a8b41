#include "cuda_image_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "background_task.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/cuda_image/augment.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "core/src/logging.h"
#include "cpu_file_cache.h"
#include "cuda_batch_buffers.h"
#include "decode_route.h"
#include "file_prefetcher.h"
#include "image_dataset.h"
#include "split_decode.h"
#include "stage_times.h"
#include "thread_pool.h"
#include "transcode_cache.h"

namespace batchcast {
namespace {

// True when an EOI marker (FF D9) is among the file's last 32 bytes (encoders
// may pad after it). A truncated file has none and goes to the CPU decoder,
// which reports it (hardware decoders do not always).
bool EndsWithEoi(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4) return false;
  const std::span<const uint8_t> tail = bytes.last(std::min<size_t>(bytes.size(), 32));
  for (size_t i = 0; i + 1 < tail.size(); ++i) {
    if (tail[i] == 0xFF && tail[i + 1] == 0xD9) return true;
  }
  return false;
}

// The same for a file; `bytes` are its first bytes, all of them when `whole`
// (a sample in a tar shard always).
bool EndsWithEoi(const std::string& path, std::span<const uint8_t> bytes, bool whole) {
  if (whole) return EndsWithEoi(bytes);
  Result<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return false;
  const int fd = *opened;
  struct stat st {};
  bool found = false;
  if (fstat(fd, &st) == 0 && st.st_size >= 4) {
    uint8_t tail[32];
    const off_t n = std::min<off_t>(st.st_size, 32);
    if (pread(fd, tail, static_cast<size_t>(n), st.st_size - n) == n) {
      found = EndsWithEoi(std::span<const uint8_t>(tail, static_cast<size_t>(n)));
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

// FillBatch, on the pipeline thread:
//   1.+2. SplitDecoder::Decode (split_decode.h, Note [Concurrent fallback
//      decode] and Note [Fallback ahead]): the files the engine takes, found
//      read ahead (or read now), go to the nvJPEG hardware batch into the
//      arena; the other files were decoded on the CPU pool while the last
//      batch's hardware call was in flight, and the fallback decodes of the
//      next batch start now, beside this batch's hardware call; a refused
//      batch goes to the CPU.
//   3. UploadCpuDecoded: the CPU-decoded images into pinned memory, one copy
//      to the device, and new cache entries into their places.
//   4. LaunchAugment: one descriptor per sample kept and the labels, then the
//      fused kernel into the slot, then the set's `done` event.
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
  // when `regions` and the decoders take them (Note [Region decode]).
  CudaImageSource(std::unique_ptr<ImageDataset> dataset, int device,
                  std::vector<std::unique_ptr<cuda::NvJpegDecoder>> decoders, int workers,
                  size_t cache_bytes, size_t transcode_bytes, StreamPriority priority, bool regions)
      : dataset_(std::move(dataset)),
        device_(device),
        priority_(priority),
        decoders_(std::move(decoders)),
        decoder_(decoders_.front().get()),
        regions_(regions && decoder_->takes_regions()),
        pool_(workers),
        stages_({{"read", 1 + workers},  // the pool and the read-ahead thread
                 {"hw_decode", 1},
                 {"fallback_decode", workers},
                 {"augment", 1},
                 {"gpu_wait", 2},  // the pipeline and the read-ahead thread
                 {"fallback_wait", 1}}),
        cache_(*dataset_, cache_bytes),
        // Transcoding needs the next batch's round (Note [Fallback ahead]).
        transcode_(dataset_->size(), cache_bytes == 0 ? transcode_bytes : 0),
        router_(*dataset_, cache_, pool_.size(), &transcode_,
                [d = decoder_](std::span<const uint8_t> jpeg) { return d->Supports(jpeg); }),
        gpu_files_(CountFlagged(*dataset_)),
        fallback_ahead_(cache_bytes == 0),
        prefetcher_(*dataset_, true, &stages_, kRead),
        split_(pool_, &stages_,
               {.read = kRead,
                .hw_decode = kHwDecode,
                .fallback_decode = kFallbackDecode,
                .fallback_wait = kFallbackWait}) {
    const image::TransformOptions& t = dataset_->transform();
    params_.size = t.size;
    params_.dtype = t.dtype;
    params_.nchw = t.nchw;
    for (int c = 0; c < 3; ++c) {
      params_.mean[c] = t.mean[c];
      params_.std[c] = t.std[c];
    }
    for (size_t c = 1; c < decoders_.size(); ++c) {
      side_calls_.push_back(std::make_unique<BackgroundTask>());
    }
  }

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
      s.jpegs.resize(decoders_.size());
      s.outputs.resize(decoders_.size());
      for (size_t c = 1; c < decoders_.size(); ++c) {
        BATCHCAST_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(device_, priority_));
        BATCHCAST_ASSIGN_OR_RETURN(cuda::Event done, cuda::Event::Create(device_));
        s.side_streams.push_back(std::move(stream));
        s.side_done.push_back(std::move(done));
      }
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
  MemoryKind output_memory() const override { return MemoryKind::kCuda; }
  std::vector<FieldSpec> fields() const override { return dataset_->fields(MemoryKind::kCuda); }

  std::string description() const override {
    return dataset_->Describe(
        decoder_->backend_name() +
        (decoders_.size() > 1 ? " (" + std::to_string(decoders_.size()) + " calls per batch)"
                              : std::string()) +
        " on cuda:" + std::to_string(device_) +
        (priority_ == StreamPriority::kHigh ? " (high-priority streams)" : "") +
        (regions_ ? ", crop regions" : ", whole images") + ", " +
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
  std::vector<StageTime> stage_times() const override { return stages_.Read(); }
  void Cancel() override { dataset_->Cancel(); }

  Result<uint32_t> FillBatch(const SlotView& slot, const ReadAhead& next) override;

 private:
  // Stage indices of stages_ (docs/stats.md producer_stage_s).
  enum Stage : size_t { kRead, kHwDecode, kFallbackDecode, kAugment, kGpuWait, kFallbackWait };
  class BatchOps;

  // Submits nvJPEG's batched decode of the samples `ids` (routed kNvJpeg) of
  // `set` into its arena, on the slot's stream.
  Status DecodeOnGpu(const SlotView& slot, BatchBuffers& set, int state,
                     std::span<const size_t> ids);
  // Note [Pinned bitstreams]: on the read-ahead thread, after it read the
  // files `indices` into set.files.
  void StageFiles(BatchBuffers& set, std::span<const int64_t> indices);
  // Where sample i's file lies in set.staged; null when it was not staged.
  const BatchBuffers::StagedFile* Staged(const SlotView& slot, const BatchBuffers& set,
                                         size_t i) const;
  Status UploadCpuDecoded(const SlotView& slot, BatchBuffers& set);
  // The number of samples kept (written to positions 0..kept-1).
  Result<uint32_t> LaunchAugment(const SlotView& slot, BatchBuffers& set);

  const std::unique_ptr<ImageDataset> dataset_;
  cuda::AugmentParams params_;
  const int device_;
  const StreamPriority priority_;
  // One per nvJPEG call of a hardware batch; decoder_ is the first, which
  // also answers Supports().
  const std::vector<std::unique_ptr<cuda::NvJpegDecoder>> decoders_;
  cuda::NvJpegDecoder* const decoder_;
  const bool regions_;  // Note [Region decode]
  // The threads of calls 1.. (Note [Split hardware batch]).
  std::vector<std::unique_ptr<BackgroundTask>> side_calls_;
  ThreadPool pool_;  // the fallback decoders (worker 0: the calling thread)
  StageTimes stages_;
  CpuFileCache cache_;        // Note [CPU-decoded file cache]
  TranscodeCache transcode_;  // Note [Transcoded progressive files]
  SampleRouter router_;
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
    return src_.DecodeOnGpu(*slot_, src_.sets_[state_], state_, ids);
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
    prefetcher_.Wait();
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
  prefetcher_.Start(&ahead_set.files, reads, [this, &ahead_set](std::span<const int64_t> read) {
    StageFiles(ahead_set, read);
  });
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
  BATCHCAST_RETURN_IF_ERROR(UploadCpuDecoded(slot, set));
  BATCHCAST_ASSIGN_OR_RETURN(const uint32_t kept, LaunchAugment(slot, set));
  gpu_decoded_.fetch_add(static_cast<int64_t>(decoded.hw_decoded));
  cpu_decoded_.fetch_add(static_cast<int64_t>(decoded.cpu_decoded));
  return kept;
}

// Note [Split hardware batch]: nvjpegDecodeBatched with the hardware backend
// holds the calling thread for about the whole decode, and beside a trainer
// that time-slices the GPU with the server (MPS off) one call's decode took
// 3x as long as alone (benchmarks/RESULTS.md, "Where the time goes"). With
// --nvjpeg-calls k the batch's hardware files are cut into k consecutive
// runs, decoded at once by k decoders (own nvJPEG handle and states): run 0
// on the pipeline thread on the slot's stream, run c on side_calls_[c-1] on
// the set's side stream c-1, followed by its side_done event, which the
// slot's stream waits for before the kernel reads the arena. Every run writes
// its own arena ranges. A run nvJPEG refuses (DataLoss) spoils the batch as
// one call would: the caller decodes all its hardware files on the CPU; the
// slot's stream still waits for every side run submitted, so that the set's
// `done` event covers them (the set and the decoders' states are reused only
// after it).
// Measured on an H100 (benchmarks/RESULTS.md, "What couples a fed trainer to
// its server"): k = 2 raised the server's own rate by about 14 % for 0.9 more
// cores, and did not speed up a trainer the server feeds (the k calls stretch
// together beside it). Hence the default of 1.
//
// Note [Pinned bitstreams]: the hardware batch's files go to nvJPEG from
// page-locked memory. nvJPEG copies each file to the device between two of
// its per-image waits on the GPU; that copy held the calling thread 9-13 us
// per image from pageable memory and 3-7 us from page-locked memory, and
// decode-only on an H100 rose from 25.1k to 31.5k images/s (RESULTS.md,
// "nvJPEG waits once per image in every setting"). The copy into page-locked
// memory stays off the pipeline thread where it can: after the read-ahead
// thread has read the next batch's files (FilePrefetcher::Start's `then`), it
// copies the hardware candidates among them into the set's `staged` buffer
// (StageFiles); DecodeOnGpu copies only the others (files read or transcoded
// on the pipeline thread) into `bitstreams`. nvJPEG may still be reading the
// last files when DecodeBatch returns, so both buffers of a set are
// rewritten only after its `done` event, like the arena: the read-ahead
// thread synchronizes with it before it writes `staged` (the event was
// recorded by the set's last FillBatch, which returned before this read
// started, and is recorded again only after Wait()).
void CudaImageSource::StageFiles(BatchBuffers& set, std::span<const int64_t> indices) {
  set.staged_at.assign(indices.size(), BatchBuffers::StagedFile{});
  auto stageable = [&](size_t i) {
    const int64_t index = indices[i];
    return index >= 0 && set.files[i].index == index && dataset_->file(index).flag;
  };
  size_t bytes = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (stageable(i)) bytes += set.files[i].bytes.size();
  }
  if (bytes == 0) return;
  // On a failure nothing is staged: DecodeOnGpu copies the files itself, and
  // the pipeline thread meets the error again.
  {
    StageTimes::Scope timed(&stages_, kGpuWait);
    if (!set.done.Synchronize().ok()) return;
  }
  StageTimes::Scope timed(&stages_, kRead);
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

const BatchBuffers::StagedFile* CudaImageSource::Staged(const SlotView& slot,
                                                        const BatchBuffers& set, size_t i) const {
  if (i >= set.staged_at.size()) return nullptr;
  const BatchBuffers::StagedFile& s = set.staged_at[i];
  // The same file in set.files too. Its bytes were not replaced by a
  // transcode: only files the engine refuses (flag false) are transcoded, and
  // StageFiles stages flagged files only.
  const bool same = s.index >= 0 && s.index == slot.indices[i] && set.files[i].index == s.index &&
                    set.files[i].bytes.size() == s.size;
  return same ? &s : nullptr;
}

Status CudaImageSource::DecodeOnGpu(const SlotView& slot, BatchBuffers& set, int state,
                                    std::span<const size_t> ids) {
  size_t arena_bytes = 0, file_bytes = 0;
  for (size_t i : ids) {
    const image::JpegInfo& info = dataset_->file(slot.indices[i]).info;
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
  const std::vector<size_t> keep = KeepInOrder(std::span<const GpuSample>(set.samples.data(), n));
  uint32_t kept = 0;
  for (size_t i : keep) {
    const GpuSample& s = set.samples[i];
    const int64_t index = slot.indices[i];
    const ImageDataset::File& f = dataset_->file(index);
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
  BATCHCAST_ASSIGN_OR_RETURN(
      std::unique_ptr<ImageDataset> dataset,
      ImageDataset::Open(options, threads,
                         [&](const std::string& path, std::span<const uint8_t> header, bool whole,
                             const image::JpegInfo& info) {
                           return !info.progressive &&
                                  (info.color == CS::kYCbCr || info.color == CS::kGray) &&
                                  decoder->Supports(header) && EndsWithEoi(path, header, whole);
                         }));
  const uint64_t gpu = CountFlagged(*dataset);
  BC_LOG_INFO("{} files for {}, {} for the CPU decoder ({} fallback threads beside it)", gpu,
              decoder->backend_name(), dataset->size() - gpu, workers);
  auto source = std::make_unique<CudaImageSource>(
      std::move(dataset), device, std::move(decoders), workers, options.device_cache_mb << 20,
      options.transcode_cache_mb << 20, options.gpu_priority, options.nvjpeg_region);
  BATCHCAST_RETURN_IF_ERROR(source->Init());
  source->LogDeviceCache();
  return std::unique_ptr<Source>(std::move(source));
}

}  // namespace batchcast
