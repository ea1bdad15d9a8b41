// Source: where the producer's samples come from (synthetic data, an image
// dataset, or a source of the user's), and SlotView, the ring slot it writes.
//
// The producer asks a Source to fill whole producer batches straight into
// ring slots. Sources that produce one sample at a time derive from
// SampleSource, which fans the samples of a batch out over its own worker
// threads.
//
// A sample whose file turns out to be bad while it is made (an image that
// fails to decode) is *dropped*: never replaced by another sample. FillBatch
// returns how many samples it wrote (`valid`); they lie, in the order of the
// slot's indices, at positions 0..valid-1, and it rewrites
// SlotView::indices[0..valid) to name exactly them. The slot's other seqs are
// holes: seqs without a sample (docs/semantics.md, "Bad input").
//
// Thread-safety: FillBatch is called from one producer thread at a time;
// SampleSource::FillSample is called concurrently, with distinct `worker`
// numbers (0..workers()-1) so that per-thread scratch can be indexed by it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"

namespace batchcast {

// One ring slot being written: which samples, and where each field of each
// sample goes. Sample i of field f lives at field_data[f] + i * field_bytes[f].
// The server hands one to a Source (FillBatch) and to external producers
// (Server::BeginBatch).
struct SlotView {
  uint32_t slot = 0;       // ring slot number
  uint64_t first_seq = 0;  // seq number of sample 0 in the stream
  uint32_t epoch = 0;      // producer epoch
  // Dataset index of each sample; count() = indices.size(). FillBatch
  // compacts it: indices[0..valid) name the samples it wrote (see above).
  std::span<int64_t> indices;
  std::vector<uint8_t*> field_data;  // sample 0 of each field
  std::vector<size_t> field_bytes;   // bytes per sample of each field
  // Where field_data points: host memory, or device memory of a CUDA ring
  // ({kCuda, N}). Device writes are queued on `stream` (a stream of device N)
  // and need not be complete when FillBatch returns: the server records the
  // slot's event on `stream` after FillBatch and before consumers may read
  // the slot.
  Device device;
  CudaStreamRef stream;

