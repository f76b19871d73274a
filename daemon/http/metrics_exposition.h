// Prometheus text exposition (format version 0.0.4) of a run's latest closed
// windows, as SBK's PrometheusLogger exposes them. Pure serialization: no I/O,
// no clocks; LatestMetrics adds the one lock between the printing thread and
// the HTTP threads.
//
// Metric families (every one a gauge, every name prefixed `perld_`):
//   perld_latency_resolution_seconds   the time unit in seconds (0.000000001: ns)
//   perld_window_seconds               window length, as the console prints it
//   perld_records, perld_bytes         records / bytes of the window
//   perld_records_per_second           records over the window's seconds
//   perld_mebibytes_per_second         bytes / 2^20 over the window's seconds:
//                                      exactly the console's "MB/sec"
//   perld_latency_average_seconds      SBK's average latency
//   perld_latency_min_seconds, perld_latency_max_seconds
//   perld_invalid_latencies            records with a negative latency
//   perld_lower_discards, perld_higher_discards
//   perld_latency_seconds{percentile="99.9"}            exact latency at each percentile
//   perld_latency_percentile_records{percentile="99.9"} records at exactly that latency
// Every sample carries storage, action, writers and readers; every window
// figure also carries window="interval" (the latest closed periodic window)
// or window="total" (the running total).
//
// Units (the choice): latencies are in seconds, the Prometheus base unit.
// Integer latencies are converted exactly: value / (1e9 / NanosPerUnit(unit))
// is printed as a decimal fraction built from integers (1234 us ->
// "0.001234"), never through a double, so a scraper can recover the exact
// integer in the run's unit with perld_latency_resolution_seconds. Only the
// average (a double already) goes through floating point. Counts are gauges,
// not counters: an interval window's count restarts every window, and a
// family has one type.
//
// Before the run's total window is closed, window="total" is the sum of the
// closed periodic windows (records, bytes, discards, min/max, average) and
// carries no percentile samples: exact percentiles of the whole run exist
// only once the total window closes (end of run, or an IsFull total report).
//
// Numbers are formatted without the C locale (std::to_chars): a process
// locale with a decimal comma never leaks into the text. NaN is "NaN",
// infinities "+Inf" / "-Inf". Label values escape backslash, double quote and
// newline; HELP text escapes backslash and newline.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/core/latency_config.h"
#include "daemon/core/latency_snapshot.h"

namespace perld::http {

// What every sample says about the run (fixed for the run).
struct ExpositionLabels {
  std::string storage = "PerlBench";
  std::string action;  // "Writing", "Reading" or "Write_Reading"
  int writers = 0;
  int readers = 0;
  // Labels before the SBK ones, e.g. {"run_id", "7"}, {"run", "nightly"}.
  std::vector<std::pair<std::string, std::string>> extra = {};
  bool sbk = true;  // false: only `extra` (storage/action/writers/readers left out)
};

// One window scope: its snapshot and its length in seconds (rates divide by
// it; 0 gives rate 0, as on the console).
struct ExpositionWindow {
  LatencySnapshot snapshot;
  double seconds = 0;
};

struct ExpositionInput {
  ExpositionLabels labels;
  TimeUnit unit = TimeUnit::kMs;             // unit of the snapshots' latencies
  std::optional<ExpositionWindow> interval;  // latest closed periodic window
  std::optional<ExpositionWindow> total;     // running total
};

// The full exposition text, newline-terminated. Window families are omitted
// while neither window exists; percentile samples are emitted for the
// snapshot's `percents` (none when empty). Pure; any thread.
std::string RenderExposition(const ExpositionInput& input);
// Several runs in one exposition: each family once, a sample set per run.
std::string RenderExposition(std::span<const ExpositionInput> runs);

// Building blocks, exposed for tests.
// Label value escaping: \ -> \\, " -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);
// Shortest round-trip text of `v`, locale-independent; NaN, +Inf, -Inf.
std::string FormatSampleValue(double v);
// `value` time units as exact decimal seconds: (1500, kMs) -> "1.5",
// (7, kNs) -> "0.000000007", (0, any) -> "0".
std::string UnitsToSecondsText(int64_t value, TimeUnit unit);

// LatestMetrics: the latest published windows, read by the render callback.
// Thread ownership: Publish from one thread (the bench's printing thread),
// Render from any thread (the HTTP server's handlers); one mutex guards the
// state, taken once per window and once per scrape, never per record.
class LatestMetrics {
 public:
  LatestMetrics(ExpositionLabels labels, TimeUnit unit);

  // Publishes one closed window, in the order they are printed. A periodic
  // window becomes window="interval" and is added to the running total; a
  // total window (end of run, or an IsFull total report) replaces the
  // running total and restarts the sum.
  void Publish(const LatencySnapshot& snapshot, double seconds, bool total);

  // RenderExposition of the current state.
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  ExpositionInput input_;                    // guarded by mu_
  std::optional<ExpositionWindow> running_;  // guarded by mu_: sum since the last total
};

}  // namespace perld::http
