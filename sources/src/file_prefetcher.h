// FilePrefetcher: the read-ahead thread of the GPU image source (and of the
// CPU image source on tar shards). While batch n decodes, it reads the bytes
// of the samples most likely asked for next (ReadAhead) through the dataset's
// SampleReader (sample_reader.h) into the other buffer set
// (cuda_batch_buffers.h), so that the pipeline thread finds them in memory.
// A batch's files are read on `read_threads` threads at once (the thread and
// a pool), since a disk serves several reads at a time and one thread waits
// out each read's latency; a sequential() reader's (shards) on the thread
// alone, in stream order.
//
// Hand-off: between Start(files, ...) and the next Wait() the thread owns
// *files (it may grow it and writes its buffers); the caller must not touch
// it. Wait() returns it. A hint that turns out wrong costs the read: the
// caller reads a file again when FileBuffer::index is not the one it needs.
// With a shard reader that several rings share (MakeSources) it may also
// cost another ring a reread of the shard, since reading a held sample takes
// it: the server gives no hint it cannot predict (producer_loop.cc).
//
// Thread-safety: Start, Wait and Stop are called by one thread (the pipeline's).
// Failure: a read that fails, even by an exception, is only logged: the
// pipeline reads the file again when it needs it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/core/status.h"
#include "core/src/mutex.h"
#include "image_dataset.h"
#include "stage_times.h"
#include "thread_pool.h"

namespace batchcast {

// The encoded bytes of one sample, and which sample they are.
struct FileBuffer {
  std::vector<uint8_t> bytes;
  int64_t index = -1;  // the dataset index whose bytes `bytes` holds; -1: none

  // Reads the bytes of `sample` through `reader` (Peek with `peek`); on
  // failure index is -1.
  Status Read(SampleReader& reader, int64_t sample, bool peek = false);
};

class FilePrefetcher {
 public:
  // With `enabled` false no thread is started and Start does nothing. The
  // reads' time goes to stage `stage` of `times` (when not null). A dataset
  // of files is read on `read_threads` threads at once (REQUIRES: >= 1).
  FilePrefetcher(const ImageDataset& dataset, bool enabled, StageTimes* times = nullptr,
                 size_t stage = 0, int read_threads = 1);
  ~FilePrefetcher();  // Stop()
  FilePrefetcher(const FilePrefetcher&) = delete;
  FilePrefetcher& operator=(const FilePrefetcher&) = delete;

  // Starts reading the file of indices[i] into (*files)[i] (grown to
  // indices.size(); out-of-range indices and files known bad, Note [Dropped
  // files], are skipped) on the thread, then runs then(indices) there (when
  // not null, even after a failed read; it times itself, and an exception it
  // throws is only logged). `guess` (ReadAhead::guess): the batch may go to
  // another ring, so the files are read with SampleReader::Peek. Does
  // nothing when disabled, stopped, or `indices` is empty (`then` does not
  // run).
  // REQUIRES: no read in flight (Wait() returned since the last Start).
  using Then = std::function<void(std::span<const int64_t> indices)>;
  void Start(std::vector<FileBuffer>* files, std::span<const int64_t> indices, Then then = nullptr,
             bool guess = false) BC_EXCLUDES(mu_);
  // Returns when the read Start began is done (at once when none is). The
  // samples of `batch` (the one the caller now writes) that were peeked are
  // its: the reader forgets its copies.
  void Wait(std::span<const int64_t> batch = {}) BC_EXCLUDES(mu_);
  // How many threads read a batch's files at once (1 for shards).
  int read_threads() const { return pool_ ? pool_->size() : 1; }
  // Ends the thread (after the read in flight, if any).
  void Stop() BC_EXCLUDES(mu_);

 private:
  void Loop() BC_EXCLUDES(mu_);
  // Reads the file of indices[i] into files[i] (those that may be read); an
  // error is an exception's (a read's own failure is left for its user).
  Status ReadAll(std::vector<FileBuffer>& files, const std::vector<int64_t>& indices, bool guess);

  const ImageDataset& dataset_;
  StageTimes* const times_;
  const size_t stage_;
  std::unique_ptr<ThreadPool> pool_;  // read_threads > 1 on a dataset of files
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;  // with mu_: busy_ or stop_ changed
  bool stop_ BC_GUARDED_BY(mu_) = false;
  bool busy_ BC_GUARDED_BY(mu_) = false;  // a read was started and is not done
  std::vector<FileBuffer>* files_ BC_GUARDED_BY(mu_) = nullptr;
  std::vector<int64_t> indices_ BC_GUARDED_BY(mu_);
  Then then_ BC_GUARDED_BY(mu_);
  bool guess_ BC_GUARDED_BY(mu_) = false;
};

}  // namespace batchcast
