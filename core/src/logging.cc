#include "core/src/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace batchcast {

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::get("batchcast");
    if (!l) l = spdlog::stderr_color_mt("batchcast");
    l->set_pattern("[%H:%M:%S.%e] [batchcast] [%^%l%$] %v");
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

}  // namespace batchcast
