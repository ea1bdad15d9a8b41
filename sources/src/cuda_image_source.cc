#include "cuda_image_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "batchcast/cuda_image/augment.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/image/transform.h"
#include "batchcast/core/logging.h"
#include "image_source.h"
#include "thread_pool.h"

namespace batchcast {
namespace {

constexpr size_t kAlign = 256;
// Device memory for the decoded images of files the GPU cannot decode (see
// Note [CPU-decoded file cache]).
constexpr size_t kFallbackCacheBytes = size_t{1} << 30;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// True when an EOI marker (FF D9) is among the file's last 32 bytes (encoders
// may pad after it). A truncated file has none and goes to the CPU decoder,
// which reports it (hardware decoders do not always).
bool EndsWithEoi(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
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

struct Entry {
  ImageEntry file;
  int width = 0;
  int height = 0;
  bool gpu = false;  // decoded by nvJPEG
};

class CudaImageSource : public Source {
 public:
  CudaImageSource(std::vector<Entry> entries, image::TransformOptions transform, int device,
                  std::unique_ptr<cuda::NvJpegDecoder> decoder, int threads, bool fail_on_error,
                  std::string root, uint64_t dropped)
      : entries_(std::move(entries)),
        transform_(transform),
        device_(device),
        decoder_(std::move(decoder)),
        pool_(std::max(1, threads - 1)),
        cpu_decoders_(static_cast<size_t>(std::max(1, threads - 1))),
        fail_on_error_(fail_on_error),
        root_(std::move(root)),
        dropped_(dropped) {
    params_.size = transform_.size;
    params_.dtype = transform_.dtype;
    params_.nchw = transform_.nchw;
    for (int c = 0; c < 3; ++c) {
      params_.mean[c] = transform_.mean[c];
      params_.std[c] = transform_.std[c];
    }
    for (const Entry& e : entries_) gpu_files_ += e.gpu ? 1 : 0;
    // Note [CPU-decoded file cache]: places for the first files (in index
    // order) the GPU cannot decode, while the budget lasts.
    cache_offset_.assign(entries_.size(), -1);
    cached_.assign(entries_.size(), 0);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].gpu) continue;
      const size_t bytes = AlignUp(size_t(entries_[i].width) * entries_[i].height * 3);
      if (cache_bytes_ + bytes > kFallbackCacheBytes) continue;
      cache_offset_[i] = static_cast<int64_t>(cache_bytes_);
      cache_bytes_ += bytes;
    }
    if (threads > 1) prefetcher_ = std::thread([this] { PrefetchLoop(); });
  }

  ~CudaImageSource() override {
    {
      std::lock_guard lock(prefetch_mu_);
      prefetch_stop_ = true;
    }
    prefetch_cv_.notify_all();
    if (prefetcher_.joinable()) prefetcher_.join();
    for (Set& s : sets_) {
      if (s.done.valid()) (void)s.done.Synchronize();
    }
  }

  Status Init() {
    for (Set& s : sets_) {
      BATCHCAST_ASSIGN_OR_RETURN(s.done, cuda::Event::Create(device_, false, true));
    }
    if (cache_bytes_ > 0) {
      BATCHCAST_ASSIGN_OR_RETURN(cache_, cuda::DeviceBuffer::Create(device_, cache_bytes_));
    }
    return Status::Ok();
  }

  uint64_t size() const override { return entries_.size(); }
  MemoryKind output_memory() const override { return MemoryKind::kCuda; }

  std::vector<FieldSpec> fields() const override {
    const int64_t s = transform_.size;
    std::vector<int64_t> shape = transform_.nchw ? std::vector<int64_t>{3, s, s}
                                                 : std::vector<int64_t>{s, s, 3};
    return {FieldSpec{"image", transform_.dtype, shape, MemoryKind::kCuda},
            FieldSpec{"label", DType::kInt64, {}, MemoryKind::kCuda}};
  }

