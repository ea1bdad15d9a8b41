// ImageSource: an image dataset decoded and augmented on the CPU.
//
// The dataset is an ImageFolder tree (one subfolder per class; labels are the
// class folders' indices in sorted order, as torchvision assigns them; files
// with torchvision's image extensions) or a TSV list (`path<TAB>label` per
// line, relative paths taken from the list's folder).
//
// At start every file's JPEG header is read in parallel; files that cannot be
// used (unreadable, empty, not a JPEG, corrupt header, more than max_pixels)
// are dropped and named in the log (on_error=skip) or stop the start with the
// file's path and reason (on_error=fail). So the epoch length is exact.
//
// A file that fails later, while decoding (e.g. truncated data), is skipped
// with one warning per file and counted (`decode_errors` in stats): its sample
// is replaced by the next dataset index that decodes, and the batch's index
// list says so. With on_error=fail the producer stops with the path and reason.
//
// Thread-safety: as Source (per-worker decoders).
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "batchcast/image/jpeg.h"
#include "batchcast/image/transform.h"
#include "batchcast/sources/source.h"
#include "batchcast/sources/source_options.h"

namespace batchcast {

struct ImageEntry {
  std::string path;
  int64_t label = 0;
};

// Lists an ImageFolder directory or a .tsv file. NotFound / InvalidArgument
// with the path (and line) at fault.
Result<std::vector<ImageEntry>> ListImageDataset(const std::string& path);

// The transform the options ask for (validated).
Result<image::TransformOptions> MakeTransformOptions(const SourceOptions& options);

// Reads the whole file, or its first `limit` bytes, into `out`.
Status ReadFileBytes(const std::string& path, std::vector<uint8_t>& out, size_t limit = SIZE_MAX);

struct ScannedImage {
  ImageEntry file;
  image::JpegInfo info;
  bool flag = false;  // what ScanImageDataset's `classify` said
};

// Lists options.data and reads every JPEG header on `threads` threads. Files
// that cannot be used are dropped and named in the log (on_error=skip), or
// make the scan fail with the file's path and reason (on_error=fail).
// `classify`, when given, runs on the scanning thread for each usable file
// with its header bytes (e.g. to ask whether the GPU decoder takes it).
struct ScannedDataset {
  std::vector<ScannedImage> usable;
  uint64_t dropped = 0;
};
Result<ScannedDataset> ScanImageDataset(
    const SourceOptions& options, uint64_t max_pixels, int threads,
    const std::function<bool(const std::string& path, std::span<const uint8_t> header,
                             const image::JpegInfo& info)>& classify = {});

// Scans, filters and builds the source. `workers` decoders are made.
Result<std::unique_ptr<Source>> MakeImageSource(const SourceOptions& options);

}  // namespace batchcast
