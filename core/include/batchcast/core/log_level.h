// The level of batchcast's log (spdlog, logger "batchcast", to stderr).
#pragma once

#include <string_view>

namespace batchcast {

// "trace", "debug", "info" (the default), "warn", "error" or "off"; anything
// else leaves the level as it is. For debugging, the BATCHCAST_LOG_LEVEL
// environment variable sets it at start.
void SetLogLevel(std::string_view level);

}  // namespace batchcast
