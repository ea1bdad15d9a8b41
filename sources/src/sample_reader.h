// SampleReader: how the image sources (CPU and GPU) get the encoded bytes of
// a sample, whatever the storage: one file per sample (file_sample_reader.cc)
// or tar shards read sequentially (shard_sample_reader.cc). An ImageDataset
// owns the reader of its storage (ImageDataset::reader()).
//
// Note [Shard reads]
// A shard reader keeps each shard's file open and reads it front to back. A
// sample asked for that lies ahead in the open shard is reached by reading
// the members before it; the samples read on the way are *held* (their bytes,
// in memory) until asked for. A sample of another shard first holds the rest
// of the open shard, then opens that one. The order the sampler makes for
// shards (core/src/sampler.h: shards in a seeded order, each read
// sequentially, through a shuffle buffer of K samples) asks for samples so
// that at most K + (the samples of one batch) are held at once, and every
// shard is opened once per epoch (a reader that the rings of a server share,
// MakeSources: about K + a batch per ring, since each ring's batches wait
// there for it, and up to K + two batches per ring while one ring's
// read-ahead runs ahead of another ring's reads; its max_held grows with the
// rings, ImageDataset::Open). When batches are placed by demand a ring's
// read-ahead may miss (Note [Placement]: the plan may be drawn again before
// its batch): it peeks (Peek), the reader
// keeping a copy for the ring that gets the batch until that ring takes it
// or the guessing ring, which got it after all, forgets it; a sample another
// ring took already is declined rather than read again. Any other order is
// still served correctly: beyond `max_held` samples nothing more is held,
// and a sample already passed is found by reading its shard again (counted
// as `shard_rereads`). A shard that fails while read (changed or damaged
// since the scan) fails its remaining samples (each follows Note [Dropped
// files]) without reading it again.
//
// Thread-safety: Read may be called from any thread; a sequential() reader
// serializes its calls (a mutex), so callers that want speed read from one
// thread in the order of the stream (the prefetcher, file_prefetcher.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast {

class ImageDataset;

class SampleReader {
 public:
  virtual ~SampleReader() = default;
  // Reads the encoded bytes of sample `index` into `bytes`. A failure is the
  // sample's (Note [Dropped files]): DataLoss / NotFound with the reason.
  // REQUIRES: 0 <= index < the dataset's size.
  virtual Status Read(int64_t index, std::vector<uint8_t>& bytes) = 0;
  // Read for a read-ahead that may guess wrong (another ring may be the one
  // that gets the batch, Note [Placement]): a sequential reader keeps a copy
  // of the sample for whoever asks for it next (Read takes it), until
  // Forget(index), and declines (OutOfRange) a sample it passed already and
  // no longer holds: another reader took it. Others read as Read does.
  virtual Status Peek(int64_t index, std::vector<uint8_t>& bytes) { return Read(index, bytes); }
  // Drops what Peek kept of sample `index` (its reader uses the bytes it got).
  virtual void Forget(int64_t /*index*/) {}
  // True when reads are sequential per shard (see above).
  virtual bool sequential() const = 0;
  // Counters for stats.
  virtual std::vector<std::pair<std::string, int64_t>> counters() const { return {}; }
};

// The reader of a dataset of files: reads dataset.path(index).
std::unique_ptr<SampleReader> MakeFileSampleReader(const ImageDataset& dataset);

// The reader of a dataset of tar shards (Note [Shard reads]); holds at most
// `max_held` samples it read ahead. Samples the dataset knows bad are never
// held.
std::unique_ptr<SampleReader> MakeShardSampleReader(const ImageDataset& dataset, size_t max_held);

}  // namespace batchcast
