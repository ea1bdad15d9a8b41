// ImageDataset: an image dataset as both image sources (CPU: image_source.h,
// GPU: cuda_image_source.h) see it: the listing, the header scan, the
// bad-file policy with its counters, and what the source shows (fields,
// description, counters).
//
// A dataset is an ImageFolder tree (one subfolder per class; labels are the
// class folders' indices in sorted order, as torchvision assigns them; files
// with torchvision's image extensions, sorted, below each class folder), a
// TSV list (`path<TAB>label` per line, relative paths taken from the list's
// folder; blank lines and lines starting with '#' are skipped), or tar shards
// in WebDataset layout (shard_pattern.h, shard_scan.h). Listing and reading
// files: dataset_files.h; the bytes of a sample come from reader()
// (sample_reader.h: files, or shards read sequentially).
//
// Sample indices: files in listing order; shards: shard by shard in the
// order of the pattern's expansion, then member order inside a shard (the
// usable samples only, as for files). So a folder and shards packed from it
// in its listing order give every image the same index.
//
// Open() reads every file's header in parallel (shards: every shard, one per
// thread), or reads a listing another process saved (SaveListing, Note
// [Shared listing]): the format is told from the bytes, never the name (JPEG, PNG,
// WebP, BMP, TIFF, PNM: Note [Image formats], batchcast/image/image_format.h);
// samples that cannot be used (unreadable, empty, not an image of those
// formats, corrupt header, more than max_pixels; in shards also no label or a
// bad one) are dropped and named in the log (on_error=skip), or stop the start
// with the path and reason (on_error=fail). So the epoch length is exact. A
// damaged shard (truncated, corrupt) keeps the samples before the damage;
// what is lost is logged once per shard and counted (`shards_damaged`), or
// stops the start with on_error=fail.
// Listing and scan log a progress line at most once a second
// (scan_progress.h), for datasets of millions of files.
//
// A file that fails later, while decoding (e.g. truncated data, corrupt
// entropy-coded data), is dropped: see Note [Dropped files].
//
// Thread-safety: after Open, everything is immutable except the decode-error
// state (Decode, OnDecodeError, known_bad, the counters), which is atomic; so
// every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"
#include "batchcast/image/image_format.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/image/transform.h"
#include "batchcast/sources/source.h"
#include "batchcast/sources/source_options.h"
#include "core/src/mutex.h"
#include "dataset_files.h"
#include "read_retry.h"
#include "sample_reader.h"

namespace batchcast {

// The transform the options ask for (validated).
Result<image::TransformOptions> MakeTransformOptions(const SourceOptions& options);

// Note [Dropped files]
// A file that passed the scan but fails when it is read or decoded is, with
// on_error=skip, *dropped*: its sample is never replaced by another one (no
// index appears twice in an epoch, its pixels never appear under another
// index). Its first failure warns (once per file) and counts the file
// (`files_dropped_at_decode`); from then on the file is known bad, and its
// sample is dropped without a read or decode attempt in this and every later
// epoch. Every dropped sample counts (`samples_dropped`). The source leaves a
// hole in the slot instead (Source::FillBatch; Note [Holes],
// server/src/slot_table.h), so a consumer's epoch holds one sample fewer per
// dropped file, and at most one batch fewer than announced (len(loader)).
// With on_error=fail the first failure stops the producer with the file's
// path and reason. Both image sources go through ImageDataset::Decode.
// A read that fails is retried first (Note [Read retries]): only a file that
// stays unreadable is dropped. The scan has left out every file it could see
// was unusable, so a healthy dataset loses almost nothing after it; when more
// than drop_limit() files fail after the scan, the storage or the data is
// failing, and the producer stops with DataLoss (every consumer gets the
// error) rather than serve ever shorter epochs as if nothing happened.
// Whether a file fails may depend on the crop (a partial decode stops before
// corrupt data further down), so a file may first fail in a later epoch.

class ImageDataset {
 public:
  // One usable file: its listing entry, its format and header, and what
  // Open's `classify` hook said about it (false without a hook).
  struct File {
    ImageEntry entry;  // shards: path is "SHARD:MEMBER"
    image::ImageFormat format = image::ImageFormat::kJpeg;
    // The JPEG header; for other formats only width, height, components (in
    // the file, alpha included) and color (kGray or kRGB) are set.
    image::JpegInfo info;
    bool flag = false;
    uint32_t shard = 0;   // shards: the shard's number in shards()
    uint64_t member = 0;  // shards: the image member's position in its shard
  };
  // Runs on a scanning thread for each usable JPEG file (never for other
  // formats, whose flag stays false), with the bytes read of it (at least its
  // header; all of them when `whole`) and the header's info.
  using Classify = std::function<bool(const std::string& path, std::span<const uint8_t> header,
                                      bool whole, const image::JpegInfo& info)>;

