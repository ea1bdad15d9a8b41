// BatchBuffers: the host and device buffers of one batch in flight in the GPU
// image source. CudaImageSource keeps two sets that alternate, so that the
// files of batch n+1 are read (FilePrefetcher) while batch n decodes, and the
// buffers of batch n stay untouched until its GPU work is done.
//
// Ownership: the pipeline thread, except `files`, `staged` and `staged_at`
// while the prefetch thread owns them (file_prefetcher.h). A set is reused
// only after `done` has completed (FillBatch synchronizes with it first; the
// prefetch thread too, before it rewrites `staged`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/cuda_image/nvjpeg.h"
#include "decode_route.h"
#include "file_prefetcher.h"

namespace batchcast {

// Device allocations of a batch are laid out at multiples of 256 bytes.
inline constexpr size_t kDeviceAlign = 256;
inline size_t AlignUp(size_t n) { return (n + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign; }

struct BatchBuffers {
  std::vector<FileBuffer> files;  // sample i's file (read ahead or in stage 1)
  std::vector<GpuSample> samples;
  cuda::DeviceBuffer arena;  // nvJPEG outputs (kNvJpeg samples)
  // Note [Pinned bitstreams]: the hardware candidates' files read ahead,
  // copied into `staged` by the read-ahead thread (staged_at[i]: where file i
  // lies there, index -1 when it does not); the hardware batch's other files
  // (read or transcoded by the pipeline thread) copied into `bitstreams`.
  // nvJPEG may read both until `done`.
  struct StagedFile {
    int64_t index = -1;  // the dataset index of the bytes
    size_t offset = 0;
    size_t size = 0;
  };
  cuda::PinnedBuffer staged;
  std::vector<StagedFile> staged_at;
  cuda::PinnedBuffer bitstreams;
  cuda::PinnedBuffer upload;  // CPU-decoded images, then copied to `uploaded`
  cuda::DeviceBuffer uploaded;
  cuda::PinnedBuffer host_desc;  // AugmentSample[n] then int64 labels[n]
  cuda::DeviceBuffer dev_desc;
  cuda::Event done;  // after the kernel and the copies that read the set
  // The hardware batch's arguments per nvJPEG call (kept to reuse their
  // memory; Note [Split hardware batch]).
  std::vector<std::vector<std::span<const uint8_t>>> jpegs;
  std::vector<std::vector<cuda::NvJpegDecoder::Output>> outputs;
  // Calls 1.. of the hardware batch: their streams, and an event after each
  // call's work that the slot's stream waits for.
  std::vector<cuda::Stream> side_streams;
  std::vector<cuda::Event> side_done;
};

// Grows `b` to at least `bytes` (with 25% to spare) when it is smaller; its
// contents are not kept.
Status Grow(cuda::DeviceBuffer& b, int device, size_t bytes);
Status Grow(cuda::PinnedBuffer& b, size_t bytes);

}  // namespace batchcast
