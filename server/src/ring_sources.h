// The sources of a server's rings (Note [Rings per GPU], device_list.h) must
// describe one dataset: each ring's source scans it for itself at start, and
// sample index k must mean the same file and label on every ring, since the
// rings share one stream. A scan that saw another listing (the dataset
// changed while the server started, or a file could not be read by one
// scan) would serve wrong samples without a word; RingSourcesAgree refuses
// it instead.
#pragma once

#include <memory>
#include <span>

#include "batchcast/core/status.h"
#include "batchcast/sources/source.h"

namespace batchcast {

// OK when every source has the first one's size, fields, sample groups and
// listing digest; else Unavailable (start again) naming the first
// ring that differs and how. REQUIRES: !sources.empty().
[[nodiscard]] Status RingSourcesAgree(std::span<const std::unique_ptr<Source>> sources);

}  // namespace batchcast
