// CudaImageSource: an image dataset decoded with nvJPEG and augmented by one
// fused CUDA kernel straight into device ring slots (DESIGN.md "GPU path").
//
// Same datasets, transforms, crop parameters and bad-file policy as the CPU
// ImageSource (batchcast/server/image_source.h): the crop of sample (epoch,
// index) is image::TrainCrop / image::EvalCrop, so both paths crop alike.
//
// Decoding: at start every file's header is read; a file goes to the GPU when
// it is baseline JPEG that nvJPEG's batched decoder accepts
// (NvJpegDecoder::Supports) and ends with an EOI marker (a truncated file goes
// to the CPU decoder, which reports it). The others (progressive, CMYK, ...)
// are decoded on the CPU (libjpeg-turbo, DCT-scaled crop, as the CPU path
// does) and uploaded. If nvJPEG rejects a batch, its files are decoded on the
// CPU one by one. CPU work (reading files, fallback decodes) uses at most
// `workers` threads (default 2, the pipeline's own thread included).
//
// Output (Source::output_memory() == kCuda): FillBatch queues everything on
// BatchTarget::cuda_stream and returns without waiting; two sets of buffers
// alternate, so batch n+1's files are read while batch n decodes.
// See Note [Device ring ordering] in server/src/slot_publisher.h.
//
// Thread-safety: as Source.
#pragma once

#include <memory>

#include "batchcast/sources/source.h"
#include "batchcast/sources/source_options.h"

namespace batchcast {

// Unavailable when this build has no CUDA or nvJPEG, or the device cannot be
// used (so --decode auto can fall back to the CPU); other errors as
// MakeImageSource (missing dataset, no usable files, --on-error fail).
// REQUIRES: options.device is a CUDA device.
Result<std::unique_ptr<Source>> MakeCudaImageSource(const SourceOptions& options);

}  // namespace batchcast
