// NvJpegBatch: the hardware batch of the GPU image source (stage 2 of
// CudaImageSource::FillBatch, cuda_image_source.cc): the files nvJPEG takes,
// staged in page-locked memory (Note [Pinned bitstreams]) and decoded by one
// or more batched nvJPEG calls at once (Note [Split hardware batch]) into the
// buffer set's arena, on the slot's stream.
//
// Thread-safety: StageFiles runs on the read-ahead thread (file_prefetcher.h)
// for one buffer set while the pipeline thread calls Decode for the other;
// the two touch disjoint sets (BatchBuffers' ownership rules,
// cuda_batch_buffers.h). Decode is called by one thread at a time (the
// pipeline's); it runs calls 1.. of a split batch on its own threads and
// returns after they are submitted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "background_task.h"
#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/status.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "batchcast/sources/source.h"
#include "cuda_batch_buffers.h"
#include "image_dataset.h"
#include "stage_times.h"

namespace batchcast {

// Note [Split hardware batch]: nvjpegDecodeBatched with the hardware backend
// holds the calling thread for about the whole decode, and beside a trainer
// that time-slices the GPU with the server (MPS off) one call's decode took
// 3x as long as alone (benchmarks/RESULTS.md, "Where the time goes"). With
// --nvjpeg-calls k the batch's hardware files are cut into k consecutive
// runs, decoded at once by k decoders (own nvJPEG handle and states): run 0
// on the pipeline thread on the slot's stream, run c on side_calls_[c-1] on
// the set's side stream c-1, followed by its side_done event, which the
// slot's stream waits for before the kernel reads the arena. Every run writes
// its own arena ranges. A run nvJPEG refuses (DataLoss) spoils the batch as
// one call would: the caller decodes all its hardware files on the CPU; the
// slot's stream still waits for every side run submitted, so that the set's
// `done` event covers them (the set and the decoders' states are reused only
// after it).
// Measured on an H100 (benchmarks/RESULTS.md, "What couples a fed trainer to
// its server"): k = 2 raised the server's own rate by about 14 % for 0.9 more
// cores, and did not speed up a trainer the server feeds (the k calls stretch
// together beside it). Hence the default of 1.
//
// Note [Pinned bitstreams]: the hardware batch's files go to nvJPEG from
// page-locked memory. nvJPEG copies each file to the device between two of
// its per-image waits on the GPU; that copy held the calling thread 9-13 us
// per image from pageable memory and 3-7 us from page-locked memory, and
// decode-only on an H100 rose from 25.1k to 31.5k images/s (RESULTS.md,
// "nvJPEG waits once per image in every setting"). The copy into page-locked
// memory stays off the pipeline thread where it can: after the read-ahead
// thread has read the next batch's files (FilePrefetcher::Start's `then`), it
// copies the hardware candidates among them into the set's `staged` buffer
// (NvJpegBatch::StageFiles); NvJpegBatch::Decode copies only the others
// (files read or transcoded on the pipeline thread) into `bitstreams`.
// nvJPEG may still be reading the last files when DecodeBatch returns, so
// both buffers of a set are rewritten only after its `done` event, like the
// arena: the read-ahead thread synchronizes with it before it writes `staged`
// (the event was recorded by the set's last FillBatch, which returned before
// this read started, and is recorded again only after Wait()).
class NvJpegBatch {
 public:
  // Stage indices of the source's StageTimes that StageFiles adds to.
  struct Stages {
    size_t read = 0;      // the copies into `staged`
    size_t gpu_wait = 0;  // the wait for the set's `done` event
  };

  // One decoder per nvJPEG call of a batch (Note [Split hardware batch]; the
  // first also answers Supports()); hardware decodes of the crop's region
  // only when `regions` and the decoders take them (Note [Region decode]).
  // The dataset and `stages` must outlive the batch.
  // REQUIRES: decoders not empty, all on `device`.
  NvJpegBatch(const ImageDataset& dataset, int device,
              std::vector<std::unique_ptr<cuda::NvJpegDecoder>> decoders, bool regions,
              StageTimes* stages, Stages stage_ids);

  // Gives `set` what the calls need: their argument vectors, and the side
  // streams (at `priority`, Note [Server stream priority]) and events of
  // calls 1...
  Status InitBuffers(BatchBuffers& set, StreamPriority priority) const;

  // The first decoder: it answers Supports() and names the backend.
  cuda::NvJpegDecoder& decoder() const { return *decoders_.front(); }
  // nvJPEG calls per batch (--nvjpeg-calls).
  size_t calls() const { return decoders_.size(); }
  // Hardware decodes write only the crop's region (Note [Region decode]).
  bool regions() const { return regions_; }

  // Note [Pinned bitstreams]: on the read-ahead thread, after it read the
  // files `indices` into set.files.
  void StageFiles(BatchBuffers& set, std::span<const int64_t> indices);

  // Submits nvJPEG's batched decode of the samples `ids` (routed kNvJpeg) of
  // `set` into its arena, on the slot's stream, with decode state `state`
  // (state k works for buffer set k). Sets each sample's region and arena
  // offset. DataLoss: nvJPEG refused the batch.
  Status Decode(const SlotView& slot, BatchBuffers& set, int state, std::span<const size_t> ids);

 private:
  // Where sample i's file lies in set.staged; null when it was not staged.
  static const BatchBuffers::StagedFile* Staged(const SlotView& slot, const BatchBuffers& set,
                                                size_t i);

  const ImageDataset& dataset_;
  const int device_;
  const std::vector<std::unique_ptr<cuda::NvJpegDecoder>> decoders_;
  const bool regions_;  // Note [Region decode]
  StageTimes* const stages_;
  const Stages stage_ids_;
  // The threads of calls 1.. (Note [Split hardware batch]).
  std::vector<std::unique_ptr<BackgroundTask>> side_calls_;
};

}  // namespace batchcast
