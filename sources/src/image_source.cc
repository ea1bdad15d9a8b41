#include "image_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "batchcast/image/jpeg.h"
#include "batchcast/image/pipeline.h"
#include "batchcast/core/logging.h"
#include "thread_pool.h"

namespace batchcast {
namespace fs = std::filesystem;

namespace {

bool HasImageExtension(const fs::path& p) {
  static const std::set<std::string> kExt = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                             ".pgm", ".tif",  ".tiff", ".webp"};
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return kExt.count(ext) != 0;
}

class ImageSource : public SampleSource {
 public:
  ImageSource(std::vector<ImageEntry> entries, image::TransformOptions transform, bool fail_on_error,
              int workers, std::string root, uint64_t dropped)
      : SampleSource(workers),
        entries_(std::move(entries)),
        transform_(transform),
        fail_on_error_(fail_on_error),
        root_(std::move(root)),
        dropped_(dropped),
        workers_(static_cast<size_t>(workers)) {}

  uint64_t size() const override { return entries_.size(); }

  std::vector<FieldSpec> fields() const override {
    const int64_t s = transform_.size;
    std::vector<int64_t> shape = transform_.nchw ? std::vector<int64_t>{3, s, s}
                                                 : std::vector<int64_t>{s, s, 3};
    return {FieldSpec{"image", transform_.dtype, shape, MemoryKind::kHost},
            FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost}};
  }

  std::string description() const override {
    return "image dataset " + root_ + " (" + std::to_string(entries_.size()) + " files, " +
           (transform_.kind == image::TransformOptions::Kind::kTrain ? "train" : "eval") + " " +
           std::to_string(transform_.size) + " " + std::string(DTypeName(transform_.dtype)) + ")";
  }

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return {{"files", static_cast<int64_t>(entries_.size())},
            {"files_dropped_at_scan", static_cast<int64_t>(dropped_)},
            {"decode_errors", decode_errors_.load()}};
  }

  Status FillSample(int worker, uint32_t epoch, int64_t& index,
                    std::span<uint8_t* const> out) override {
    Worker& w = workers_[static_cast<size_t>(worker)];
    if (!w.pipeline) w.pipeline = std::make_unique<image::CpuImagePipeline>(transform_);
    // On a bad file (skip policy), the next index that decodes stands in.
    for (int attempt = 0; attempt < 64; ++attempt) {
      const ImageEntry& e = entries_[static_cast<size_t>(index)];
      Status s = ReadFileBytes(e.path, w.bytes);
      if (s.ok()) s = w.pipeline->Process(w.bytes, epoch, index, out[0]);
      if (s.ok()) {
        std::memcpy(out[1], &e.label, sizeof(e.label));
        return Status::Ok();
      }
      if (fail_on_error_) {
        return Status(s.code(), e.path + ": " + s.message() + " (--on-error fail)");
      }
      ReportOnce(e.path, s);
      index = (index + 1) % static_cast<int64_t>(entries_.size());
    }
    return DataLossError("64 consecutive files failed to decode; giving up");
  }

 private:
  struct Worker {
    std::unique_ptr<image::CpuImagePipeline> pipeline;
    std::vector<uint8_t> bytes;
  };
  void ReportOnce(const std::string& path, const Status& s) {
    decode_errors_.fetch_add(1);
    std::lock_guard lock(warned_mu_);
    if (warned_.insert(path).second) {
      BC_LOG_WARN("skipping {}: {} (a neighbouring sample stands in)", path, s.message());
    }
  }

  std::vector<ImageEntry> entries_;
  image::TransformOptions transform_;
  bool fail_on_error_;
  std::string root_;
  uint64_t dropped_;
  std::vector<Worker> workers_;
  std::atomic<int64_t> decode_errors_{0};
  std::mutex warned_mu_;
  std::set<std::string> warned_;
};

}  // namespace

