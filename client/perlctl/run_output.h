// How perlctl shows runs and windows: human text and --json objects. The JSON
// keys are a stable interface for scripts (documented in the README,
// "perlctl"); integers are exact JSON numbers, percentiles an object from the
// percent as written ("99.9") to the exact integer latency.
//
// Pure functions; any thread.
#pragma once

#include <string>
#include <vector>

#include "daemon/common/json_writer.h"
#include "perld/v1/perld.pb.h"

namespace perld::perlctl {

using json::JsonWriter;
using json::ShortestDouble;

const char* TimeUnitText(v1::TimeUnit unit);  // "ms", "us", "ns"
const char* StateText(v1::RunState state);    // "running", "finished", "failed"
// "completed", "stopped", "shutdown", "failed"; "" when unspecified
const char* EndReasonText(v1::EndReason reason);
// The state with why it ended, e.g. "finished (stopped by request)".
std::string StateWithReason(const v1::RunInfo& run);
// "pending", "holding", "failing", "passed", "failed"; "" without an SLO.
const char* SloStateText(v1::SloStatus::State state);
// The run's SLO and its verdict lines, as `show` prints them ("" without one).
std::string SloText(const v1::RunInfo& run);
const char* SourceText(v1::RunSource source);
const char* WindowKindText(v1::Window::Kind kind);  // "periodic", "total_segment", "total"

// A run's latency kind (issue 30): "response" or "service", and what it
// means for this run ("service time under closed-loop load", ...).
const char* KindText(const v1::RunInfo& run);
std::string KindNote(const v1::RunInfo& run);
// A rate-controlled run's schedule, one line for people.
std::string ScheduleText(const v1::Schedule& schedule, const v1::RunInfo& run);

void WriteRunJson(const v1::RunInfo& run, JsonWriter& json);
// `run` (may be null) adds its "runId" and "runName" first (watch).
void WriteWindowJson(const v1::Window& window, JsonWriter& json, const v1::RunInfo* run = nullptr);

// How windows print for people (show, watch, history, bench --wait).
struct WindowFormat {
  bool sbk = false;              // --sbk: SBK's one-line form (WindowLine)
  std::vector<double> percents;  // --p: only these (empty: every one the window has)
};

// What a run set out to do: -records N (exact mode) or -seconds S (timed).
struct RunGoal {
  int64_t records = 0;  // 0: not a records goal
  double seconds = 0;   // 0: not a time goal (wins over records: then records cap)
  bool known() const { return records > 0 || seconds > 0; }
};
// "progress: 1200000 of 3000000 records (40%), ETA 2.7 s" (or "of 60 s")
// with a newline, after `records` done in `elapsed_s` since the run began;
// "" when the goal is unknown.
std::string ProgressText(const RunGoal& goal, int64_t records, double elapsed_s,
                         const std::string& indent = "  ");

// One line per run (header included) for `perlctl runs`: its result from
// `runs.totals` (records, length, rate, p50, p99 and max with their unit;
// "-" where a total has none); `wide` adds the source, end time and
// parameters.
std::string RunsTable(const v1::ListRunsResponse& runs, bool wide = false);
// `perlctl show`: the run, then its latest window and total.
std::string ShowText(const v1::GetRunResponse& run, const WindowFormat& format = {});
// One window as one SBK-style line, latencies in `unit`.
// One rule for times everywhere people read them, as the daemon's log: UTC,
// ISO 8601 with its Z (2026-12-05T12:47:26Z); "-" for 0.
std::string UtcTime(int64_t unix_ms);

std::string WindowLine(const v1::Window& window, v1::TimeUnit unit);
// One window for people: a header line (kind, length, records, rates), the
// latency line (min, avg, max, invalid, discarded, with the unit), then a
// percentile ladder wrapped at 100 columns, every value with its unit
// (`format.sbk`: WindowLine). Lines end in '\n'; each starts with `indent`.
// `title` replaces the window's own ("periodic 7", "total (final)"), e.g.
// for a range of windows.
std::string WindowText(const v1::Window& window, v1::TimeUnit unit, const WindowFormat& format,
                       const std::string& indent = "", const std::string& title = "");

}  // namespace perld::perlctl
