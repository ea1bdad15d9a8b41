#include "image_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/src/logging.h"
#include "scan_progress.h"
#include "thread_pool.h"

namespace batchcast {
namespace fs = std::filesystem;

namespace {

bool HasImageExtension(const fs::path& p) {
  static const std::set<std::string> kExt = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                             ".pgm", ".tif",  ".tiff", ".webp"};
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return kExt.count(ext) != 0;
}

Result<std::vector<ImageEntry>> ListImageFolder(const std::string& path) {
  std::error_code ec;
  std::vector<fs::path> classes;
  for (const auto& d : fs::directory_iterator(path, ec)) {
    if (d.is_directory()) classes.push_back(d.path());
  }
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) {
    return InvalidArgumentError("dataset " + path +
                                " has no class subfolders (expected DIR/<class>/<image>)");
  }
  std::vector<ImageEntry> entries;
  ScanProgress progress("listing " + path);
  for (size_t label = 0; label < classes.size(); ++label) {
    std::vector<std::string> files;
    for (const auto& f : fs::recursive_directory_iterator(
             classes[label], fs::directory_options::follow_directory_symlink, ec)) {
      if (f.is_regular_file() && HasImageExtension(f.path())) {
        files.push_back(f.path().string());
        progress.Add();
      }
    }
    std::sort(files.begin(), files.end());
    for (std::string& f : files) entries.push_back({std::move(f), static_cast<int64_t>(label)});
  }
  if (ec) return NotFoundError("cannot list " + path + ": " + ec.message());
  return entries;
}

Result<std::vector<ImageEntry>> ListTsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read " + path);
  const fs::path base = fs::path(path).parent_path();
  std::vector<ImageEntry> entries;
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
  return entries;
}

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

Result<std::vector<ImageEntry>> ListImageDataset(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFoundError("dataset " + path + " does not exist");
  Result<std::vector<ImageEntry>> entries =
      fs::is_directory(path, ec) ? ListImageFolder(path) : ListTsv(path);
  if (entries.ok() && entries->empty()) {
    return InvalidArgumentError("dataset " + path + " holds no image files");
  }
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
    pool.ParallelFor(static_cast<int64_t>(listed.size()), [&](int w, int64_t i) {
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
