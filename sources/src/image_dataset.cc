#include "image_dataset.h"

#include <algorithm>
#include <chrono>

#include "batchcast/image/image_format.h"
#include "core/src/logging.h"
#include "core/src/stream_identity.h"
#include "scan_progress.h"
#include "shard_pattern.h"
#include "shard_scan.h"
#include "thread_pool.h"

namespace batchcast {
namespace {

// A file's header as the scan reads it (Note [Image formats]): the format
// from the bytes, then the JPEG header, or another format's size (kept in
// the JpegInfo's width, height and components).
Result<ImageDataset::Header> ParseHeader(std::span<const uint8_t> bytes, uint64_t max_pixels) {
  ImageDataset::Header h;
  h.format = image::SniffImageFormat(bytes);
  if (h.format == image::ImageFormat::kJpeg) {
    BATCHCAST_ASSIGN_OR_RETURN(h.info, image::ReadJpegInfo(bytes, max_pixels));
    return h;
  }
  BATCHCAST_ASSIGN_OR_RETURN(const image::ImageHeader other,
                             image::ReadImageHeader(bytes, max_pixels));
  h.info.width = other.width;
  h.info.height = other.height;
  h.info.components = other.channels;
  h.info.color =
      other.channels <= 2 ? image::JpegInfo::ColorSpace::kGray : image::JpegInfo::ColorSpace::kRGB;
  return h;
}

// Reads the header of `path` into `buf` (the first 256 KiB, or the whole file
// when the header is larger, or a TIFF's first directory lies beyond) and
// parses it; *whole: `buf` holds the whole file.
Result<ImageDataset::Header> ReadHeader(RetryingReader& io, const std::string& path,
                                        uint64_t max_pixels, std::vector<uint8_t>& buf,
                                        bool* whole) {
  constexpr size_t kHeadBytes = 256 << 10;
  BATCHCAST_RETURN_IF_ERROR(io.Read(path, buf, kHeadBytes));
  *whole = buf.size() < kHeadBytes;
  Result<ImageDataset::Header> header = ParseHeader(buf, max_pixels);
  if (!header.ok() && buf.size() == kHeadBytes) {  // a header larger than 256 KiB
    BATCHCAST_RETURN_IF_ERROR(io.Read(path, buf));
    *whole = true;
    header = ParseHeader(buf, max_pixels);
  }
  return header;
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

Result<ImageDataset::Scan> ImageDataset::ScanFiles(const SourceOptions& options,
                                                   uint64_t max_pixels, int threads,
                                                   const Classify& classify, RetryingReader& io) {
  BATCHCAST_ASSIGN_OR_RETURN(std::vector<ImageEntry> listed, ListImageDataset(options.data));
  Scan scan;
  scan.candidates.resize(listed.size());
  ScanProgress progress("scanning " + options.data, listed.size());
  ThreadPool pool(std::max(1, threads));
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(pool.size()));
  const int64_t n = static_cast<int64_t>(listed.size());
  BATCHCAST_RETURN_IF_ERROR(pool.ParallelFor(n, [&](int w, int64_t i) {
    std::vector<uint8_t>& buf = buffers[static_cast<size_t>(w)];
    Candidate& c = scan.candidates[static_cast<size_t>(i)];
    c.file.entry = std::move(listed[static_cast<size_t>(i)]);
    bool whole = false;
    Result<Header> header = ReadHeader(io, c.file.entry.path, max_pixels, buf, &whole);
    progress.Add();
    c.verdict = header.status();
    if (!header.ok()) return;
    c.file.format = header->format;
    c.file.info = header->info;
    if (classify && header->format == image::ImageFormat::kJpeg) {
      c.file.flag = classify(c.file.entry.path, buf, whole, header->info);
    }
  }));
  return scan;
}

Result<ImageDataset::Scan> ImageDataset::ScanShardData(const SourceOptions& options,
                                                       uint64_t max_pixels, int threads,
                                                       const Classify& classify,
                                                       RetryingReader& io) {
  BATCHCAST_ASSIGN_OR_RETURN(
      ShardScan shards, ScanShards(
                            options.data, threads,
                            [&](const std::string& name, std::span<const uint8_t> bytes,
                                image::ImageFormat* format, image::JpegInfo* info, bool* flag) {
                              Result<Header> r = ParseHeader(bytes, max_pixels);
                              if (!r.ok()) return r.status();
                              *format = r->format;
                              *info = r->info;
                              if (classify && r->format == image::ImageFormat::kJpeg) {
                                *flag = classify(name, bytes, /*whole=*/true, r->info);
                              }
                              return Status::Ok();
                            },
                            io));
  Scan scan;
  scan.shards = std::move(shards.shards);
  scan.damage = std::move(shards.damage);
  scan.candidates.reserve(shards.samples.size());
  for (ShardSample& s : shards.samples) {
    Candidate& c = scan.candidates.emplace_back();
    c.file.entry = {std::move(s.name), s.label};
    c.file.format = s.format;
    c.file.info = s.info;
    c.file.flag = s.flag;
    c.file.shard = s.shard;
    c.file.member = s.member;
    c.verdict = std::move(s.verdict);
  }
  return scan;
}

Result<std::unique_ptr<ImageDataset>> ImageDataset::Open(const SourceOptions& options, int threads,
                                                         const Classify& classify, ReadEnv* env,
                                                         uint32_t readers) {
  BATCHCAST_ASSIGN_OR_RETURN(image::TransformOptions transform, MakeTransformOptions(options));
  auto io = std::make_unique<RetryingReader>(env);
  const uint64_t max_pixels = image::EffectiveMaxPixels(transform);
  const auto t0 = std::chrono::steady_clock::now();
  const bool sharded = IsShardData(options.data);
  const bool listed = !options.listing_file.empty() && !sharded;
  BATCHCAST_ASSIGN_OR_RETURN(Scan scan,
                             sharded  ? ScanShardData(options, max_pixels, threads, classify, *io)
                             : listed ? ReadListing(options.listing_file)
                                      : ScanFiles(options, max_pixels, threads, classify, *io));
  const bool fail = options.on_error == ErrorPolicy::kFail;
  for (const Status& d : scan.damage) {
    if (fail) return Status(d.code(), d.message() + " (--on-error fail)");
    BC_LOG_WARN("{}: the samples before the damage are served, the rest of the shard is lost",
                d.message());
  }
  std::vector<File> usable;
  usable.reserve(scan.candidates.size());
  uint64_t dropped = scan.dropped;
  for (Candidate& c : scan.candidates) {
    if (c.verdict.ok()) {
      usable.push_back(std::move(c.file));
      continue;
    }
    const std::string& path = c.file.entry.path;
    if (fail)
      return Status(c.verdict.code(), path + ": " + c.verdict.message() + " (--on-error fail)");
    ++dropped;
    BC_LOG_WARN("dropping {}: {}", path, c.verdict.message());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BC_LOG_INFO(
      "{} {} {} in {:.2f} s: {} usable, {} dropped{}",
      listed ? "read the listing " + options.listing_file + " of" : std::string("scanned"),
      scan.candidates.size() + scan.dropped,
      sharded ? "samples of " + std::to_string(scan.shards.size()) + " shards" : "files", secs,
      usable.size(), dropped,
      scan.damage.empty() ? "" : ", " + std::to_string(scan.damage.size()) + " shards damaged");
  if (usable.empty()) return InvalidArgumentError("no usable image files in " + options.data);
  std::unique_ptr<ImageDataset> ds(
      new ImageDataset(options.data, transform, options.on_error, std::move(usable), dropped,
                       std::move(scan.shards), scan.damage.size(), std::move(io)));
  ds->reader_ = sharded ? MakeShardSampleReader(*ds, 2 * options.shuffle_buffer +
                                                         1024 * uint64_t{std::max(readers, 1u)})
                        : MakeFileSampleReader(*ds);
  return ds;
}

const uint64_t ImageDataset::kEmptyDigest = Fnv1a64("");

uint64_t ImageDataset::AddToDigest(uint64_t h, const File& f) {
  const std::string_view path = f.entry.path;
  const size_t slash = path.find_last_of('/');
  h = Fnv1a64(path.substr(slash == std::string_view::npos ? 0 : slash + 1), h);
  return Fnv1a64(":" + std::to_string(f.entry.label) + "\n", h);
}

uint64_t ImageDataset::ListingDigest() const {
  uint64_t h = kEmptyDigest;
  for (const File& f : files_) h = AddToDigest(h, f);
  return h;
}

std::array<int64_t, std::size(image::kDecodedFormats)> ImageDataset::CountFormats(
    const std::vector<File>& files) {
  std::array<int64_t, std::size(image::kDecodedFormats)> counts{};
  for (const File& f : files) {
    for (size_t k = 0; k < counts.size(); ++k) counts[k] += f.format == image::kDecodedFormats[k];
  }
  return counts;
}

std::vector<uint64_t> ImageDataset::sample_groups() const {
  std::vector<uint64_t> groups(shards_.size(), 0);
  if (shards_.empty()) return groups;  // files: random access
  for (const File& f : files_) ++groups[f.shard];
  return groups;
}

std::vector<FieldSpec> ImageDataset::fields(MemoryKind memory) const {
  const int64_t s = transform_.size;
  std::vector<int64_t> shape =
      transform_.nchw ? std::vector<int64_t>{3, s, s} : std::vector<int64_t>{s, s, 3};
  return {FieldSpec{"image", transform_.dtype, shape, memory},
          FieldSpec{"label", DType::kInt64, {}, memory}};
}

std::string ImageDataset::Describe(std::string_view details) const {
  const std::string count = shards_.empty() ? std::to_string(files_.size()) + " files"
                                            : std::to_string(files_.size()) + " samples in " +
                                                  std::to_string(shards_.size()) + " tar shards";
  std::string out = "image dataset " + root_ + " (" + count + ", " +
                    (transform_.kind == image::TransformOptions::Kind::kTrain ? "train" : "eval") +
                    " " + std::to_string(transform_.size) + " " +
                    std::string(DTypeName(transform_.dtype));
  if (!details.empty()) out += ", " + std::string(details);
  return out + ")";
}

std::vector<std::pair<std::string, int64_t>> ImageDataset::counters() const {
  std::vector<std::pair<std::string, int64_t>> out = {
      {"files", static_cast<int64_t>(files_.size())},
      {"files_dropped_at_scan", static_cast<int64_t>(dropped_)},
      {"files_dropped_at_decode", files_dropped_at_decode_.load()},
      {"samples_dropped", samples_dropped_.load()}};
  // Note [Image formats]: the usable files of each format.
  for (size_t k = 0; k < std::size(image::kDecodedFormats); ++k) {
    out.push_back({"files_" + std::string(image::ImageFormatName(image::kDecodedFormats[k])),
                   format_files_[k]});
  }
  if (!shards_.empty()) {
    out.push_back({"shards", static_cast<int64_t>(shards_.size())});
    out.push_back({"shards_damaged", static_cast<int64_t>(shards_damaged_)});
  }
  for (auto& c : reader_->counters()) out.push_back(std::move(c));
  for (auto& c : io_->counters()) out.push_back(std::move(c));
  return out;
}

std::vector<std::string> ImageDataset::counter_names() const {
  std::vector<std::string> out;
  for (auto& [name, value] : counters()) out.push_back(std::move(name));
  return out;
}

uint64_t ImageDataset::drop_limit() const {
  return std::max<uint64_t>({10, files_.size() / 10, 2 * dropped_});
}

Status ImageDataset::DroppedElsewhere(std::span<const int64_t> indices) {
  for (int64_t index : indices) {
    samples_dropped_.fetch_add(1);
    if (known_bad(index)) continue;
    BATCHCAST_RETURN_IF_ERROR(OnDecodeError(
        index,
        DataLossError("the process that decodes this ring could not use it (its log says why)")));
  }
  return Status::Ok();
}

Status ImageDataset::OnDecodeError(int64_t index, const Status& error) {
  // The server is stopping (Note [Read retries]): not the file's failure.
  if (error.code() == StatusCode::kCancelled) return error;
  const std::string& p = path(index);
  if (on_error_ == ErrorPolicy::kFail) {
    return Status(error.code(), p + ": " + error.message() + " (--on-error fail)");
  }
  if (bad_[static_cast<size_t>(index)].exchange(1) == 0) {
    const uint64_t n = static_cast<uint64_t>(files_dropped_at_decode_.fetch_add(1)) + 1;
    BC_LOG_WARN("dropping {}: {} (its sample is left out of this and every later epoch)", p,
                error.message());
    if (n > drop_limit()) {
      return DataLossError(std::to_string(n) + " of " + std::to_string(files_.size()) +
                           " files failed after the scan (the last: " + p + ": " + error.message() +
                           "): more than the " + std::to_string(drop_limit()) +
                           " a healthy dataset may lose, so the storage or the data is failing; "
                           "stopping rather than serve ever shorter epochs");
    }
  }
  return Status::Ok();
}

}  // namespace batchcast
