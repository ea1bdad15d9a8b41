// Source: where the producer's samples come from (synthetic, an image folder, ...).
//
// The pipeline asks a Source to fill whole producer batches straight into ring
// slots. Most sources decode sample by sample and derive from SampleSource,
// whose FillBatch fans the samples out over the pipeline's worker threads.
//
// Thread-safety: FillBatch is called from one pipeline thread at a time;
// SampleSource::FillSample is called concurrently, with distinct `worker`
// numbers (0..workers-1) so that per-thread scratch can be indexed by it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"

namespace batchcast {

class ThreadPool;

// One producer batch to fill. field_data[f] points at sample 0 of the slot for
// field f; sample i of field f lives at field_data[f] + i * field_bytes[f].
struct BatchTarget {
  uint32_t epoch = 0;               // producer epoch
  std::span<int64_t> indices;       // dataset indices; a source may replace one
                                    // whose file turned out bad (skip policy)
  std::vector<uint8_t*> field_data;
  std::vector<size_t> field_bytes;  // per-sample bytes of each field
  // Where field_data points: host memory, or (only for sources whose
  // output_memory() is kCuda, writing into a device ring) device memory of
  // device.index; such a source queues its writes on `cuda_stream` (a
  // cudaStream_t) and need not wait for them (Note [Device ring ordering],
  // server/src/server.cc).
  Device device;
  void* cuda_stream = nullptr;
  // A hint: the dataset indices (and producer epoch) of the batch that will
  // most likely be asked for next (empty when unknown), so that a source may
  // start reading its files ahead. It must not change what this call writes.
  std::span<const int64_t> next_indices;
  uint32_t next_epoch = 0;
};

class Source {
 public:
  virtual ~Source() = default;
  // Number of samples in the dataset (before sharding).
  virtual uint64_t size() const = 0;
  // Field specs; the pipeline sets their memory kind to the ring's.
  virtual std::vector<FieldSpec> fields() const = 0;
  // A short description for logs and stats ("synthetic 1000 x [3,64,64]").
  virtual std::string description() const = 0;
  // Fills every sample of `target`. An error stops the producer (policy fail).
  virtual Status FillBatch(ThreadPool& pool, BatchTarget& target) = 0;
  // Where FillBatch writes: kHost (the default; with a device ring the pipeline
  // gives it pinned staging memory and copies that to the slot) or kCuda (it
  // writes device slots itself, see BatchTarget::cuda_stream).
  virtual MemoryKind output_memory() const { return MemoryKind::kHost; }
  // Counters for stats (files skipped, ...), as JSON-able key/value pairs.
  virtual std::vector<std::pair<std::string, int64_t>> counters() const { return {}; }
};

// A source that fills one sample at a time.
class SampleSource : public Source {
 public:
  Status FillBatch(ThreadPool& pool, BatchTarget& target) override;
  // Writes sample `index` of producer epoch `epoch` to out[f] for each field f.
  // May replace `index` with another dataset index (see BatchTarget::indices).
  virtual Status FillSample(int worker, uint32_t epoch, int64_t& index,
                            std::span<uint8_t* const> out) = 0;
};

}  // namespace batchcast
