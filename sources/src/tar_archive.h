// TarReader: one tar file read front to back, member by member, through
// libarchive (the only file that includes it: tar_archive.cc; without
// libarchive, tar_archive_stub.cc answers every Open with Unavailable,
// saying how to build with tar support).
//
// Reads are sequential (one pass, 1 MiB blocks), which is what shards on
// parallel file systems and object stores want. The file is opened with
// OpenRegularFile (dataset_files.h): a FIFO or device named as a shard is an
// error, never a hang.
//
// Failure: a damaged archive (truncated, corrupt header) makes Next or
// ReadData return DataLoss with libarchive's reason; the reader is then
// unusable (every later call returns the same error).
//
// Thread-safety: none; one thread uses a reader at a time. Move-only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast {

// True when this build reads tar shards (built with libarchive).
bool BuiltWithTar();

class TarReader {
 public:
  struct Member {
    std::string name;      // the member's path in the archive
    uint64_t size = 0;     // bytes of data
    bool regular = false;  // a regular file (directories, links, ... are not samples)
  };

  TarReader();
  ~TarReader();
  TarReader(TarReader&&) noexcept;
  TarReader& operator=(TarReader&&) noexcept;

  // Opens `path`. NotFound / InvalidArgument as OpenRegularFile; Unavailable
  // without libarchive.
  static Result<TarReader> Open(const std::string& path);

  // Moves to the next member: true with *member filled, false at the end of
  // the archive. Any data of the previous member not read is skipped.
  Result<bool> Next(Member* member);
  // Reads the data of the current member (all of it) into `out`.
  Status ReadData(std::vector<uint8_t>& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace batchcast
