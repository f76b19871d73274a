// SBK-style reports: the interval and total console lines and the CSV rows in
// SBK's column layout, built from LatencySnapshots. Pure formatting: no I/O,
// no clocks (the wall-clock time of a row is passed in), so it is testable.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "daemon/core/latency_config.h"
#include "daemon/core/latency_snapshot.h"

namespace perld::bench {

// What a report line says about the run, fixed for the run.
struct ReportContext {
  std::string storage = "PerlBench";  // SBK's storage (driver) name
  std::string action;                 // "Writing", "Reading" or "Write_Reading"
  TimeUnit unit = TimeUnit::kMs;
  int writers = 0;
  int readers = 0;
  std::vector<double> percentiles;  // in percent, ascending
};

// One window's figures, derived from a snapshot exactly as SBK's LatencyWindow
// prints them: rates over the window's elapsed seconds, MB = 2^20 bytes,
// average over valid + discarded records, min 0 when nothing was recorded.
struct ReportRow {
  double seconds = 0;
  int64_t bytes = 0;
  int64_t records = 0;
  double records_per_sec = 0;
  double mb_per_sec = 0;
  double avg_latency = 0;
  int64_t min_latency = 0;
  int64_t max_latency = 0;
  int64_t invalid = 0;
  int64_t lower_discard = 0;
  int64_t higher_discard = 0;
  std::vector<int64_t> percentile_values;
  std::vector<int64_t> percentile_counts;
  bool percentiles_exact = true;  // false: a total without percentiles (run_total.h)
};

// `seconds` is the window's length; its rates divide by `rate_seconds`
// (WindowRecord::RateSeconds; 0: `seconds`).
ReportRow MakeReportRow(const LatencySnapshot& snapshot, double seconds, double rate_seconds = 0);

// "5th", "92.5th", "99.99th".
std::string PercentileName(double percent);

// "PerlBench Writing  1 writers, ... Latency Percentiles: ..." ("Total " prefix
// for the whole-run line).
std::string FormatConsoleLine(const ReportContext& ctx, const ReportRow& row, bool total);

// SBK CSV layout: ID,Date,Time,Header,Type,Connections,MaxConnections,Storage,
// Action,LatencyTimeUnit,Writers,Readers,MaxWriters,MaxReaders,ReportSeconds,MB,
// Records,Records/Sec,MB/Sec,AvgLatency,MinLatency,MaxLatency,InvalidLatencies,
// LowerDiscard,HigherDiscard,Percentile_<p>...,Percentile_Count_<p>...
std::string CsvHeader(const ReportContext& ctx);
// Type is "Total" for the whole-run row, else "Regular". `wall` is local time.
std::string CsvRow(const ReportContext& ctx, const ReportRow& row, int64_t id, bool total,
                   std::time_t wall);

}  // namespace perld::bench