  size_t count() const { return indices.size(); }
  uint8_t* sample(size_t field, size_t i) const {
    return field_data[field] + i * field_bytes[field];
  }
};

// A hint: the samples most likely asked for next (empty when unknown), so that
// a source may start reading their files ahead. It never changes what a call
// writes.
struct ReadAhead {
  std::span<const int64_t> indices;
  uint32_t epoch = 0;
  // The batch may go to another ring (a server of several rings placing
  // batches by demand, whose plan may change before the batch is begun): a
  // reader that rings share keeps what is read ahead for whichever ring
  // gets it.
  bool guess = false;
};

// Cumulative time of one stage of a source's FillBatch, for stats
// (`producer_stage_s`, docs/stats.md).
struct StageTime {
  std::string name;  // "read", "hw_decode", "fallback_decode", "augment", ...
  // Seconds spent in the stage since start, summed over the threads that ran
  // it (worker-seconds: a stage on several threads may exceed wall time).
  double seconds = 0;
  int threads = 1;  // how many threads may run the stage at once
};

class Source {
 public:
  virtual ~Source() = default;
  // Number of samples in the dataset (before sharding).
  virtual uint64_t size() const = 0;
  // Field specs; the server sets their memory kind to the ring's.
  virtual std::vector<FieldSpec> fields() const = 0;
  // A short description for logs and stats ("synthetic 1000 x [3,64,64]").
  virtual std::string description() const = 0;
  // Fills the samples of `slot` and returns how many it wrote, `valid` <=
  // slot.count(): positions 0..valid-1, in the order of slot.indices, whose
  // first `valid` entries it rewrites to name them (dropped samples removed;
  // see above). An error stops the producer.
  virtual Result<uint32_t> FillBatch(const SlotView& slot, const ReadAhead& next) = 0;
  // Where FillBatch writes: kHost (the default; with a device ring the server
  // gives it pinned staging memory and copies that to the slot) or kCuda (it
  // writes device slots itself, queued on SlotView::stream).
  virtual MemoryKind output_memory() const { return MemoryKind::kHost; }
  // Counters for stats (files skipped, ...), as JSON-able key/value pairs.
  virtual std::vector<std::pair<std::string, int64_t>> counters() const { return {}; }
  // The names among counters() that are the dataset's rather than this
  // source's own (files, files of each format, files dropped, reads
  // retried, ...): the sources of a server's rings share one dataset
  // (MakeSources, make_source.h), so the server counts these once and sums
  // the others.
  virtual std::vector<std::string> dataset_counters() const { return {}; }
  // Samples stored in groups that are read sequentially (tar shards): the
  // number of samples of each group, which hold consecutive indices in order
  // (group 0 the first ones). The producer then visits whole groups in a
  // seeded order through a shuffle buffer (SourceOptions::shuffle_buffer)
  // instead of a permutation of all indices. Empty (the default): random
  // access.
  virtual std::vector<uint64_t> sample_groups() const { return {}; }
  // A digest of what the dataset lists (each sample's file name and label,
  // in index order), so that a consumer's saved place is refused by a
  // server of another dataset (docs/semantics.md, "Resume"); 0 when the
  // size and fields say it all (synthetic data).
  virtual uint64_t listing_digest() const { return 0; }
  // Writes the dataset's files as this source scanned them to `path`, for a
  // source of the same options in another process
  // (SourceOptions::listing_file), which then neither lists nor scans the
  // dataset. InvalidArgument where there is no such listing (synthetic data,
  // tar shards).
  virtual Status SaveListing(const std::string& path) const {
    (void)path;
    return InvalidArgumentError(description() + " has no listing of files to share");
  }
  // Samples of a slot that another process filling it with a source of the
  // same options (an attached producer) dropped: counted as this source's
  // own FillBatch counts a drop, their files known bad from now on (so this
  // source drops them without a try when it fills the ring again). Errors
  // as FillBatch's for too many dropped files. The default counts nothing.
  virtual Status DroppedElsewhere(std::span<const int64_t> indices) {
    (void)indices;
    return Status::Ok();
  }

  // Time per stage of FillBatch (see StageTime); empty when the source does
  // not time its stages. Called by other threads while FillBatch runs.
  virtual std::vector<StageTime> stage_times() const { return {}; }
  // Makes a FillBatch that waits (to retry a failed read, say) return soon
  // with Cancelled, now and in every later call: the server is stopping.
  // Thread-safe: called by another thread while FillBatch runs.
  virtual void Cancel() {}
};

// What SampleSource::FillSample did with its sample.
enum class SampleFill : uint8_t {
  kWritten,  // the sample is at `out`
  kDropped,  // its file is bad: no sample (a hole); `out` may hold anything
};

// A source that fills one sample at a time, on `workers` threads (the
// producer's thread takes part as worker 0). FillBatch fills sample i at
// position i, then moves the written samples down over the dropped ones
// (memmove per field), so a SampleSource writes host memory only (its
// output_memory() is kHost).
class SampleSource : public Source {
 public:
  // REQUIRES: workers >= 1.
  explicit SampleSource(int workers);
  ~SampleSource() override;

  Result<uint32_t> FillBatch(const SlotView& slot, const ReadAhead& next) override;
  // Writes sample `index` of producer epoch `epoch` to out[f] for each field
  // f, or drops it (kDropped: its file is bad and the policy says skip). An
  // error stops the producer.
  virtual Result<SampleFill> FillSample(int worker, uint32_t epoch, int64_t index,
                                        std::span<uint8_t* const> out) = 0;
  int workers() const { return workers_; }

 private:
  class Pool;
  int workers_;
  std::unique_ptr<Pool> pool_;
  std::vector<uint8_t> written_;  // per sample of the batch in FillBatch: 1 = kWritten
};

}  // namespace batchcast