  // Lists options.data and reads every file's header on `threads` threads (see
  // above). Files are read through `env` (nullptr: the real file system),
  // with retries (Note [Read retries]). Errors: those of ListImageDataset and
  // MakeTransformOptions; the first unusable file's path and reason with
  // on_error=fail; InvalidArgument when no file is usable. `readers`: the
  // sources that will read it (the rings sharing it, DatasetShare); a shard
  // reader holds up to a batch of samples for each (sample_reader.h).
  static Result<std::unique_ptr<ImageDataset>> Open(const SourceOptions& options, int threads,
                                                    const Classify& classify = {},
                                                    ReadEnv* env = nullptr, uint32_t readers = 1);

  uint64_t size() const { return files_.size(); }
  // REQUIRES: 0 <= index < size().
  const File& file(int64_t index) const { return files_[static_cast<size_t>(index)]; }
  const std::string& path(int64_t index) const { return file(index).entry.path; }
  const image::TransformOptions& transform() const { return transform_; }
  uint64_t dropped_at_scan() const { return dropped_; }
  // The shard files (empty for a dataset of files).
  const std::vector<std::string>& shards() const { return shards_; }
  // Where the sources read a sample's bytes (sample_reader.h).
  SampleReader& reader() const { return *reader_; }
  // How files are read (Note [Read retries]); the readers use it.
  RetryingReader& io() const { return *io_; }
  // Ends every read retry's wait now and later (the server is stopping).
  void Cancel() const { io_->Cancel(); }
  // Shards: the number of samples of each shard (consecutive indices, in
  // order), for the sampler's shard order; empty for files.
  std::vector<uint64_t> sample_groups() const;
  // Source::listing_digest: each usable file's name (the path's last
  // component, so a dataset moved elsewhere keeps it) and label, in order.
  uint64_t ListingDigest() const;
  // Note [Shared listing]: writes the usable files to `path`, for Open with
  // SourceOptions::listing_file in another process. FailedPrecondition for
  // tar shards; the file system's errors with the path.
  Status SaveListing(const std::string& path) const;

  // The fields of an image source: `image` (the transform's dtype, [3,S,S] or
  // [S,S,3]) and `label` (int64 []), in `memory`.
  std::vector<FieldSpec> fields(MemoryKind memory) const;
  // "image dataset ROOT (N files, train 224 float32[, details])".
  std::string Describe(std::string_view details = {}) const;
  // files, files_dropped_at_scan, files_dropped_at_decode, samples_dropped,
  // the usable files of each format (files_jpeg, files_png, files_webp,
  // files_bmp, files_tiff, files_pnm); shards also shards, shards_damaged;
  // the reader's counters.
  std::vector<std::pair<std::string, int64_t>> counters() const;
  // The names of counters(): a dataset shared by the sources of several
  // rings reports them once (Source::dataset_counters).
  std::vector<std::string> counter_names() const;
  int64_t files_dropped_at_decode() const { return files_dropped_at_decode_.load(); }
  int64_t samples_dropped() const { return samples_dropped_.load(); }

  // Note [Dropped files]: the file of `index` failed before; its sample is
  // dropped without an attempt. REQUIRES: 0 <= index < size().
  bool known_bad(int64_t index) const { return bad_[static_cast<size_t>(index)].load() != 0; }

  // Note [Dropped files]: kDropped when the file of `index` is known bad
  // (nothing runs); else runs attempt(index) (a Status-returning callable:
  // read and decode the file), kWritten when it succeeds; when it fails,
  // OnDecodeError: the error (on_error=fail) or kDropped (skip). Counts every
  // kDropped in samples_dropped.
  template <typename Attempt>
  Result<SampleFill> Decode(int64_t index, Attempt&& attempt);

  // A failure of `index`'s file: with on_error=fail, the error to stop with
  // ("PATH: reason (--on-error fail)"); with skip, marks the file known bad
  // (the first time: warns and counts it in files_dropped_at_decode) and
  // returns OK, unless more than drop_limit() files have now failed after the
  // scan: then DataLoss (Note [Dropped files]). Cancelled (a read cut short
  // because the server stops) is returned as it is: the file is not marked.
  Status OnDecodeError(int64_t index, const Status& error);
  // Source::DroppedElsewhere: each sample counted in samples_dropped, and
  // unless known bad already, OnDecodeError with the reason that another
  // process dropped it.
  Status DroppedElsewhere(std::span<const int64_t> indices);
  // Note [Dropped files]: how many files may fail after the scan before the
  // producer stops: max(10, a tenth of the usable files, twice the files the
  // scan dropped).
  uint64_t drop_limit() const;

