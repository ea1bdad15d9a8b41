#include "metrics_text.h"

#include <charconv>
#include <cmath>

#include "batchcast/core/check.h"
#include "core/src/escape.h"

namespace batchcast {
namespace {

bool IsNameChar(char c, bool first, bool colon) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return letter || (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

bool IsName(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

// `text` with backslash, newline and (for label values) double quote escaped.
std::string Escape(std::string_view text, bool quote) {
  // Valid UTF-8 without control characters, as the format wants (names
  // from peers are so already: control_loop.h).
  const std::string printable = IsPrintableText(text) ? std::string(text) : EscapeText(text);
  std::string out;
  out.reserve(printable.size());
  for (char c : printable) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string_view MetricTypeName(MetricType type) {
  return type == MetricType::kCounter ? "counter" : "gauge";
}

bool IsMetricName(std::string_view name) { return IsName(name, /*colon=*/true); }

bool IsLabelName(std::string_view name) {
  return IsName(name, /*colon=*/false) && !name.starts_with("__");
}

std::string EscapeLabelValue(std::string_view value) { return Escape(value, /*quote=*/true); }
std::string EscapeHelp(std::string_view help) { return Escape(help, /*quote=*/false); }

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (value == std::trunc(value) && std::fabs(value) <= kExact) {
    auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(value));
    return std::string(buf, p);
  }
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, p);
}

void MetricsText::Add(const MetricFamily& family, const MetricLabels& labels, double value) {
  Samples* samples = nullptr;
  for (Samples& s : families_) {
    if (s.family == &family) samples = &s;
  }
  if (samples == nullptr) {
    BATCHCAST_CHECK(IsMetricName(family.name));
    samples = &families_.emplace_back(Samples{&family, {}});
  }
  std::string& out = samples->lines;
  out += family.name;
  for (size_t i = 0; i < labels.size(); ++i) {
    BATCHCAST_CHECK(IsLabelName(labels[i].first));
    out += i == 0 ? "{" : ",";
    out += labels[i].first;
    out += "=\"";
    out += EscapeLabelValue(labels[i].second);
    out += '"';
  }
  if (!labels.empty()) out += '}';
  out += ' ';
  out += FormatMetricValue(value);
  out += '\n';
}

std::string MetricsText::Text() const {
  std::string out;
  for (const Samples& s : families_) {
    out += "# HELP ";
    out += s.family->name;
    out += ' ';
    out += EscapeHelp(s.family->help);
    out += "\n# TYPE ";
    out += s.family->name;
    out += ' ';
    out += MetricTypeName(s.family->type);
    out += '\n';
    out += s.lines;
  }
  return out;
}

}  // namespace batchcast
