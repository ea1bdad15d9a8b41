// Note [Shared listing]
// A process that builds the source of a server's ring again (an attached
// producer, server/include/batchcast/server/attached_producer.h) needs the
// dataset as the server scanned it: the same usable files in the same order,
// with their headers (the GPU source routes each file by them) and the flags
// its classify hook set. Listing and reading every header again would cost
// that process as much as the server's start (minutes for millions of files
// on network storage), once per process, and would see files added or
// renamed since, which the server's stream does not hold. So the server
// writes its scan once, when the first producer attaches, to a file in its
// runtime directory (<name>.listing, mode 0600, removed at stop and with a
// dead server's files), and the producer opens its dataset from it
// (SourceOptions::listing_file) instead of listing and scanning.
//
// The file: "batchcast-listing 1\n", then the number of usable files, the
// scan's dropped count and the listing's digest (ListingDigest) as uint64,
// then per file its path (uint32 length, bytes; made absolute, since the
// reader may run in another directory), label (int64), format (uint8) and
// header (width, height, components as int32; progressive, color, yuv420
// and the classify flag as uint8), all in this machine's byte order (the
// reader runs on the same node), then a checksum of all that (FNV-1a, 64
// bits). ReadListing checks the checksum, every bound and the listing's
// digest, so a truncated, damaged or foreign file is DataLoss, never a
// crash or a wrong header. A file that later fails to read or decode is dropped by whoever
// reads it (Note [Dropped files]): by the server and the producer alike.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/src/stream_identity.h"
#include "core/src/wire.h"
#include "dataset_files.h"
#include "image_dataset.h"

namespace batchcast {
namespace {

constexpr std::string_view kMagic = "batchcast-listing 1\n";
constexpr size_t kMaxPath = 1 << 16;

// `what`: strerror(err), with the code a read's errno gives (dataset_files.h).
Status SystemError(const std::string& what, int err) {
  return Status(ReadErrorCode(err), what + ": " + std::strerror(err));
}

Status WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return SystemError("write", n < 0 ? errno : EIO);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

Status ImageDataset::SaveListing(const std::string& path) const {
  if (!shards_.empty()) {
    return InvalidArgumentError("a dataset of tar shards is read once, by the server");
  }
  std::string out(kMagic);
  wire::Writer w(out);
  w.PutAll(static_cast<uint64_t>(files_.size()), dropped_, ListingDigest());
  // The working directory once, for the relative paths (a dataset given
  // relative to it).
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  for (const File& f : files_) {
    const std::filesystem::path path(f.entry.path);
    w.PutString(path.is_absolute() || ec ? f.entry.path : (cwd / path).string());
    w.PutAll(f.entry.label, static_cast<uint8_t>(f.format), static_cast<int32_t>(f.info.width),
             static_cast<int32_t>(f.info.height), static_cast<int32_t>(f.info.components),
             static_cast<uint8_t>(f.info.progressive), static_cast<uint8_t>(f.info.color),
             static_cast<uint8_t>(f.info.yuv420), static_cast<uint8_t>(f.flag));
  }
  w.Put(Fnv1a64(out));
  // Whole or not at all: a reader never sees a part.
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return SystemError("cannot create " + tmp, errno);
  Status s = WriteAll(fd, out);
  if (close(fd) != 0 && s.ok()) s = SystemError("close", errno);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) s = SystemError("rename", errno);
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s.WithContext("writing the dataset's listing to " + path);
  }
  return Status::Ok();
}

Result<ImageDataset::Scan> ImageDataset::ReadListing(const std::string& path) {
  std::vector<uint8_t> bytes;
  BATCHCAST_RETURN_IF_ERROR(
      ReadFileBytes(path, bytes).WithContext("reading the dataset's listing " + path));
  const auto bad = [&](std::string_view why) {
    return DataLossError("the dataset's listing " + path + " " + std::string(why));
  };
  const std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!all.starts_with(kMagic)) return bad("is not one (no header)");
  uint64_t checksum = 0;
  if (all.size() < kMagic.size() + sizeof(checksum)) return bad("is cut short");
  const std::string_view body = all.substr(0, all.size() - sizeof(checksum));
  std::memcpy(&checksum, all.data() + body.size(), sizeof(checksum));
  if (Fnv1a64(body) != checksum) return bad("is damaged or cut short (its checksum differs)");
  wire::Reader r(
      std::span<const uint8_t>(bytes).subspan(kMagic.size(), body.size() - kMagic.size()));
  uint64_t count = 0, digest = 0;
  Scan scan;
  if (!r.Get(count) || !r.Get(scan.dropped) || !r.Get(digest)) return bad("is cut short");
  // Each file takes at least 25 bytes: a bound before reserving.
  if (count > bytes.size() / 25) return bad("counts more files than it holds");
  scan.candidates.resize(count);
  for (Candidate& c : scan.candidates) {
    File& f = c.file;
    uint8_t format = 0, progressive = 0, color = 0, yuv420 = 0, flag = 0;
    int32_t width = 0, height = 0, components = 0;
    if (!r.GetString(f.entry.path, kMaxPath) || !r.Get(f.entry.label) || !r.Get(format) ||
        !r.Get(width) || !r.Get(height) || !r.Get(components) || !r.Get(progressive) ||
        !r.Get(color) || !r.Get(yuv420) || !r.Get(flag)) {
      return bad("is cut short");
    }
    if (format > static_cast<uint8_t>(image::ImageFormat::kUnknown) ||
        color > static_cast<uint8_t>(image::JpegInfo::ColorSpace::kUnknown) || width <= 0 ||
        height <= 0 || components <= 0) {
      return bad("holds a header that is none");
    }
    f.format = static_cast<image::ImageFormat>(format);
    f.info.width = width;
    f.info.height = height;
    f.info.components = components;
    f.info.progressive = progressive != 0;
    f.info.color = static_cast<image::JpegInfo::ColorSpace>(color);
    f.info.yuv420 = yuv420 != 0;
    f.flag = flag != 0;
  }
  if (r.remaining() != 0) return bad("goes on after its last file");
  uint64_t h = kEmptyDigest;
  for (const Candidate& c : scan.candidates) h = AddToDigest(h, c.file);
  if (h != digest) return bad("does not match its digest");
  return scan;
}

}  // namespace batchcast