  // A header as the scan reads it: the format, and the JPEG header (for the
  // other formats only what File::info says).
  struct Header {
    image::ImageFormat format = image::ImageFormat::kUnknown;
    image::JpegInfo info;
  };

 private:
  // A scanned sample: usable when `verdict` is OK.
  struct Candidate {
    File file;
    Status verdict;
  };
  // What the scan of files or shards found.
  struct Scan {
    std::vector<Candidate> candidates;
    std::vector<std::string> shards;
    std::vector<Status> damage;  // one per damaged shard
    uint64_t dropped = 0;        // a saved listing: what its scan dropped
  };
  static Result<Scan> ScanFiles(const SourceOptions& options, uint64_t max_pixels, int threads,
                                const Classify& classify, RetryingReader& io);
  static Result<Scan> ScanShardData(const SourceOptions& options, uint64_t max_pixels, int threads,
                                    const Classify& classify, RetryingReader& io);
  // Note [Shared listing]: the scan SaveListing wrote (every candidate
  // usable), checked against its digest.
  static Result<Scan> ReadListing(const std::string& path);
  // ListingDigest, one file at a time from kEmptyDigest.
  static const uint64_t kEmptyDigest;
  static uint64_t AddToDigest(uint64_t digest, const File& f);

  ImageDataset(std::string root, image::TransformOptions transform, ErrorPolicy on_error,
               std::vector<File> files, uint64_t dropped, std::vector<std::string> shards,
               uint64_t shards_damaged, std::unique_ptr<RetryingReader> io)
      : root_(std::move(root)),
        transform_(transform),
        on_error_(on_error),
        files_(std::move(files)),
        dropped_(dropped),
        shards_(std::move(shards)),
        shards_damaged_(shards_damaged),
        io_(std::move(io)),
        format_files_(CountFormats(files_)),
        bad_(new std::atomic<uint8_t>[files_.size()]()) {}

  // The files of each of image::kDecodedFormats.
  static std::array<int64_t, std::size(image::kDecodedFormats)> CountFormats(
      const std::vector<File>& files);

  const std::string root_;
  const image::TransformOptions transform_;
  const ErrorPolicy on_error_;
  const std::vector<File> files_;
  const uint64_t dropped_;
  const std::vector<std::string> shards_;
  const uint64_t shards_damaged_;
  const std::unique_ptr<RetryingReader> io_;
  const std::array<int64_t, std::size(image::kDecodedFormats)> format_files_;
  std::unique_ptr<SampleReader> reader_;  // set by Open
  // Note [Dropped files]: per file, 1 once it failed (known bad).
  const std::unique_ptr<std::atomic<uint8_t>[]> bad_;
  std::atomic<int64_t> files_dropped_at_decode_{0};
  std::atomic<int64_t> samples_dropped_{0};
};

// The dataset that the sources of a server's rings share (MakeSources,
// batchcast/sources/make_source.h): the first source made scans it, for
// `rings` readers; the others use it.
struct DatasetShare {
  uint32_t rings = 1;
  std::shared_ptr<ImageDataset> dataset;
};

// The dataset a source reads: `share`'s when another ring's source opened it
// already, else the one `open(readers)` opens (readers: the share's rings, 1
// without a share), which is left in `share` for the others.
template <typename Open>
Result<std::shared_ptr<ImageDataset>> SharedDataset(DatasetShare* share, Open&& open) {
  if (share != nullptr && share->dataset != nullptr) return share->dataset;
  Result<std::unique_ptr<ImageDataset>> opened = open(share != nullptr ? share->rings : 1u);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<ImageDataset> dataset = std::move(*opened);
  if (share != nullptr) share->dataset = dataset;
  return dataset;
}

template <typename Attempt>
Result<SampleFill> ImageDataset::Decode(int64_t index, Attempt&& attempt) {
  if (!known_bad(index)) {
    const Status s = attempt(index);
    if (s.ok()) return SampleFill::kWritten;
    BATCHCAST_RETURN_IF_ERROR(OnDecodeError(index, s));
  }
  samples_dropped_.fetch_add(1);
  return SampleFill::kDropped;
}

}  // namespace batchcast
