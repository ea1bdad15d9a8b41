// CudaImageSource: an image dataset (image_dataset.h) decoded with nvJPEG and
// augmented by one fused CUDA kernel straight into device ring slots
// (docs/semantics.md, "GPU path").
//
// Same datasets, transforms, crops (image::PlanCrop) and bad-file policy
// (Note [Dropped files]: a file that fails is dropped, a hole in the slot) as
// the CPU ImageSource (image_source.h), so both paths crop alike.
//
// Decoding: at start every file's header is read; a file goes to the GPU when
// it is baseline JPEG that nvJPEG's batched decoder accepts
// (NvJpegDecoder::Supports) and ends with an EOI marker (eoi_probe.h: a
// truncated file goes to the CPU decoder, which reports it). The others (progressive, CMYK, ...)
// are decoded on the CPU: whole, once, into Note [CPU-decoded file cache]
// while it has room, else their DCT-scaled crop every time, as the CPU path
// does. Each sample's DecodeRoute (decode_route.h) says which. If nvJPEG
// rejects a batch, its files are decoded on the CPU one by one. CPU decodes
// run on `workers` threads (default 2), one batch ahead (Note [Fallback
// ahead], split_decode.h); besides them the pipeline thread (nvJPEG calls,
// uploads, the kernel launch) and one thread that reads the next batch's
// files ahead (file_prefetcher.h).
//
// Output (Source::output_memory() == kCuda): FillBatch queues everything on
// SlotView::stream and returns without waiting; two sets of buffers
// alternate (cuda_batch_buffers.h). The server records the slot's event after
// FillBatch returns (Note [Device ring ordering], server/src/slot_publisher.h), so every
// write here must be queued on SlotView::stream.
//
// Parts (sources/src): the pipeline (FillBatch and its buffer sets) in
// cuda_image_source.cc; the nvJPEG hardware batch and its page-locked
// staging in nvjpeg_batch.h; the upload of CPU decodes and the augment
// kernel's launch in augment_launch.h; the EOI probe of the scan in
// eoi_probe.h.
//
// Thread-safety: as Source.
#pragma once

#include <memory>

#include "batchcast/sources/source.h"
#include "batchcast/sources/source_options.h"

namespace batchcast {

struct DatasetShare;

// Unavailable when this build has no CUDA or nvJPEG, or the device cannot be
// used (so --decode auto can fall back to the CPU); other errors as
// MakeImageSource (missing dataset, no usable files, --on-error fail).
// `share` as MakeImageSource's: a dataset scanned for another ring's GPU
// keeps the files that GPU's nvJPEG took (a GPU of another model that
// refuses one decodes its batch on the CPU).
// REQUIRES: options.device is a CUDA device.
Result<std::unique_ptr<Source>> MakeCudaImageSource(const SourceOptions& options,
                                                    DatasetShare* share = nullptr);

}  // namespace batchcast
