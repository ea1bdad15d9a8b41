#include "core/src/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "core/src/escape.h"

namespace batchcast {
namespace {

// The %* flag: the message text, escaped (Note in logging.h).
class EscapedPayload final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string text = EscapeText(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedPayload>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> MakeLogFormatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedPayload>('*').set_pattern("[%H:%M:%S.%e] [batchcast] [%^%l%$] %*");
  return formatter;
}

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("batchcast");
    if (!l) l = spdlog::stderr_color_mt("batchcast");
    l->set_formatter(MakeLogFormatter());
    l->set_level(spdlog::level::info);
    if (const char* env = std::getenv("BATCHCAST_LOG_LEVEL"); env != nullptr) {
      l->set_level(spdlog::level::from_str(env));
    }
    return l;
  }();
  return *logger;
}

void SetLogLevel(std::string_view level) {
  Logger().set_level(spdlog::level::from_str(std::string(level)));
}

bool LogRateLimit::Admit(Clock::time_point now, uint64_t* suppressed) {
  MutexLock lock(&mu_);
  if (now - window_start_ >= std::chrono::seconds(1)) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= kLinesPerSecond) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  *suppressed = std::exchange(suppressed_, 0);
  return true;
}

std::string SuppressedNote(uint64_t suppressed) {
  if (suppressed == 0) return {};
  return " [" + std::to_string(suppressed) + " similar line" + (suppressed == 1 ? "" : "s") +
         " suppressed]";
}

}  // namespace batchcast
