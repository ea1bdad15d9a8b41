// FilePrefetcher: the read-ahead thread of the GPU image source. While batch n
// decodes, it reads the files of the samples most likely asked for next
// (ReadAhead) into the other buffer set (cuda_batch_buffers.h), so that the
// pipeline thread finds them in memory.
//
// Hand-off: between Start(files, ...) and the next Wait() the thread owns
// *files (it may grow it and writes its buffers); the caller must not touch
// it. Wait() returns it. A hint that turns out wrong costs only the read: the
// caller reads a file again when FileBuffer::index is not the one it needs.
//
// Thread-safety: Start, Wait and Stop are called by one thread (the pipeline's).
// Failure: a read that fails, even by an exception, is only logged: the
// pipeline reads the file again when it needs it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/core/status.h"
#include "core/src/mutex.h"
#include "image_dataset.h"

namespace batchcast {

// The bytes of one dataset file, and which file they are.
struct FileBuffer {
  std::vector<uint8_t> bytes;
  int64_t index = -1;  // the dataset index whose file `bytes` holds; -1: none

  // Reads `path`, the file of dataset index `index`; on failure index is -1.
  Status Read(const std::string& path, int64_t index_of_path);
};

class FilePrefetcher {
 public:
  // With `enabled` false no thread is started and Start does nothing.
  FilePrefetcher(const ImageDataset& dataset, bool enabled);
  ~FilePrefetcher();  // Stop()
  FilePrefetcher(const FilePrefetcher&) = delete;
  FilePrefetcher& operator=(const FilePrefetcher&) = delete;

  // Starts reading the file of indices[i] into (*files)[i] (grown to
  // indices.size(); out-of-range indices and files known bad, Note [Dropped
  // files], are skipped) on the thread. Does
  // nothing when disabled, stopped, or `indices` is empty.
  // REQUIRES: no read in flight (Wait() returned since the last Start).
  void Start(std::vector<FileBuffer>* files, std::span<const int64_t> indices) BC_EXCLUDES(mu_);
  // Returns when the read Start began is done (at once when none is).
  void Wait() BC_EXCLUDES(mu_);
  // Ends the thread (after the read in flight, if any).
  void Stop() BC_EXCLUDES(mu_);

 private:
  void Loop() BC_EXCLUDES(mu_);

  const ImageDataset& dataset_;
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;  // with mu_: busy_ or stop_ changed
  bool stop_ BC_GUARDED_BY(mu_) = false;
  bool busy_ BC_GUARDED_BY(mu_) = false;  // a read was started and is not done
  std::vector<FileBuffer>* files_ BC_GUARDED_BY(mu_) = nullptr;
  std::vector<int64_t> indices_ BC_GUARDED_BY(mu_);
};

}  // namespace batchcast
