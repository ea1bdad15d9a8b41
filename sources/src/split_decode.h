// SplitDecode: one batch of the GPU image source decoded two ways at once:
// the files the hardware engine takes in one nvJPEG batch (submitted by the
// pipeline thread), the others (progressive, CMYK, unusual sampling, ...)
// on the CPU fallback pool at the same time, so that the fallback decodes
// do not add to the batch's time while the pool keeps up with them.
//
// Note [Concurrent fallback decode]
// A batch's samples are split by the scan (ImageDataset::File::flag) and
// Note [CPU-decoded file cache]: hardware candidates (the engine takes the
// file, or the cache holds its image) and the rest. Then:
//   1. read:     the candidates are routed on the pool (their files are
//                found read ahead, else read now; a file that cannot be read
//                is dropped, Note [Dropped files]);
//   2. decode:   the pipeline thread submits the hardware batch of the
//                candidates routed kNvJpeg (SplitDecodeOps::DecodeHardware)
//                while the pool's helper threads route the rest (CPU decodes,
//                DecodeRoute kCpuCropped / kCpuFullForCache), costliest first;
//                the pipeline thread joins them when its submission returns;
//   3. refused:  if the engine refuses the batch (DataLoss), its samples are
//                routed again with force_cpu on the whole pool.
// Every sample is routed into its own GpuSample, by position, exactly once
// per step (step 3 routes again only the refused batch's samples), so the
// batch keeps its order: compaction (KeepInOrder) then gives the kept
// samples consecutive output positions in the slot's order, and dropped ones
// leave holes (Note [Holes]). The overlap needs at least two pool threads
// (--workers >= 1 fallback decoder besides the pipeline thread).
//
// The hardware decoder and the per-sample work are behind SplitDecodeOps, so
// tests drive this with a fake that refuses files and takes time
// (tests/sources/split_decode_test.cc).
//
// Note [Fallback ahead]
// With RunSplitDecode alone the pipeline thread, after its hardware call,
// waits for the batch's last fallback decodes (milliseconds each): the engine
// idles meanwhile. SplitDecoder takes them off the batch's critical path:
// while batch k's hardware call is in flight, the fallback decodes of batch
// k+1 (the producer's read-ahead hint, ReadAhead) run on the pool, in the
// background (BackgroundTask); Decode(k+1) then only collects them (the wait
// is the `fallback_wait` stage: the pool does not keep up when it grows) and
// routes k+1's hardware candidates. The batch a round was started for is
// named by (epoch, indices); a Decode for any other batch (the first one, a
// wrong hint) discards the round and decodes the batch's fallback samples on
// the pool first (or, with no round to start, as RunSplitDecode does). The
// round's split
// (which samples are fallback) is the one Decode uses for that batch, so
// every sample is still routed exactly once per step. As the round routes
// before the hardware call, its samples may join that call (Note
// [Transcoded progressive files]): the hardware batch is every sample routed
// kNvJpeg, in the batch's order. The round writes only
// the next batch's samples and files (the other buffer set; host memory), and
// uses the pool while the pipeline thread does not: Decode routes the
// candidates before it starts the round, and a refused batch waits for the
// round before it uses the pool.
//
// Thread-safety: RunSplitDecode and SplitDecoder::Decode are called by one
// thread at a time (the pipeline's); they call Route on several threads at
// once, for distinct samples and distinct `worker` numbers, and
// DecodeHardware on the calling thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "background_task.h"
#include "batchcast/core/status.h"
#include "decode_route.h"
#include "stage_times.h"
#include "thread_pool.h"

