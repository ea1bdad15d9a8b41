// The one logging facility of batchcast: spdlog, behind a named logger.
// Private to the project; users set the level with batchcast/core/log_level.h.
//
// Library code logs through Logger(); it never prints to stdout/stderr itself.
// The level comes from SetLogLevel() (the CLI's --log-level) or, for debugging
// only, the BATCHCAST_LOG_LEVEL environment variable (trace, debug, info, warn,
// error, off).
//
// Every message is written on one line: its text goes through EscapeText
// (core/src/escape.h), so a newline or an escape sequence in a consumer's
// name, a file name or a peer's message cannot forge a line or drive the
// terminal.
//
// Lines that a peer or a flood of events can repeat at will use the _LIMITED
// forms: at most LogRateLimit::kLinesPerSecond lines per second from one call
// site (one "kind"); the first line written after some were dropped ends with
// "[N similar lines suppressed]".
//
// Thread-safety: the logger and LogRateLimit are thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "batchcast/core/log_level.h"
#include "core/src/mutex.h"

namespace batchcast {

spdlog::logger& Logger();

// The formatter of Logger()'s sinks (time, level, the escaped message); for
// sinks added later (tests capture the log with it).
std::unique_ptr<spdlog::formatter> MakeLogFormatter();

// Admits at most kLinesPerSecond lines per one-second window and counts the
// others. Time is passed in, so that tests need no sleeps.
class LogRateLimit {
 public:
  static constexpr uint32_t kLinesPerSecond = 10;
  using Clock = std::chrono::steady_clock;

  // True when a line may be written at `now`; then *suppressed is the number
  // of lines dropped since the last one admitted (to be mentioned).
  bool Admit(Clock::time_point now, uint64_t* suppressed) BC_EXCLUDES(mu_);

 private:
  Mutex mu_;
  Clock::time_point window_start_ BC_GUARDED_BY(mu_){};
  uint32_t in_window_ BC_GUARDED_BY(mu_) = 0;
  uint64_t suppressed_ BC_GUARDED_BY(mu_) = 0;
};

// " [N similar lines suppressed]", or "" for N = 0.
std::string SuppressedNote(uint64_t suppressed);

}  // namespace batchcast

#define BC_LOG_TRACE(...) ::batchcast::Logger().trace(__VA_ARGS__)
#define BC_LOG_DEBUG(...) ::batchcast::Logger().debug(__VA_ARGS__)
#define BC_LOG_INFO(...) ::batchcast::Logger().info(__VA_ARGS__)
#define BC_LOG_WARN(...) ::batchcast::Logger().warn(__VA_ARGS__)
#define BC_LOG_ERROR(...) ::batchcast::Logger().error(__VA_ARGS__)

// Rate-limited per call site (see above).
#define BC_LOG_LIMITED_(level, ...)                                                        \
  do {                                                                                     \
    if (::batchcast::Logger().should_log(level)) {                                         \
      static ::batchcast::LogRateLimit bc_log_limit_;                                      \
      uint64_t bc_suppressed_ = 0;                                                         \
      if (bc_log_limit_.Admit(::batchcast::LogRateLimit::Clock::now(), &bc_suppressed_)) { \
        ::batchcast::Logger().log(level, "{}{}", fmt::format(__VA_ARGS__),                 \
                                  ::batchcast::SuppressedNote(bc_suppressed_));            \
      }                                                                                    \
    }                                                                                      \
  } while (0)
#define BC_LOG_INFO_LIMITED(...) BC_LOG_LIMITED_(spdlog::level::info, __VA_ARGS__)
#define BC_LOG_WARN_LIMITED(...) BC_LOG_LIMITED_(spdlog::level::warn, __VA_ARGS__)
