// The sources of a server's rings (Note [Rings per GPU], device_list.h) must
// describe one dataset: sample index k must mean the same file and label on
// every ring, since the rings share one stream. MakeSources gives them one
// scan; RingSourcesAgree checks it of whatever sources a server is started
// with, since sources that disagreed would serve wrong samples without a
// word.
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