namespace batchcast {

class SplitDecodeOps {
 public:
  virtual ~SplitDecodeOps() = default;
  // Sample i goes to the hardware engine or needs no decoding (cached).
  virtual bool HardwareCandidate(size_t i) const = 0;
  // Routes sample i into sample(i) (SampleRouter::Route, with `mode`):
  // reads its file if needed and decodes it on the CPU when its route says
  // so; a bad file is dropped (route kDropped) or its error returned
  // (on_error=fail). Routed with kHardware, a fallback sample may come out
  // kNvJpeg (Note [Transcoded progressive files]): it joins the hardware batch.
  virtual Status Route(int worker, size_t i, RouteFor mode) = 0;
  // Submits the hardware batch of the samples `ids` (all routed kNvJpeg).
  // DataLoss: the engine refused the batch.
  virtual Status DecodeHardware(std::span<const size_t> ids) = 0;
  virtual const GpuSample& sample(size_t i) const = 0;
  // The relative CPU cost of decoding sample i (e.g. its pixels): the
  // fallback decodes start with the costliest, so that the pool's threads end
  // together (longest first); it never changes where a sample goes.
  virtual uint64_t FallbackCost(size_t /*i*/) const { return 0; }
};

// Stage indices of the GPU source's StageTimes that RunSplitDecode adds to.
struct SplitDecodeStages {
  size_t read = 0;
  size_t hw_decode = 1;
  size_t fallback_decode = 2;
  size_t fallback_wait = 3;  // SplitDecoder only (Note [Fallback ahead])
};

struct SplitDecodeResult {
  size_t hw_decoded = 0;    // samples the hardware batch decoded
  size_t cpu_decoded = 0;   // samples decoded on the CPU (the refused batch's included)
  bool hw_refused = false;  // the engine refused the batch (its samples went to the CPU)
  Status hw_error;          // that refusal (DataLoss), for the log
};

// Runs Note [Concurrent fallback decode] for samples [0, n). Errors: a
// Route error (on_error=fail, or an internal one), or a hardware error other
// than DataLoss. `times` may be null.
Result<SplitDecodeResult> RunSplitDecode(ThreadPool& pool, size_t n, SplitDecodeOps& ops,
                                         StageTimes* times, SplitDecodeStages stages = {});

// A batch, as the producer names it: its epoch and its samples in order.
struct BatchKey {
  uint32_t epoch = 0;
  std::span<const int64_t> indices;
};

// The batch expected next, for Note [Fallback ahead]: its key and the ops of
// its samples (owning what they refer to until the round is collected).
struct AheadBatch {
  uint32_t epoch = 0;
  std::vector<int64_t> indices;
  std::unique_ptr<SplitDecodeOps> ops;  // null: no batch ahead
};

class SplitDecoder {
 public:
  // `times` may be null. The pool must outlive the decoder.
  SplitDecoder(ThreadPool& pool, StageTimes* times, SplitDecodeStages stages = {});
  ~SplitDecoder();  // Collect()s the round in flight
  SplitDecoder(const SplitDecoder&) = delete;
  SplitDecoder& operator=(const SplitDecoder&) = delete;

  // Decodes batch `key` through `ops` (as RunSplitDecode; its fallback
  // decodes come from the round started by the last call when that round
  // was for `key`) and starts the round of `next` (when next.ops is set).
  // Errors: as RunSplitDecode, and the round's error when it was for `key`.
  // REQUIRES: ops covers key.indices.size() samples; what next.ops refers to
  // outlives the round (the next Decode or Collect, or the destructor).
  Result<SplitDecodeResult> Decode(const BatchKey& key, SplitDecodeOps& ops, AheadBatch next = {});

  // Waits for the round in flight, if any, keeping its result for Decode;
  // afterwards the caller may touch the buffers the round writes. Timed as
  // fallback_wait.
  void Collect();

 private:
  // A started round and what it found; `ready` once Collect()ed.
  struct Round {
    AheadBatch batch;
    std::vector<size_t> fallback;  // the round's split: the samples it routes
    Status status;
    bool ready = false;
  };

  ThreadPool& pool_;
  StageTimes* const times_;
  const SplitDecodeStages stages_;
  std::unique_ptr<Round> round_;  // the last round started (null: none)
  BackgroundTask task_;           // last: its thread runs rounds that use the fields above
};

// The compaction of the batch: the positions of the samples not dropped, in
// order (sample positions[k] goes to output position k).
std::vector<size_t> KeepInOrder(std::span<const GpuSample> samples);

}  // namespace batchcast
