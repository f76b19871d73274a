// `perlctl export RUN --format sbk-csv`: an ended run's stored windows and
// its total as SBK's CSV file, after the fact -- the file the daemon's csvDir
// writer (daemon/server/run_csv_writer.h) writes while a run runs, built
// from the Query API's protos by the same formatter (daemon/bench/
// sbk_report.h: CsvHeader, MakeReportRow, CsvRow), so a window's row reads
// the same in both files.
//
// The file: SBK's header (the run's percentiles), then a row per retained
// window in closing order -- Regular for a periodic window, Total for a
// total segment (the total window closed early on its own limit), as csvDir
// writes them -- and last a Total row for the run's final total.
//   ID         the row's place in the run's whole window sequence (what
//              csvDir numbers it), also when retention dropped older windows
//              (see DroppedWindows);
//   Date/Time  the window's own end (Window.end_unix_ms) in this process's
//              local time zone (csvDir writes the daemon's: the same file
//              when both run in one zone);
//   Storage, Action, LatencyTimeUnit, Writers, Readers: the run's (RunInfo),
//              as csvDir takes them from the run's spec;
//   Percentile_<p>, Percentile_Count_<p>: the window's, at the run's
//              percentiles; empty cells for a total that is not exact
//              (exact_total false: no percentile is known, never one computed
//              from part of the run) and for a window that lacks one of them
//              (MissingPercentiles; the caller names them).
// Windows the daemon no longer retains (retention.maxWindowsPerRun) have no
// row: the caller says so (SbkCsvFile::dropped) and exports the rest.
//
// Pure functions (no I/O, no clock: the wall-clock times are the windows');
// any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/bench/sbk_report.h"
#include "perld/v1/perld.pb.h"

namespace perld::perlctl {

// The columns fixed for the run: storage "PerlBench", the action from its
// writers and readers ("Writing", "Reading", "Write_Reading"), its time
// unit and percentiles -- exactly as RunCsvWriter fills them.
bench::ReportContext SbkReportContext(const v1::RunInfo& run);

// The percents of `percents` that `w` has no value for. None for a total
// that is not exact (it has none, by design) and for an empty window
// (valid_latency_records 0: every percentile is 0).
std::vector<double> MissingPercentiles(const v1::Window& w, const std::vector<double>& percents);

// A window's row figures: its counters, rates over its rate seconds, and its
// percentiles in the order of `percents` (0 for an empty window). No value
// at all (empty cells) for a total that is not exact or a window missing one
// of `percents`.
bench::ReportRow SbkReportRow(const v1::Window& w, const std::vector<double>& percents);

// The rows' windows of a history (GetWindowHistory: oldest retained first;
// a history restored from the state directory lists the periodic windows
// before the total segments): its periodic windows and total segments in
// closing order -- by end time, a periodic window before the segment that
// closed with it -- without the run total.
std::vector<v1::Window> SbkRowWindows(const std::vector<v1::Window>& history);

// The run's windows (periodic and total segments) that closed before
// `rows` (SbkRowWindows of a history) and are gone: the history keeps the
// newest, so the dropped ones are the older ones -- none when the run's
// first periodic window is retained (a total segment closes with a periodic
// window, after it). The run had `latest_seq`
// periodic windows (GetRun's latest window; 0: none) and as many total
// segments as the newest one retained says, or, none retained, as the total
// counts (its full_closes, or segments - 1 for a total rebuilt from stored
// windows).
int64_t DroppedWindows(const std::vector<v1::Window>& rows, int64_t latest_seq,
                       const v1::Window& total);

struct SbkCsvFile {
  std::string text;          // the header and every row, each ending in "\n"
  int64_t regular_rows = 0;  // periodic windows
  int64_t segment_rows = 0;  // total segments (Total rows besides the run's)
  int64_t dropped = 0;       // DroppedWindows: windows with no row
  // Windows written with empty percentile cells because they lack some of
  // the run's percentiles (their numbers: "window 3", "total segment 1").
  std::vector<std::string> without_percentiles;
};

// The file of run `run` (GetRun: its info, latest window and final total)
// whose GetWindowHistory answered `history`.
SbkCsvFile SbkCsv(const v1::GetRunResponse& run, const std::vector<v1::Window>& history);

}  // namespace perld::perlctl
