// ImageDataset: an image dataset as both image sources (CPU: image_source.h,
// GPU: cuda_image_source.h) see it: the listing, the header scan, the
// bad-file policy with its counters, and what the source shows (fields,
// description, counters).
//
// A dataset is an ImageFolder tree (one subfolder per class; labels are the
// class folders' indices in sorted order, as torchvision assigns them; files
// with torchvision's image extensions, sorted, below each class folder) or a
// TSV list (`path<TAB>label` per line, relative paths taken from the list's
// folder; blank lines and lines starting with '#' are skipped). Listing and
// reading files: dataset_files.h.
//
// Open() reads every file's JPEG header in parallel; files that cannot be used
// (unreadable, empty, not a JPEG, corrupt header, more than max_pixels) are
// dropped and named in the log (on_error=skip), or stop the start with the
// file's path and reason (on_error=fail). So the epoch length is exact.
//
// A file that fails later, while decoding (e.g. truncated data), is handled
// by DecodeWithStandIn: see Note [Bad file stand-in].
//
// Thread-safety: after Open, everything is immutable except the decode-error
// policy (OnDecodeError, DecodeWithStandIn), which is thread-safe; so every
// method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/image/transform.h"
#include "batchcast/sources/source_options.h"
#include "core/src/mutex.h"
#include "dataset_files.h"

namespace batchcast {

// The transform the options ask for (validated).
Result<image::TransformOptions> MakeTransformOptions(const SourceOptions& options);

// Note [Bad file stand-in]
// A file that passed the scan but fails to decode, with on_error=skip, is
// warned about once per file and counted each time (`decode_errors`); its
// sample is replaced by the next dataset index (modulo the size) that
// decodes, at most 64 files on, and the slot's index list names the stand-in
// (SlotView::indices). So the stand-in appears twice in that epoch, against
// DESIGN.md "Exactly once holds with bad files too"; issue 10 replaces this
// with dropping the sample. Both image sources go through
// ImageDataset::DecodeWithStandIn, the one place to change.
// With on_error=fail the error (path and reason) stops the producer.
inline constexpr int kMaxStandIns = 64;

class ImageDataset {
 public:
  // One usable file: its listing entry, its JPEG header, and what Open's
  // `classify` hook said about it (false without a hook).
  struct File {
    ImageEntry entry;
    image::JpegInfo info;
    bool flag = false;
  };
  // Runs on a scanning thread for each usable file, with the bytes read of it
  // (at least its header) and the header's info.
  using Classify = std::function<bool(const std::string& path, std::span<const uint8_t> header,
                                      const image::JpegInfo& info)>;

  // Lists options.data and reads every JPEG header on `threads` threads (see
  // above). Errors: those of ListImageDataset and MakeTransformOptions; the
  // first unusable file's path and reason with on_error=fail; InvalidArgument
  // when no file is usable.
  static Result<std::unique_ptr<ImageDataset>> Open(const SourceOptions& options, int threads,
                                                    const Classify& classify = {});

  uint64_t size() const { return files_.size(); }
  // REQUIRES: 0 <= index < size().
  const File& file(int64_t index) const { return files_[static_cast<size_t>(index)]; }
  const std::string& path(int64_t index) const { return file(index).entry.path; }
  const image::TransformOptions& transform() const { return transform_; }
  uint64_t dropped_at_scan() const { return dropped_; }

  // The fields of an image source: `image` (the transform's dtype, [3,S,S] or
  // [S,S,3]) and `label` (int64 []), in `memory`.
  std::vector<FieldSpec> fields(MemoryKind memory) const;
  // "image dataset ROOT (N files, train 224 float32[, details])".
  std::string Describe(std::string_view details = {}) const;
  // files, files_dropped_at_scan, decode_errors.
  std::vector<std::pair<std::string, int64_t>> counters() const;
  int64_t decode_errors() const { return decode_errors_.load(); }

  // Note [Bad file stand-in]: runs attempt(index) (a Status-returning
  // callable: read and decode the file of `index`); while it fails under
  // on_error=skip, reports the failure and tries the next index. On success
  // `index` is the index that decoded. Errors: the failing file's path and
  // reason (on_error=fail); DataLoss after kMaxStandIns failures in a row.
  template <typename Attempt>
  Status DecodeWithStandIn(int64_t& index, Attempt&& attempt);

  // One decode failure of `index`'s file: with on_error=fail, the error to
  // stop with ("PATH: reason (--on-error fail)"); with skip, counts it, warns
  // once per file and returns OK.
  Status OnDecodeError(int64_t index, const Status& error);

 private:
  ImageDataset(std::string root, image::TransformOptions transform, ErrorPolicy on_error,
               std::vector<File> files, uint64_t dropped)
      : root_(std::move(root)),
        transform_(transform),
        on_error_(on_error),
        files_(std::move(files)),
        dropped_(dropped) {}

  const std::string root_;
  const image::TransformOptions transform_;
  const ErrorPolicy on_error_;
  const std::vector<File> files_;
  const uint64_t dropped_;
  std::atomic<int64_t> decode_errors_{0};
  Mutex warned_mu_;
  std::set<std::string> warned_ BC_GUARDED_BY(warned_mu_);  // paths warned about
};

template <typename Attempt>
Status ImageDataset::DecodeWithStandIn(int64_t& index, Attempt&& attempt) {
  for (int tries = 0; tries < kMaxStandIns; ++tries) {
    Status s = attempt(index);
    if (s.ok()) return s;
    BATCHCAST_RETURN_IF_ERROR(OnDecodeError(index, s));
    index = (index + 1) % static_cast<int64_t>(files_.size());
  }
  return DataLossError(std::to_string(kMaxStandIns) +
                       " consecutive files failed to decode; giving up");
}

}  // namespace batchcast