  std::string description() const override {
    return "image dataset " + root_ + " (" + std::to_string(entries_.size()) + " files, " +
           (transform_.kind == image::TransformOptions::Kind::kTrain ? "train" : "eval") + " " +
           std::to_string(transform_.size) + " " + std::string(DTypeName(transform_.dtype)) +
           ", " + decoder_->backend_name() + " on cuda:" + std::to_string(device_) + ", " +
           std::to_string(entries_.size() - gpu_files_) + " files decoded on the CPU)";
  }

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return {{"files", static_cast<int64_t>(entries_.size())},
            {"files_dropped_at_scan", static_cast<int64_t>(dropped_)},
            {"files_gpu_decodable", static_cast<int64_t>(gpu_files_)},
            {"decode_errors", decode_errors_.load()},
            {"gpu_decoded", gpu_decoded_.load()},
            {"cpu_decoded", cpu_decoded_.load()},
            {"gpu_batch_failures", gpu_batch_failures_.load()},
            {"cpu_file_cache_bytes", static_cast<int64_t>(cache_bytes_)},
            {"cpu_file_cache_hits", cache_hits_.load()}};
  }

  Status FillBatch(const SlotView& target, const ReadAhead& next) override;

 private:
  // One sample's state inside a batch.
  struct Sample {
    std::vector<uint8_t> bytes;    // the file
    int64_t bytes_index = -1;      // the dataset index whose file `bytes` holds (prefetch)
    bool gpu = false;              // decode with nvJPEG
    bool cached = false;           // read the full image from the CPU-decoded file cache
    bool fill_cache = false;       // `decoded` is the full image: upload it into the cache
    std::vector<uint8_t> decoded;  // CPU decode: RGB crop at scale 1/box
    image::CropParams crop;
    image::DecodePlan plan;        // for GPU samples: box + rect in scaled pixels
    int dec_w = 0;                 // CPU decode: decoded rect size
    int dec_h = 0;
    size_t offset = 0;             // in the set's device arena (GPU) or upload buffer (CPU)
    Status status;
  };
  // Buffers of one batch in flight; two sets alternate.
  struct Set {
    std::vector<Sample> samples;
    cuda::DeviceBuffer arena;      // nvJPEG outputs
    cuda::PinnedBuffer upload;     // CPU-decoded crops, then copied to `uploaded`
    cuda::DeviceBuffer uploaded;
    cuda::PinnedBuffer host_desc;  // AugmentSample[n] then int64 labels[n]
    cuda::DeviceBuffer dev_desc;
    cuda::Event done;              // after the kernel and copies that read the set
  };

  // Reads sample i's file (replacing the index on a bad file) and, for files
  // the GPU does not take, decodes its crop on the CPU.
  Status Prepare(int worker, uint32_t epoch, int64_t& index, Sample& s, bool force_cpu);
  Status DecodeOnCpu(int worker, uint32_t epoch, int64_t index, Sample& s);
  image::CropParams CropOf(uint32_t epoch, int64_t index, int width, int height) const {
    return transform_.kind == image::TransformOptions::Kind::kTrain
               ? image::TrainCrop(transform_, epoch, index, width, height)
               : image::EvalCrop(transform_, width, height);
  }
  void ReportOnce(const std::string& path, const Status& s) {
    decode_errors_.fetch_add(1);
    std::lock_guard lock(warned_mu_);
    if (warned_.insert(path).second) {
      BC_LOG_WARN("skipping {}: {} (a neighbouring sample stands in)", path, s.message());
    }
  }
  static Status Grow(cuda::DeviceBuffer& b, int device, size_t bytes) {
    if (b.size() >= bytes) return Status::Ok();
    b = cuda::DeviceBuffer();
    BATCHCAST_ASSIGN_OR_RETURN(b, cuda::DeviceBuffer::Create(device, bytes + bytes / 4));
    return Status::Ok();
  }
  static Status Grow(cuda::PinnedBuffer& b, size_t bytes) {
    if (b.size() >= bytes) return Status::Ok();
    b = cuda::PinnedBuffer();
    BATCHCAST_ASSIGN_OR_RETURN(b, cuda::PinnedBuffer::Create(bytes + bytes / 4));
    return Status::Ok();
  }

  void PrefetchLoop();
  // Starts reading the files of `indices` into set `set` on the prefetch thread.
  void StartPrefetch(int set, std::span<const int64_t> indices);
  void WaitPrefetch();

  std::vector<Entry> entries_;
  image::TransformOptions transform_;
  cuda::AugmentParams params_;
  int device_;
  std::unique_ptr<cuda::NvJpegDecoder> decoder_;
  ThreadPool pool_;
  std::vector<image::JpegDecoder> cpu_decoders_;
  bool fail_on_error_;
  std::string root_;
  uint64_t dropped_;
  uint64_t gpu_files_ = 0;
  Set sets_[2];
  int next_set_ = 0;
  // Note [CPU-decoded file cache]
  // Files the GPU cannot decode (progressive, CMYK, ...) cost milliseconds of
  // CPU each, every epoch: about 5% of an ImageNet-like dataset would take
  // more than the 2 CPU threads the GPU path may use. So the first time such
  // a file is used, it is decoded whole (libjpeg-turbo) and kept, as RGB, in a
  // device buffer of at most kFallbackCacheBytes (places assigned in index
  // order at start; files beyond the budget are decoded every time, cropped
  // and DCT-scaled like the CPU path). Later uses read it from there like an
  // nvJPEG output. The decoded image of a file never changes, so the cache
  // needs no invalidation; it is written on the producer stream before the
  // kernels that read it, and only from the pipeline thread.
  cuda::DeviceBuffer cache_;
  size_t cache_bytes_ = 0;
  std::vector<int64_t> cache_offset_;  // per entry, -1: not cached
  std::vector<uint8_t> cached_;        // per entry: the cache holds it
  std::atomic<int64_t> cache_hits_{0};
  // The prefetch thread: reads the next batch's files while this one decodes.
  std::thread prefetcher_;
  std::mutex prefetch_mu_;
  std::condition_variable prefetch_cv_;
  bool prefetch_stop_ = false;
  bool prefetch_busy_ = false;
  int prefetch_set_ = 0;
  std::vector<int64_t> prefetch_indices_;
  std::atomic<int64_t> decode_errors_{0};
  std::atomic<int64_t> gpu_decoded_{0};
  std::atomic<int64_t> cpu_decoded_{0};
  std::atomic<int64_t> gpu_batch_failures_{0};
  std::mutex warned_mu_;
  std::set<std::string> warned_;
};

