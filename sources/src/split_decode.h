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
// Thread-safety: RunSplitDecode is called by one thread at a time (the
// pipeline's); it calls Route on several threads at once, for distinct
// samples and distinct `worker` numbers, and DecodeHardware on the calling
// thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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
  // Routes sample i into sample(i) (SampleRouter::Route): reads its file if
  // needed and decodes it on the CPU when its route says so; a bad file is
  // dropped (route kDropped) or its error returned (on_error=fail).
  virtual Status Route(int worker, size_t i, bool force_cpu) = 0;
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

// The compaction of the batch: the positions of the samples not dropped, in
// order (sample positions[k] goes to output position k).
std::vector<size_t> KeepInOrder(std::span<const GpuSample> samples);

}  // namespace batchcast
