// OpenMetrics 1.0.0 for /metrics: content negotiation on the request's
// Accept header, and the conversion of a text 0.0.4 exposition (perld's own
// writer and prometheus-cpp's TextSerializer, which knows only 0.0.4) into
// OpenMetrics text (https://github.com/OpenObservability/OpenMetrics).
//
// Negotiation: OpenMetrics is answered when the Accept header names
// `application/openmetrics-text` (version absent or 1.0.0) with a q above 0
// and at least the q of text 0.0.4 (`text/plain` with version absent or
// 0.0.4, `text/*`, `*/*`); otherwise text 0.0.4, as without an Accept
// header. Wildcards never select OpenMetrics: `curl` keeps getting 0.0.4.
//
// Conversion, family by family (the 0.0.4 text's `# HELP`/`# TYPE` lines
// and the samples that follow them):
//   * a counter family `x_total` becomes family `x` with samples `x_total`;
//     a counter family `x` without the suffix keeps its name and its samples
//     become `x_total`. When `x` is also another family's name (e.g. the
//     gauge perld_exporter_runs_omitted next to the counter
//     perld_exporter_runs_omitted_total), the counter is written as an
//     `unknown` family `x_total` instead: the series names stay the same;
//   * `# UNIT` for families whose name ends in `_seconds` or `_bytes`;
//   * `_created` after each counter sample and each summary's `_count`:
//     the run's start (the value of the `run_start_family` gauge sample
//     whose labels are a prefix of the sample's labels) or else the process
//     start (the unlabelled `process_start_family` gauge), when present;
//   * `untyped` becomes `unknown`; an empty HELP is left out; HELP text
//     escapes `"` as well; label values are already escaped alike; values
//     spelled Nan/inf become NaN/+Inf; 0.0.4 millisecond timestamps become
//     seconds; blank lines and other comments are dropped;
//   * the text ends with `# EOF`.
// Order of families and samples is kept.
//
// Threads: pure functions; any thread.
#pragma once

#include <string>
#include <string_view>

namespace perld::http {

inline constexpr char kOpenMetricsContentType[] =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

enum class ExpositionFormat { kText004, kOpenMetrics100 };

// The format to answer a request with this Accept header ("" when absent).
ExpositionFormat NegotiateExposition(std::string_view accept);

struct OpenMetricsOptions {
  // A gauge family of run start times (Unix seconds), one sample per run
  // labelled with the run's identity labels.
  std::string_view run_start_family = "perld_run_start_time_seconds";
  // An unlabelled gauge of the process start time (Unix seconds).
  std::string_view process_start_family = "perld_start_time_seconds";
};

// Appends the OpenMetrics form of the text 0.0.4 exposition `text` to `out`,
// ending with "# EOF\n".
void AppendOpenMetrics(std::string_view text, const OpenMetricsOptions& options, std::string* out);
std::string ToOpenMetrics(std::string_view text, const OpenMetricsOptions& options = {});

}  // namespace perld::http