Status CudaImageSource::DecodeOnCpu(int worker, uint32_t epoch, int64_t index, Sample& s) {
  image::JpegDecoder& dec = cpu_decoders_[static_cast<size_t>(worker)];
  BATCHCAST_ASSIGN_OR_RETURN(image::JpegInfo info,
                             dec.ReadHeader(s.bytes, image::EffectiveMaxPixels(transform_)));
  s.crop = CropOf(epoch, index, info.width, info.height);
  s.plan = image::PlanDecode(info.width, info.height, s.crop, transform_.size);
  BATCHCAST_ASSIGN_OR_RETURN(image::DecodedImage img,
                             dec.Decode(s.plan.scale_denom, s.plan.rect, /*gray_as_rgb=*/true));
  s.dec_w = img.width;
  s.dec_h = img.height;
  const size_t row = static_cast<size_t>(img.width) * 3;
  s.decoded.resize(row * static_cast<size_t>(img.height));
  for (int y = 0; y < img.height; ++y) {
    std::memcpy(s.decoded.data() + row * y, img.data + img.stride * y, row);
  }
  s.gpu = false;
  return Status::Ok();
}

Status CudaImageSource::Prepare(int worker, uint32_t epoch, int64_t& index, Sample& s,
                                bool force_cpu) {
  s.cached = s.fill_cache = s.gpu = false;
  for (int attempt = 0; attempt < 64; ++attempt) {
    const Entry& e = entries_[static_cast<size_t>(index)];
    const int64_t cache_at = force_cpu ? -1 : cache_offset_[static_cast<size_t>(index)];
    if (cache_at >= 0 && cached_[static_cast<size_t>(index)]) {
      s.cached = true;
      cache_hits_.fetch_add(1, std::memory_order_relaxed);
    }
    Status st;
    if (!s.cached && s.bytes_index != index) st = ReadFileBytes(e.file.path, s.bytes);
    s.bytes_index = st.ok() ? index : -1;
    if (st.ok() && (s.cached || (e.gpu && !force_cpu))) {
      s.gpu = !s.cached;
      s.crop = CropOf(epoch, index, e.width, e.height);
      s.plan = image::PlanDecode(e.width, e.height, s.crop, transform_.size);
      return Status::Ok();
    }
    if (st.ok() && cache_at >= 0) {
      // First use of a cacheable file: decode it whole, for the cache.
      image::JpegDecoder& dec = cpu_decoders_[static_cast<size_t>(worker)];
      Result<image::DecodedImage> img = dec.DecodeRgb(s.bytes, image::EffectiveMaxPixels(transform_));
      if (img.ok() && (img->width != e.width || img->height != e.height || img->channels != 3)) {
        img = DataLossError("decoded size differs from the header's");
      }
      if (img.ok()) {
        const size_t row = size_t(img->width) * 3;
        s.decoded.resize(row * size_t(img->height));
        for (int y = 0; y < img->height; ++y) {
          std::memcpy(s.decoded.data() + row * y, img->data + img->stride * y, row);
        }
        s.fill_cache = true;
        s.crop = CropOf(epoch, index, e.width, e.height);
        s.plan = image::PlanDecode(e.width, e.height, s.crop, transform_.size);
        return Status::Ok();
      }
      st = img.status();
    }
    if (st.ok()) st = DecodeOnCpu(worker, epoch, index, s);
    if (st.ok()) return Status::Ok();
    if (fail_on_error_) {
      return Status(st.code(), e.file.path + ": " + st.message() + " (--on-error fail)");
    }
    ReportOnce(e.file.path, st);
    index = (index + 1) % static_cast<int64_t>(entries_.size());
  }
  return DataLossError("64 consecutive files failed to decode; giving up");
}

