// CpuFileCache: device memory holding the full decoded images of files the
// GPU cannot decode, for the GPU image source.
//
// Note [CPU-decoded file cache]
// Files the GPU cannot decode (progressive, CMYK, ...) cost milliseconds of
// CPU each, every epoch (Note [Concurrent fallback decode] keeps them off
// the batch's critical path while the fallback pool keeps up). With
// --device-cache-mb N (default 0: off; ImageNet's such files are tens of GB
// decoded, so a cache holds only a part of a real dataset) the first time
// such a file is used it is decoded whole (libjpeg-turbo) and kept, as RGB,
// in a device buffer of at most N MiB (places assigned in index order at
// start; files beyond the budget are decoded every time, cropped and
// DCT-scaled like the CPU path: DecodeRoute::kCpuCropped). Later uses
// read it from there like an nvJPEG output (DecodeRoute::kCachedFullImage).
// The decoded image of a file never changes, so the cache needs no
// invalidation; it is written on the producer stream before the kernels that
// read it, and only from the pipeline thread (Fill, stage 3 of
// CudaImageSource::FillBatch).
//
// Thread-safety: the place table is immutable after construction; holds() and
// CountHit() may run on several threads at once (stage 1 of FillBatch), but
// never concurrently with Fill(), which only the pipeline thread calls while
// no stage-1 work runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/status.h"
#include "batchcast/cuda/runtime.h"
#include "image_dataset.h"

namespace batchcast {

class CpuFileCache {
 public:
  // Assigns places, in index order while `budget_bytes` lasts, to the files of
  // `dataset` whose flag is false (nvJPEG does not take them).
  CpuFileCache(const ImageDataset& dataset, size_t budget_bytes);

  // Allocates the device memory on `device` (none when no file got a place).
  Status Allocate(int device);

  // Bytes of device memory the places take (0: no cache).
  size_t bytes() const { return bytes_; }
  // Files that have a place.
  size_t places() const { return places_; }
  bool has_place(int64_t index) const { return offset_[static_cast<size_t>(index)] >= 0; }
  // True once Fill(index) was queued: later work on the same stream reads it.
  bool holds(int64_t index) const { return filled_[static_cast<size_t>(index)] != 0; }
  // The full image of `index`, RGB, width * 3 bytes per row, in device memory.
  // REQUIRES: has_place(index), Allocate() succeeded.
  const uint8_t* image(int64_t index) const {
    return buffer_.data() + offset_[static_cast<size_t>(index)];
  }

  // Queues the copy of `bytes` bytes at `host` (the decoded image of `index`,
  // in pinned memory that lives until the stream has run the copy) into its
  // place on `stream`; from then on holds(index).
  // REQUIRES: has_place(index); the pipeline thread (see above).
  Status Fill(int64_t index, const uint8_t* host, size_t bytes, CudaStreamRef stream);

  void CountHit() { hits_.fetch_add(1, std::memory_order_relaxed); }
  int64_t hits() const { return hits_.load(); }

 private:
  cuda::DeviceBuffer buffer_;
  size_t bytes_ = 0;
  size_t places_ = 0;
  std::vector<int64_t> offset_;  // per dataset index, -1: no place
  std::vector<uint8_t> filled_;  // per dataset index: holds()
  std::atomic<int64_t> hits_{0};
};

}  // namespace batchcast
