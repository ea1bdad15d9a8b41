// The log facility (core/src/logging.h): every message on one line, escaped;
// repeated lines rate-limited per call site with a "suppressed" count.
#include "core/src/logging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "../sources/log_capture.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using testing::LogCapture;

TEST(Logging, AMessageIsOneEscapedLine) {
  LogCapture log;
  BC_LOG_WARN("consumer '{}' joined", "evil\n[00:00:00.000] [batchcast] [error] forged\x1b[2J");
  const std::string text = log.text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("evil\\n[00:00:00.000] [batchcast] [error] forged\\x1b[2J"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("\n[00:00:00.000]"), std::string::npos) << text;
}

TEST(LogRateLimit, AdmitsTenPerSecondAndCountsTheRest) {
  LogRateLimit limit;
  const auto t0 = LogRateLimit::Clock::time_point() + 100s;
  uint64_t suppressed = 99;
  for (uint32_t i = 0; i < LogRateLimit::kLinesPerSecond; ++i) {
    ASSERT_TRUE(limit.Admit(t0 + i * 1ms, &suppressed));
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 37; ++i) EXPECT_FALSE(limit.Admit(t0 + 500ms, &suppressed));
  // The next window: the first line admitted reports what was dropped.
  ASSERT_TRUE(limit.Admit(t0 + 1001ms, &suppressed));
  EXPECT_EQ(suppressed, 37u);
  ASSERT_TRUE(limit.Admit(t0 + 1002ms, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  EXPECT_EQ(SuppressedNote(0), "");
  EXPECT_EQ(SuppressedNote(37), " [37 similar lines suppressed]");
}

TEST(LogRateLimit, TheMacroLimitsOneCallSite) {
  LogCapture log;
  for (int i = 0; i < 1000; ++i) BC_LOG_WARN_LIMITED("flood {}", i);
  EXPECT_LE(log.Count("flood"), static_cast<int>(2 * LogRateLimit::kLinesPerSecond));
  EXPECT_GE(log.Count("flood"), 1);
}

}  // namespace
}  // namespace batchcast
