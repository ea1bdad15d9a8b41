// ScanShards: the index pass over tar shards in WebDataset layout. It reads
// every shard once, front to back (one shard per thread), and finds its
// samples:
//
// A sample is a run of consecutive members with one key: the member's path up
// to the first '.' of its file name ("a/000123.jpg" and "a/000123.cls" are
// key "a/000123", extensions "jpg" and "cls"). Its image is the first member
// with an image extension (jpg, jpeg, png, ppm, bmp, pgm, tif, tiff, webp;
// the format itself is told from the bytes: a KEY.jpg holding a PNG is a PNG);
// its label, an integer, is the text of its `.cls` member, else the "label"
// field of its `.json` member, else the text of its `.txt` member. Members
// of other extensions are ignored. A sample without an image or a label, or
// whose image `check` rejects (not an image it decodes, too large, ...), is still listed,
// with the reason (its `verdict`), so that the caller applies the bad-file
// policy (image_dataset.h).
//
// A damaged shard (truncated, corrupt header): the samples completed before
// the damage are listed, the sample in progress and the rest of the shard are
// lost; the shard's `damage` says where and why.
//
// Why no index cache next to the shards: the pass reads every image anyway to
// check its header (the same bad-file policy, and the GPU path's routing need
// it), which costs what reading the dataset once costs; a cache would have to
// be invalidated when a shard changes, and writing next to shared data (a
// read-only or shared file system) is what users of such storage do not
// expect.
//
// Thread-safety: a pure function; `check` runs on several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/image/image_format.h"
#include "batchcast/image/jpeg.h"
#include "read_retry.h"

namespace batchcast {

struct ShardSample {
  std::string name;     // "SHARD:MEMBER" of its image (or of its key), for messages
  uint32_t shard = 0;   // its shard's number in the expansion order
  uint64_t member = 0;  // the image member's position in the shard (0-based)
  int64_t label = 0;
  image::ImageFormat format = image::ImageFormat::kJpeg;  // from `check`
  image::JpegInfo info;                                   // from `check`
  bool flag = false;                                      // from `check`
  Status verdict;                                         // OK: usable
};

struct ShardScan {
  std::vector<std::string> shards;   // the expansion of the pattern
  std::vector<ShardSample> samples;  // in shard order, then member order
  std::vector<Status> damage;        // one per damaged shard
};

// Checks an image member's bytes (all of them): fills *format, *info and
// *flag, or says why the sample cannot be used.
using ShardImageCheck =
    std::function<Status(const std::string& name, std::span<const uint8_t> bytes,
                         image::ImageFormat* format, image::JpegInfo* info, bool* flag)>;

// Expands `data` (shard_pattern.h) and scans every shard on `threads`
// threads, with a progress line for long scans (scan_progress.h); a shard
// that cannot be read now is scanned again as `io` retries (Note [Read
// retries], read_retry.h). Errors: the expansion's; Unavailable when this
// build has no tar support.
Result<ShardScan> ScanShards(const std::string& data, int threads, const ShardImageCheck& check,
                             RetryingReader& io);

// The label of a `.cls`/`.txt` member (a non-negative integer, blanks
// around it allowed) or of a `.json` member (its "label" field).
Result<int64_t> ParseShardLabel(const std::string& ext, std::span<const uint8_t> bytes);

}  // namespace batchcast
