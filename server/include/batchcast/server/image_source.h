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

#include <memory>

#include "batchcast/server/server_options.h"
#include "batchcast/server/source.h"

namespace batchcast {

struct ImageEntry {
  std::string path;
  int64_t label = 0;
};

// Lists an ImageFolder directory or a .tsv file. NotFound / InvalidArgument
// with the path (and line) at fault.
Result<std::vector<ImageEntry>> ListImageDataset(const std::string& path);

// Scans, filters and builds the source. `workers` decoders are made.
Result<std::unique_ptr<Source>> MakeImageSource(const ServerOptions& options);

}  // namespace batchcast
