// AugmentLauncher: stages 3 and 4 of the GPU image source's FillBatch
// (cuda_image_source.cc): the upload of the batch's CPU-decoded images, and
// the launch of the fused augment kernel (batchcast/cuda_image/augment.h)
// that writes every kept sample into the slot, with its label.
//
// Both queue all their device work on SlotView::stream (Note [Device ring
// ordering], server/src/slot_publisher.h), after the batch's hardware decode,
// so the cache and arena writes precede the kernel that reads them; Launch
// ends with the buffer set's `done` event.
//
// Thread-safety: called by the pipeline thread only (it fills the CPU file
// cache: cpu_file_cache.h).
#pragma once

#include <cstdint>

#include "batchcast/core/status.h"
#include "batchcast/cuda_image/augment.h"
#include "batchcast/sources/source.h"
#include "cpu_file_cache.h"
#include "cuda_batch_buffers.h"
#include "image_dataset.h"

namespace batchcast {

class AugmentLauncher {
 public:
  // The kernel's parameters come from the dataset's transform. The dataset
  // and the cache must outlive the launcher.
  AugmentLauncher(const ImageDataset& dataset, CpuFileCache& cache, int device);

  // Stage 3: the CPU-decoded images of `set` into pinned memory, one copy to
  // the device, and new cache entries into their places (Note [CPU-decoded
  // file cache]; those samples turn kCachedFullImage).
  Status Upload(const SlotView& slot, BatchBuffers& set);

  // Stage 4: one descriptor per sample kept and the labels, then the fused
  // kernel into the slot, then the set's `done` event. Dropped samples (Note
  // [Dropped files]) leave no gap: the kept ones go to positions
  // 0..kept-1 in order (KeepInOrder, split_decode.h) and slot.indices is
  // compacted alike. Returns the number kept.
  Result<uint32_t> Launch(const SlotView& slot, BatchBuffers& set);

 private:
  const ImageDataset& dataset_;
  CpuFileCache& cache_;
  const int device_;
  cuda::AugmentParams params_;
};

}  // namespace batchcast
