// The Prometheus text exposition (server/src/metrics_text.h): names, label
// escaping, numbers, and families written together with their HELP and TYPE.
#include "server/src/metrics_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace batchcast {
namespace {

TEST(MetricsText, NamesFollowTheDataModel) {
  EXPECT_TRUE(IsMetricName("batchcast_samples_published_total"));
  EXPECT_TRUE(IsMetricName("a:b_c9"));
  EXPECT_FALSE(IsMetricName(""));
  EXPECT_FALSE(IsMetricName("9lives"));
  EXPECT_FALSE(IsMetricName("has-dash"));
  EXPECT_FALSE(IsMetricName("has space"));
  EXPECT_TRUE(IsLabelName("consumer_id"));
  EXPECT_FALSE(IsLabelName("a:b"));  // colons are for metric names only
  EXPECT_FALSE(IsLabelName("__name__"));
  EXPECT_FALSE(IsLabelName("0rank"));
}

TEST(MetricsText, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("train.py:42"), "train.py:42");
  EXPECT_EQ(EscapeLabelValue(R"(a\b)"), R"(a\\b)");
  EXPECT_EQ(EscapeLabelValue(R"(say "hi")"), R"(say \"hi\")");
  // UTF-8 stays; a newline cannot end the line.
  EXPECT_EQ(EscapeLabelValue("caf\xC3\xA9"), "caf\xC3\xA9");
  const std::string newline = EscapeLabelValue("a\nb");
  EXPECT_EQ(newline.find('\n'), std::string::npos) << newline;
  // Bytes that are not UTF-8 become valid text.
  const std::string bad = EscapeLabelValue("x\xFF");
  EXPECT_EQ(bad.find('\xFF'), std::string::npos) << bad;
  // HELP text escapes backslash and newline, not quotes.
  EXPECT_EQ(EscapeHelp(R"(a "b" \c)"), R"(a "b" \\c)");
}

TEST(MetricsText, NumbersAreExactIntegersOrShortestDecimals) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(1234567890123), "1234567890123");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(std::stod(FormatMetricValue(0.1 + 0.2)), 0.1 + 0.2);
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
}

constexpr MetricFamily kA{"test_a_total", MetricType::kCounter, "A's help \\ here"};
constexpr MetricFamily kB{"test_b", MetricType::kGauge, "B"};

TEST(MetricsText, FamiliesAreWrittenTogetherWithHelpAndType) {
  MetricsText text;
  EXPECT_EQ(text.Text(), "");
  text.Add(kA, {{"x", "1"}}, 1);
  text.Add(kB, {}, 2.5);
  text.Add(kA, {{"x", "2"}, {"y", "q\""}}, 3);
  EXPECT_EQ(text.Text(),
            "# HELP test_a_total A's help \\\\ here\n"
            "# TYPE test_a_total counter\n"
            "test_a_total{x=\"1\"} 1\n"
            "test_a_total{x=\"2\",y=\"q\\\"\"} 3\n"
            "# HELP test_b B\n"
            "# TYPE test_b gauge\n"
            "test_b 2.5\n");
}

}  // namespace
}  // namespace batchcast