Result<std::vector<ImageEntry>> ListImageDataset(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFoundError("dataset " + path + " does not exist");
  std::vector<ImageEntry> entries;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> classes;
    for (const auto& d : fs::directory_iterator(path, ec)) {
      if (d.is_directory()) classes.push_back(d.path());
    }
    std::sort(classes.begin(), classes.end());
    if (classes.empty()) {
      return InvalidArgumentError("dataset " + path +
                                  " has no class subfolders (expected DIR/<class>/<image>)");
    }
    for (size_t label = 0; label < classes.size(); ++label) {
      std::vector<std::string> files;
      for (const auto& f : fs::recursive_directory_iterator(
               classes[label], fs::directory_options::follow_directory_symlink, ec)) {
        if (f.is_regular_file() && HasImageExtension(f.path())) files.push_back(f.path().string());
      }
      std::sort(files.begin(), files.end());
      for (std::string& f : files) entries.push_back({std::move(f), static_cast<int64_t>(label)});
    }
    if (ec) return NotFoundError("cannot list " + path + ": " + ec.message());
  } else {
    std::ifstream in(path);
    if (!in) return NotFoundError("cannot read " + path);
    const fs::path base = fs::path(path).parent_path();
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      const size_t tab = line.rfind('\t');
      if (tab == std::string::npos || tab == 0) {
        return InvalidArgumentError(path + ":" + std::to_string(n) + ": expected path<TAB>label");
      }
      int64_t label = 0;
      try {
        size_t used = 0;
        label = std::stoll(line.substr(tab + 1), &used);
        if (used != line.size() - tab - 1 || label < 0) throw std::invalid_argument("label");
      } catch (const std::exception&) {
        return InvalidArgumentError(path + ":" + std::to_string(n) + ": bad label '" +
                                    line.substr(tab + 1) + "'");
      }
      fs::path p = line.substr(0, tab);
      if (p.is_relative()) p = base / p;
      entries.push_back({p.string(), label});
    }
  }
  if (entries.empty()) return InvalidArgumentError("dataset " + path + " holds no image files");
  return entries;
}

Status ReadFileBytes(const std::string& path, std::vector<uint8_t>& out, size_t limit) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFoundError("cannot open: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return DataLossError("cannot stat: " + std::string(std::strerror(err)));
  }
  const size_t want = std::min<size_t>(static_cast<size_t>(st.st_size), limit);
  out.resize(want);
  size_t got = 0;
  while (got < want) {
    const ssize_t r = read(fd, out.data() + got, want - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fd);
  out.resize(got);
  return Status::Ok();
}

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

Result<ScannedDataset> ScanImageDataset(
    const SourceOptions& options, uint64_t max_pixels, int threads,
    const std::function<bool(const std::string&, std::span<const uint8_t>,
                             const image::JpegInfo&)>& classify) {
  BATCHCAST_ASSIGN_OR_RETURN(std::vector<ImageEntry> files, ListImageDataset(options.data));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ScannedImage> scanned(files.size());
  std::vector<Status> verdict(files.size());
  {
    ThreadPool pool(std::max(1, threads));
    std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(pool.size()));
    pool.ParallelFor(static_cast<int64_t>(files.size()), [&](int w, int64_t i) {
      std::vector<uint8_t>& buf = buffers[static_cast<size_t>(w)];
      const std::string& path = files[static_cast<size_t>(i)].path;
      constexpr size_t kHeadBytes = 256 << 10;
      Status s = ReadFileBytes(path, buf, kHeadBytes);
      Result<image::JpegInfo> info = DataLossError("unread");
      if (s.ok()) {
        info = image::ReadJpegInfo(buf, max_pixels);
        if (!info.ok() && buf.size() == kHeadBytes) {  // a header larger than 256 KiB
          s = ReadFileBytes(path, buf);
          if (s.ok()) info = image::ReadJpegInfo(buf, max_pixels);
        }
        if (s.ok() && !info.ok()) s = info.status();
      }
      verdict[static_cast<size_t>(i)] = s;
      if (!s.ok()) return;
      ScannedImage& e = scanned[static_cast<size_t>(i)];
      e.info = *info;
      if (classify) e.flag = classify(path, buf, *info);
    });
  }
  ScannedDataset out;
  out.usable.reserve(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (verdict[i].ok()) {
      scanned[i].file = std::move(files[i]);
      out.usable.push_back(std::move(scanned[i]));
      continue;
    }
    if (options.on_error == ErrorPolicy::kFail) {
      return Status(verdict[i].code(),
                    files[i].path + ": " + verdict[i].message() + " (--on-error fail)");
    }
    ++out.dropped;
    BC_LOG_WARN("dropping {}: {}", files[i].path, verdict[i].message());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BC_LOG_INFO("scanned {} files in {:.2f} s: {} usable, {} dropped", files.size(), secs,
              out.usable.size(), out.dropped);
  if (out.usable.empty()) return InvalidArgumentError("no usable JPEG files in " + options.data);
  return out;
}

Result<std::unique_ptr<Source>> MakeImageSource(const SourceOptions& options) {
  BATCHCAST_ASSIGN_OR_RETURN(image::TransformOptions t, MakeTransformOptions(options));
  const int workers = options.workers > 0
                          ? options.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  BATCHCAST_ASSIGN_OR_RETURN(ScannedDataset scan,
                             ScanImageDataset(options, image::EffectiveMaxPixels(t), workers));
  std::vector<ImageEntry> usable;
  usable.reserve(scan.usable.size());
  for (ScannedImage& e : scan.usable) usable.push_back(std::move(e.file));
  return std::unique_ptr<Source>(new ImageSource(std::move(usable), t, options.on_error == ErrorPolicy::kFail,
                                                 workers, options.data, scan.dropped));
}

}  // namespace batchcast