void CudaImageSource::PrefetchLoop() {
  std::unique_lock lock(prefetch_mu_);
  while (true) {
    prefetch_cv_.wait(lock, [&] { return prefetch_stop_ || prefetch_busy_; });
    if (prefetch_stop_) return;
    const int set = prefetch_set_;
    const std::vector<int64_t> indices = prefetch_indices_;
    lock.unlock();
    std::vector<Sample>& samples = sets_[set].samples;
    if (samples.size() < indices.size()) samples.resize(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t index = indices[i];
      Sample& s = samples[i];
      if (index < 0 || static_cast<size_t>(index) >= entries_.size()) continue;
      s.bytes_index = ReadFileBytes(entries_[static_cast<size_t>(index)].file.path, s.bytes).ok()
                          ? index
                          : -1;
    }
    lock.lock();
    prefetch_busy_ = false;
    prefetch_cv_.notify_all();
  }
}

void CudaImageSource::StartPrefetch(int set, std::span<const int64_t> indices) {
  if (!prefetcher_.joinable() || indices.empty()) return;
  std::lock_guard lock(prefetch_mu_);
  prefetch_set_ = set;
  prefetch_indices_.assign(indices.begin(), indices.end());
  prefetch_busy_ = true;
  prefetch_cv_.notify_all();
}

void CudaImageSource::WaitPrefetch() {
  std::unique_lock lock(prefetch_mu_);
  prefetch_cv_.wait(lock, [&] { return !prefetch_busy_; });
}

