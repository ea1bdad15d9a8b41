// MetricsText: the Prometheus text exposition format (version 0.0.4), which
// the metrics endpoint answers (docs/metrics.md). Written here in one small
// file rather than taken from a client library: the server has no metric
// objects to keep, only the stats it renders at each scrape
// (metrics_render.h).
//
// The format: per family a `# HELP name text` line (backslash and newline
// escaped), a `# TYPE name counter|gauge` line, then its samples, one a
// line, `name{label="value",...} number`, every sample of a family together;
// label values escape backslash, double quote and newline, and are valid
// UTF-8 (text that is not is escaped by EscapeText first, core/src/escape.h);
// numbers are decimal, or NaN, +Inf, -Inf. Names follow Prometheus'
// conventions (docs/metrics.md): base units, `_total` for counters.
//
// Thread-safety: a MetricsText is used by one thread; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace batchcast {

enum class MetricType : uint8_t { kCounter, kGauge };
std::string_view MetricTypeName(MetricType type);  // "counter", "gauge"

// One metric family: every sample of one name.
struct MetricFamily {
  std::string_view name;  // [a-zA-Z_:][a-zA-Z0-9_:]*
  MetricType type;
  std::string_view help;  // one line
};

// A sample's labels, in the order written: names [a-zA-Z_][a-zA-Z0-9_]*,
// not starting with "__"; values any text.
using MetricLabels = std::vector<std::pair<std::string_view, std::string>>;

class MetricsText {
 public:
  // One sample of `family`, which must outlive the MetricsText. REQUIRES:
  // valid names (checked), labels not given twice for the same family.
  void Add(const MetricFamily& family, const MetricLabels& labels, double value);
  // The exposition: the families in the order of their first sample, each
  // with its HELP and TYPE lines; "" without samples.
  std::string Text() const;

 private:
  struct Samples {
    const MetricFamily* family;
    std::string lines;
  };
  std::vector<Samples> families_;
};

// True for a valid metric name / label name (label names starting with "__"
// are Prometheus' own: false).
bool IsMetricName(std::string_view name);
bool IsLabelName(std::string_view name);
// A label value between its double quotes.
std::string EscapeLabelValue(std::string_view value);
// The text of a HELP line.
std::string EscapeHelp(std::string_view help);
// A sample's value: integers exactly (up to 2^53), others in the shortest
// form that reads back the same; NaN, +Inf, -Inf.
std::string FormatMetricValue(double value);

}  // namespace batchcast
