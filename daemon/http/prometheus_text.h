// PrometheusText: a writer of the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/), and the
// number and label formatting every perld exposition shares.
//
// A family is started once with Family() (its `# HELP` and `# TYPE` lines)
// and followed by its samples; the caller writes families in a fixed order
// and samples in a fixed order within each, so the text is stable from one
// scrape to the next. A summary's samples are its quantiles (labels include
// quantile="...") plus `<name>_sum` and `<name>_count` (Sample with a suffix).
//
// Numbers never go through the C locale (std::to_chars): a decimal comma in
// the process locale cannot leak into the text. NaN is "NaN", infinities
// "+Inf" / "-Inf". Label values escape backslash, double quote and newline;
// HELP text escapes backslash and newline.
//
// Threads: a writer belongs to one thread; the free functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "daemon/core/latency_config.h"

namespace perld::http {

enum class MetricType { kCounter, kGauge, kSummary };

// A label set being built: `key="escaped value"` pairs joined by commas, in
// the order they are added.
class Labels {
 public:
  Labels() = default;
  Labels& Add(std::string_view key, std::string_view value);
  // Appends pairs already in label text form (another Labels' text()).
  Labels& AddText(std::string_view text);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

class PrometheusText {
 public:
  PrometheusText() = default;
  // Writes into `buffer` (cleared, its capacity kept): a caller that renders
  // often hands back the previous text's buffer and skips its regrowth.
  explicit PrometheusText(std::string buffer) : out_(std::move(buffer)) { out_.clear(); }

  // Writes `# HELP name help` and `# TYPE name type` and makes `name` the
  // current family.
  void Family(std::string_view name, MetricType type, std::string_view help);
  // Appends lines already in exposition form.
  void AppendText(std::string_view lines) { out_.append(lines); }
  // `name{labels} value` of the current family ("name value" without labels).
  void Sample(const Labels& labels, std::string_view value);
  // `name<suffix>{labels} value`: a summary's "_sum" and "_count".
  void Sample(std::string_view suffix, const Labels& labels, std::string_view value);
  // The same from label text: `name<suffix>{labels,extra} value`, where
  // `labels` is a Labels::text() and `extra` one more `key="value"` pair
  // already in label text form (either may be empty). No allocation beyond
  // the output's growth: the scrape's hot path.
  void SampleText(std::string_view suffix, std::string_view labels, std::string_view extra,
                  std::string_view value);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
};

// Appends one sample line `name<suffix>{labels,extra} value\n` to `out`
// (lines rendered apart from their family header, e.g. cached per run).
void AppendSampleLine(std::string* out, std::string_view name, std::string_view suffix,
                      std::string_view labels, std::string_view extra, std::string_view value);

// Label value escaping: \ -> \\, " -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);
// HELP text escaping: \ -> \\, newline -> \n.
std::string EscapeHelp(std::string_view text);
// Shortest round-trip text of `v`, locale-independent; NaN, +Inf, -Inf.
std::string FormatSampleValue(double v);
// `value` time units as exact decimal seconds, never through a double:
// (1500, kMs) -> "1.5", (7, kNs) -> "0.000000007", (0, any) -> "0".
std::string UnitsToSecondsText(int64_t value, TimeUnit unit);
// A percentile in percent as the quantile label text, exactly: shifts the
// decimal point of the percent's shortest text (99.9 -> "0.999", 50 ->
// "0.5", 100 -> "1"), so 99.9 never becomes 0.9990000000000001.
std::string PercentToQuantileText(double percent);

}  // namespace perld::http