Status CudaImageSource::FillBatch(const SlotView& target, const ReadAhead& next) {
  if (target.device.kind != MemoryKind::kCuda || target.device.index != device_ ||
      target.field_data.size() != 2) {
    return InternalError("CudaImageSource writes only device slots of cuda:" +
                         std::to_string(device_));
  }
  Set& set = sets_[next_set_];
  const int state = next_set_;
  next_set_ ^= 1;
  // The files of this batch were (most likely) read during the last call;
  // the next batch's are read while this one decodes.
  WaitPrefetch();
  StartPrefetch(next_set_, next.indices);
  // The previous batch that used this set is done with its buffers.
  BATCHCAST_RETURN_IF_ERROR(set.done.Synchronize());
  const size_t n = target.indices.size();
  if (set.samples.size() < n) set.samples.resize(n);
  const CudaStreamRef stream = target.stream;

  // 1. Read files; CPU-decode those the GPU does not take.
  std::atomic<bool> failed{false};
  Status first_error;
  std::mutex mu;
  pool_.ParallelFor(static_cast<int64_t>(n), [&](int worker, int64_t i) {
    if (failed.load(std::memory_order_relaxed)) return;
    Sample& s = set.samples[static_cast<size_t>(i)];
    Status st = Prepare(worker, target.epoch, target.indices[static_cast<size_t>(i)], s, false);
    if (!st.ok()) {
      std::lock_guard lock(mu);
      if (first_error.ok()) first_error = std::move(st);
      failed = true;
    }
  });
  BATCHCAST_RETURN_IF_ERROR(first_error);

  // 2. nvJPEG batched decode of the GPU samples into the arena.
  std::vector<std::span<const uint8_t>> jpegs;
  std::vector<cuda::NvJpegDecoder::Output> outputs;
  std::vector<size_t> gpu_ids;
  size_t arena_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    Sample& s = set.samples[i];
    if (!s.gpu) continue;
    const Entry& e = entries_[static_cast<size_t>(target.indices[i])];
    s.offset = arena_bytes;
    arena_bytes += AlignUp(static_cast<size_t>(e.width) * 3 * static_cast<size_t>(e.height));
    gpu_ids.push_back(i);
  }
  if (!gpu_ids.empty()) {
    BATCHCAST_RETURN_IF_ERROR(Grow(set.arena, device_, arena_bytes));
    for (size_t i : gpu_ids) {
      const Sample& s = set.samples[i];
      const Entry& e = entries_[static_cast<size_t>(target.indices[i])];
      jpegs.emplace_back(s.bytes.data(), s.bytes.size());
      outputs.push_back({set.arena.data() + s.offset, static_cast<size_t>(e.width) * 3});
    }
    Status st = decoder_->DecodeBatch(state, jpegs, outputs, stream);
    if (!st.ok()) {
      if (st.code() != StatusCode::kDataLoss) return st;
      // A file nvJPEG rejects spoils its batch: decode this batch on the CPU.
      gpu_batch_failures_.fetch_add(1);
      BC_LOG_WARN("nvJPEG rejected a batch ({}); decoding its {} files on the CPU", st.message(),
                  gpu_ids.size());
      pool_.ParallelFor(static_cast<int64_t>(gpu_ids.size()), [&](int worker, int64_t k) {
        if (failed.load(std::memory_order_relaxed)) return;
        const size_t i = gpu_ids[static_cast<size_t>(k)];
        Status s2 = Prepare(worker, target.epoch, target.indices[i], set.samples[i], true);
        if (!s2.ok()) {
          std::lock_guard lock(mu);
          if (first_error.ok()) first_error = std::move(s2);
          failed = true;
        }
      });
      BATCHCAST_RETURN_IF_ERROR(first_error);
      gpu_ids.clear();
    }
  }

  // 3. Upload the CPU-decoded crops (one copy) and new cache entries.
  int64_t cpu_decodes = 0;
  for (size_t i = 0; i < n; ++i) {
    cpu_decodes += set.samples[i].gpu || set.samples[i].cached ? 0 : 1;
  }
  size_t upload_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    Sample& s = set.samples[i];
    if (s.gpu || s.cached) continue;
    s.offset = upload_bytes;
    upload_bytes += AlignUp(s.decoded.size());
  }
  if (upload_bytes > 0) {
    BATCHCAST_RETURN_IF_ERROR(Grow(set.upload, upload_bytes));
    BATCHCAST_RETURN_IF_ERROR(Grow(set.uploaded, device_, upload_bytes));
    for (size_t i = 0; i < n; ++i) {
      Sample& s = set.samples[i];
      if (s.gpu || s.cached) continue;
      std::memcpy(set.upload.data() + s.offset, s.decoded.data(), s.decoded.size());
      if (s.fill_cache) {
        // Note [CPU-decoded file cache]: into its place, before the kernel.
        const size_t at = static_cast<size_t>(cache_offset_[static_cast<size_t>(target.indices[i])]);
        BATCHCAST_RETURN_IF_ERROR(cuda::CopyAsync(cache_.data() + at, set.upload.data() + s.offset,
                                                  s.decoded.size(), stream));
        cached_[static_cast<size_t>(target.indices[i])] = 1;
        s.cached = true;
        s.offset = at;
      }
    }
    BATCHCAST_RETURN_IF_ERROR(
        cuda::CopyAsync(set.uploaded.data(), set.upload.data(), upload_bytes, stream));
  }

  // 4. Descriptors and labels, then the fused kernel into the slot.
  const size_t desc_bytes = AlignUp(n * sizeof(cuda::AugmentSample));
  const size_t label_bytes = n * sizeof(int64_t);
  BATCHCAST_RETURN_IF_ERROR(Grow(set.host_desc, desc_bytes + label_bytes));
  BATCHCAST_RETURN_IF_ERROR(Grow(set.dev_desc, device_, desc_bytes));
  auto* desc = reinterpret_cast<cuda::AugmentSample*>(set.host_desc.data());
  auto* labels = reinterpret_cast<int64_t*>(set.host_desc.data() + desc_bytes);
  const int size = transform_.size;
  for (size_t i = 0; i < n; ++i) {
    const Sample& s = set.samples[i];
    const Entry& e = entries_[static_cast<size_t>(target.indices[i])];
    cuda::AugmentSample& d = desc[i];
    d = cuda::AugmentSample{};
    if (s.gpu || s.cached) {
      d.src = s.gpu ? set.arena.data() + s.offset
                    : cache_.data() + cache_offset_[static_cast<size_t>(target.indices[i])];
      d.pitch = static_cast<int64_t>(e.width) * 3;
      d.src_w = e.width;
      d.src_h = e.height;
      d.box = s.plan.scale_denom;
      d.rect_x = s.plan.rect.x;
      d.rect_y = s.plan.rect.y;
    } else {
      d.src = set.uploaded.data() + s.offset;
      d.pitch = static_cast<int64_t>(s.dec_w) * 3;
      d.src_w = s.dec_w;
      d.src_h = s.dec_h;
      d.box = 1;
    }
    d.rect_w = s.plan.rect.w;
    d.rect_h = s.plan.rect.h;
    d.flip = s.crop.flip ? 1 : 0;
    d.area = cuda::UsesAreaResampling(d.rect_w, d.rect_h, size) ? 1 : 0;
    d.out = target.field_data[0] + i * target.field_bytes[0];
    labels[i] = e.file.label;
  }
  BATCHCAST_RETURN_IF_ERROR(
      cuda::CopyAsync(set.dev_desc.data(), set.host_desc.data(), n * sizeof(cuda::AugmentSample),
                      stream));
  BATCHCAST_RETURN_IF_ERROR(cuda::CopyAsync(target.field_data[1], labels, label_bytes, stream));
  BATCHCAST_RETURN_IF_ERROR(cuda::AugmentAsync(
      reinterpret_cast<const cuda::AugmentSample*>(set.dev_desc.data()), static_cast<int>(n),
      params_, stream));
  BATCHCAST_RETURN_IF_ERROR(set.done.Record(stream));
  gpu_decoded_.fetch_add(static_cast<int64_t>(gpu_ids.size()));
  cpu_decoded_.fetch_add(cpu_decodes);
  return Status::Ok();
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
  BATCHCAST_ASSIGN_OR_RETURN(image::TransformOptions t, MakeTransformOptions(options));
  BATCHCAST_RETURN_IF_ERROR(cuda::CheckDevice(device).WithContext("--device " + DeviceName(options.device)));
  BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<cuda::NvJpegDecoder> decoder,
                             cuda::NvJpegDecoder::Create(device, 2));
  // Scan every header (as the CPU path does) and decide where each file decodes.
  // CPU threads: the pipeline's own (decodes what the GPU cannot) and one that
  // reads the next batch's files; --workers sets the total.
  const int threads = options.workers > 0 ? options.workers : 2;
  using CS = image::JpegInfo::ColorSpace;
  BATCHCAST_ASSIGN_OR_RETURN(
      ScannedDataset scan,
      ScanImageDataset(options, image::EffectiveMaxPixels(t), threads,
                       [&](const std::string& path, std::span<const uint8_t> header,
                           const image::JpegInfo& info) {
                         return !info.progressive &&
                                (info.color == CS::kYCbCr || info.color == CS::kGray) &&
                                decoder->Supports(header) && EndsWithEoi(path);
                       }));
  std::vector<Entry> usable;
  usable.reserve(scan.usable.size());
  size_t gpu = 0;
  for (ScannedImage& e : scan.usable) {
    gpu += e.flag ? 1 : 0;
    usable.push_back(Entry{std::move(e.file), e.info.width, e.info.height, e.flag});
  }
  const uint64_t dropped = scan.dropped;
  BC_LOG_INFO("{} files for {}, {} for the CPU decoder", gpu, decoder->backend_name(),
              usable.size() - gpu);
  auto source = std::make_unique<CudaImageSource>(std::move(usable), t, device, std::move(decoder),
                                                  threads, options.on_error == ErrorPolicy::kFail,
                                                  options.data, dropped);
  BATCHCAST_RETURN_IF_ERROR(source->Init());
  return std::unique_ptr<Source>(std::move(source));
}

}  // namespace batchcast
