// The one logging facility of batchcast: spdlog, behind a named logger.
// Private to the project; users set the level with batchcast/core/log_level.h.
//
// Library code logs through Logger(); it never prints to stdout/stderr itself.
// The level comes from SetLogLevel() (the CLI's --log-level) or, for debugging
// only, the BATCHCAST_LOG_LEVEL environment variable (trace, debug, info, warn,
// error, off).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

#include "batchcast/core/log_level.h"

namespace batchcast {

spdlog::logger& Logger();

}  // namespace batchcast

#define BC_LOG_TRACE(...) ::batchcast::Logger().trace(__VA_ARGS__)
#define BC_LOG_DEBUG(...) ::batchcast::Logger().debug(__VA_ARGS__)
#define BC_LOG_INFO(...) ::batchcast::Logger().info(__VA_ARGS__)
#define BC_LOG_WARN(...) ::batchcast::Logger().warn(__VA_ARGS__)
#define BC_LOG_ERROR(...) ::batchcast::Logger().error(__VA_ARGS__)
