// Test helper: captures what batchcast logs (Logger()) while it lives.
#pragma once

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "core/src/logging.h"

namespace batchcast::testing {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    sink_->set_formatter(MakeLogFormatter());  // what users see
    Logger().sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = Logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() {
    sink_->flush();
    return out_.str();
  }
  // Lines that contain `needle`.
  int Count(const std::string& needle) {
    std::istringstream in(text());
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace batchcast::testing
