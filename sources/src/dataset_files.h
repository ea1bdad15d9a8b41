// The files of an image dataset: what ListImageDataset finds in an
// ImageFolder tree or a .tsv list, and how every file of it is read.
//
// An ImageFolder tree has one subfolder per class; labels are the class
// folders' indices in sorted (byte) order, as torchvision assigns them; the
// files with torchvision's image extensions below each class folder, sorted,
// are its samples. Symbolic links are followed, and each directory is listed
// once: a link back to a folder already listed (a loop, or a second link to
// one folder) is skipped with a warning, so the listing always ends and
// never lists a file twice. Entries that cannot be examined (a dangling link,
// a link to itself, a folder that cannot be read) are skipped with a warning.
// A .tsv list holds `path<TAB>label` lines (relative paths taken from the
// list's folder; blank lines and lines starting with '#' are skipped).
//
// Files are read only when they are regular files, opened without blocking
// (OpenRegularFile): a FIFO, a device or a socket in a dataset or a list is an
// error for that file, never a hang. File names may hold any bytes (they are
// shown escaped, core/src/escape.h).
//
// Thread-safety: pure functions (they read the file system).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast {

struct ImageEntry {
  std::string path;
  int64_t label = 0;
};

// Lists an ImageFolder directory or a .tsv file (see above). NotFound /
// InvalidArgument with the path (and `list.tsv:LINE:`) at fault; an empty
// dataset is InvalidArgument.
Result<std::vector<ImageEntry>> ListImageDataset(const std::string& path);

// Opens `path` read-only, without blocking, if it is a regular file; the
// caller closes the descriptor. Errors name the step and the system's
// reason: NotFound (missing: ENOENT, ENOTDIR, ELOOP), PermissionDenied
// (EACCES, EPERM), InvalidArgument when it is not a regular file (naming
// what it is), Unavailable for a failure that says nothing about the file
// (EMFILE, ENFILE, ENOMEM, EIO, ESTALE, EAGAIN, ...: Note [Read retries],
// read_retry.h).
Result<int> OpenRegularFile(const std::string& path);

// The code of a failure to read with errno `err` (Note [Read retries]):
// kNotFound, kPermissionDenied, kInvalidArgument, or kUnavailable for one
// that says nothing about the file (EMFILE, ENFILE, ENOMEM, EIO, ESTALE, ...).
StatusCode ReadErrorCode(int err);

// Reads the whole file, or its first `limit` bytes, into `out` (through
// OpenRegularFile). Errors as OpenRegularFile's; a read that fails, or ends
// before the size fstat gave (a short read), is Unavailable.
Status ReadFileBytes(const std::string& path, std::vector<uint8_t>& out, size_t limit = SIZE_MAX);

}  // namespace batchcast
