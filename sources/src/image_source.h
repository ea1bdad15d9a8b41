// ImageSource: an image dataset (image_dataset.h) decoded and augmented on the
// CPU (batchcast::image's CpuImagePipeline, one per worker thread).
//
// Fields `image` and `label` in host memory. Samples' bytes come from the
// dataset's SampleReader (sample_reader.h): files are read by the workers;
// tar shards by a prefetch thread, in stream order, one batch ahead
// (Note [Shard reads]). A file that fails while decoding
// follows Note [Dropped files] (image_dataset.h): with on_error=skip its
// sample is dropped (a hole: FillBatch returns fewer samples, compacted, and
// the slot's index list names exactly those), in this and every later epoch;
// with on_error=fail the producer stops with the path and reason.
//
// Thread-safety: as SampleSource (per-worker pipelines).
#pragma once

#include <memory>

#include "batchcast/sources/source.h"
#include "batchcast/sources/source_options.h"
// ListImageDataset and ImageEntry, which tests and benchmarks reach through
// this header.
#include "image_dataset.h"

namespace batchcast {

// Scans options.data (ImageDataset::Open) and builds the source with
// options.workers decoders (0: one per core). Files are read through `env`
// (nullptr: the real file system; tests inject faults). With `share` (the
// sources of several rings, MakeSources): its dataset when set (no scan),
// else the one scanned here, which is left there. Errors: those of Open.
Result<std::unique_ptr<Source>> MakeImageSource(const SourceOptions& options,
                                                ReadEnv* env = nullptr,
                                                DatasetShare* share = nullptr);

}  // namespace batchcast
