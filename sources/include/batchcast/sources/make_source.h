// MakeSource: the built-in source that SourceOptions describe.
#pragma once

#include <memory>

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

}  // namespace batchcast
