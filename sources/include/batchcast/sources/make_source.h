// MakeSource: the built-in source that SourceOptions describe.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/sources/source.h"
#include "batchcast/sources/source_options.h"

namespace batchcast {

// SyntheticSource when options.synthetic > 0, else the image dataset at
// options.data: decoded by nvJPEG straight into device slots when the ring is
// on a GPU and options.decode allows (auto: when this build has nvJPEG and the
// device can be used), else by the CPU pipeline.
// REQUIRES: options.Validate() is OK.
Result<std::unique_ptr<Source>> MakeSource(const SourceOptions& options);

// One source per device of `devices` (a server's rings, one per GPU; host
// rings are Device::Cpu()), each as MakeSource makes it for `options` with
// that device, all over one dataset: it is listed and its headers read once,
// a file that fails on one ring is known bad to all (Note [Dropped files]),
// and tar shards are read once, through one reader, where a sample read
// ahead for one ring waits for the ring it was placed on. The dataset's
// counters are then the same on every source (Source::dataset_counters).
// Every source decodes as the first does (--decode auto: on the CPU after a
// first one on the CPU; a GPU that cannot decode after a first one on its
// GPU is an error), so all write their slots alike, from one dataset.
// Errors: MakeSource's, with the device it failed for.
// REQUIRES: options.Validate() is OK; devices is not empty.
Result<std::vector<std::unique_ptr<Source>>> MakeSources(const SourceOptions& options,
                                                         std::span<const Device> devices);

}  // namespace batchcast
