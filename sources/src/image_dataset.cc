#include "image_dataset.h"

#include <algorithm>
#include <chrono>

#include "core/src/logging.h"
#include "scan_progress.h"
#include "thread_pool.h"

namespace batchcast {
namespace {

// Reads the header of `path` into `buf` (the first 256 KiB, or the whole file
// when the header is larger) and parses it.
Result<image::JpegInfo> ReadHeader(const std::string& path, uint64_t max_pixels,
                                   std::vector<uint8_t>& buf) {
  constexpr size_t kHeadBytes = 256 << 10;
  BATCHCAST_RETURN_IF_ERROR(ReadFileBytes(path, buf, kHeadBytes));
  Result<image::JpegInfo> info = image::ReadJpegInfo(buf, max_pixels);
  if (!info.ok() && buf.size() == kHeadBytes) {  // a header larger than 256 KiB
    BATCHCAST_RETURN_IF_ERROR(ReadFileBytes(path, buf));
    info = image::ReadJpegInfo(buf, max_pixels);
  }
  return info;
}

}  // namespace

Result<image::TransformOptions> MakeTransformOptions(const SourceOptions& options) {
  image::TransformOptions t;
  t.kind = options.transform == TransformKind::kEval ? image::TransformOptions::Kind::kEval
                                                     : image::TransformOptions::Kind::kTrain;
  t.size = options.size;
  t.dtype = options.output_dtype();
  t.nchw = options.layout == ImageLayout::kNchw;
  t.mean = options.mean;
  t.std = options.std;
  t.seed = options.seed;
  t.max_pixels = options.max_pixels;
  BATCHCAST_RETURN_IF_ERROR(image::ValidateTransformOptions(t));
  return t;
}

Result<std::unique_ptr<ImageDataset>> ImageDataset::Open(const SourceOptions& options, int threads,
                                                         const Classify& classify) {
  BATCHCAST_ASSIGN_OR_RETURN(image::TransformOptions transform, MakeTransformOptions(options));
  const uint64_t max_pixels = image::EffectiveMaxPixels(transform);
  BATCHCAST_ASSIGN_OR_RETURN(std::vector<ImageEntry> listed, ListImageDataset(options.data));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<File> scanned(listed.size());
  std::vector<Status> verdict(listed.size());
  ScanProgress progress("scanning " + options.data, listed.size());
  {
    ThreadPool pool(std::max(1, threads));
    std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(pool.size()));
    const int64_t n = static_cast<int64_t>(listed.size());
    const Status scan = pool.ParallelFor(n, [&](int w, int64_t i) {
      std::vector<uint8_t>& buf = buffers[static_cast<size_t>(w)];
      const std::string& path = listed[static_cast<size_t>(i)].path;
      Result<image::JpegInfo> info = ReadHeader(path, max_pixels, buf);
      progress.Add();
      verdict[static_cast<size_t>(i)] = info.status();
      if (!info.ok()) return;
      File& f = scanned[static_cast<size_t>(i)];
      f.info = *info;
      if (classify) f.flag = classify(path, buf, *info);
    });
    BATCHCAST_RETURN_IF_ERROR(scan);
  }
  std::vector<File> usable;
  usable.reserve(listed.size());
  uint64_t dropped = 0;
  for (size_t i = 0; i < listed.size(); ++i) {
    if (verdict[i].ok()) {
      scanned[i].entry = std::move(listed[i]);
      usable.push_back(std::move(scanned[i]));
      continue;
    }
    if (options.on_error == ErrorPolicy::kFail) {
      return Status(verdict[i].code(),
                    listed[i].path + ": " + verdict[i].message() + " (--on-error fail)");
    }
    ++dropped;
    BC_LOG_WARN("dropping {}: {}", listed[i].path, verdict[i].message());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BC_LOG_INFO("scanned {} files in {:.2f} s: {} usable, {} dropped", listed.size(), secs,
              usable.size(), dropped);
  if (usable.empty()) return InvalidArgumentError("no usable JPEG files in " + options.data);
  return std::unique_ptr<ImageDataset>(
      new ImageDataset(options.data, transform, options.on_error, std::move(usable), dropped));
}

std::vector<FieldSpec> ImageDataset::fields(MemoryKind memory) const {
  const int64_t s = transform_.size;
  std::vector<int64_t> shape =
      transform_.nchw ? std::vector<int64_t>{3, s, s} : std::vector<int64_t>{s, s, 3};
  return {FieldSpec{"image", transform_.dtype, shape, memory},
          FieldSpec{"label", DType::kInt64, {}, memory}};
}

std::string ImageDataset::Describe(std::string_view details) const {
  std::string out = "image dataset " + root_ + " (" + std::to_string(files_.size()) + " files, " +
                    (transform_.kind == image::TransformOptions::Kind::kTrain ? "train" : "eval") +
                    " " + std::to_string(transform_.size) + " " +
                    std::string(DTypeName(transform_.dtype));
  if (!details.empty()) out += ", " + std::string(details);
  return out + ")";
}

std::vector<std::pair<std::string, int64_t>> ImageDataset::counters() const {
  return {{"files", static_cast<int64_t>(files_.size())},
          {"files_dropped_at_scan", static_cast<int64_t>(dropped_)},
          {"files_dropped_at_decode", files_dropped_at_decode_.load()},
          {"samples_dropped", samples_dropped_.load()}};
}

Status ImageDataset::OnDecodeError(int64_t index, const Status& error) {
  const std::string& p = path(index);
  if (on_error_ == ErrorPolicy::kFail) {
    return Status(error.code(), p + ": " + error.message() + " (--on-error fail)");
  }
  if (bad_[static_cast<size_t>(index)].exchange(1) == 0) {
    files_dropped_at_decode_.fetch_add(1);
    BC_LOG_WARN("dropping {}: {} (its sample is left out of this and every later epoch)", p,
                error.message());
  }
  return Status::Ok();
}

}  // namespace batchcast
