// RunMetrics: one run as the Prometheus exposition sees it, and the two
// renderings of a set of runs -- perld's own families and SBK's names.
//
// perld names (config::MetricNames::kPerld), every family labelled by the run's
// identity labels (the daemon: run_id, run, source):
//   perld_run_info{...,state,unit,action} 1
//   perld_run_start_time_seconds                       gauge, Unix time
//   perld_run_records_total, perld_run_bytes_total     counters over the run
//   perld_run_invalid_latencies_total                  records with a negative latency
//   perld_run_lower_discards_total, perld_run_higher_discards_total
//   perld_run_dropped_timestamps_total                 overflow drop at the pending bound
//   perld_run_blocked_timestamps_total                 sends that waited at the pending bound
//   perld_run_total_window_releases_total              total-window segments closed on
//                                                      their own memory/counter limit
//   perld_run_full_window_closes_total                 periodic windows closed early (IsFull)
//   perld_run_latency_seconds{quantile}                summary: the latest closed periodic
//                                                      window's exact percentiles; _sum
//                                                      and _count over the whole run
//   perld_run_total_latency_seconds{quantile}          summary: the run's exact total
//                                                      percentiles so far (the final total
//                                                      once it ended; none when inexact),
//                                                      same _sum and _count
//   perld_run_latency_quantile_records{percentile}     gauge: records at exactly the latency
//                                                      of that percentile (percent: 99.9)
//   perld_run_window_seconds, perld_run_records_per_second, perld_run_bytes_per_second,
//   perld_run_latency_average_seconds, perld_run_latency_min_seconds,
//   perld_run_latency_max_seconds                      gauges of the latest closed window
//   perld_run_writers, perld_run_readers, perld_run_clients   gauges
//   perld_run_recorder_memory_bytes                    gauge: memory the running run's
//                                                      recorders retain (latest window)
// A summary's _sum/_count are cumulative like a counter (the latencies of
// every non-negative record so far), while its quantiles describe the latest
// window -- the convention of Prometheus client summaries, whose quantiles
// cover a sliding window. rate(_sum)/rate(_count) is the average latency.
//
// Units: seconds and bytes (Prometheus base units). Integer latencies become
// exact decimal seconds (UnitsToSecondsText), never through a double, so the
// integer in the run's unit is recoverable; only averages and rates are
// doubles.
//
// SBK names (config::MetricNames::kSbk), as SBK's PrometheusLogger/SbkPrometheusServer
// (micrometer) name them, so SBK's Grafana dashboard works unchanged: per
// action prefix P = SBK_<Action>, labels component ("sbk" for in-process
// runs, "sbm" for aggregated ones), class, action, plus the run identity:
//   counters P_Records_total, P_Bytes_total, P_InvalidLatencyRecords_total,
//            P_LowerDiscardedLatencyRecords_total, P_HigherDiscardLatencyRecords_total
//   gauges   P_MBPerSec, P_RecordsPerSec, P_ns_AvgLatency, P_ns_MinLatency,
//            P_ns_MaxLatency, P_SLC_1, P_SLC_2, P_ns_<p>, P_Count_<p>
//            (<p>: SBK's "0.##" percent format with '.' -> '_': 99.9 -> 99_9)
//   shared   SBK_Writers, SBK_Readers, SBK_Max_Writers, SBK_Max_Readers,
//            SBK_Connections, SBK_Max_Connections (gauges);
//            SBK_Write_Request_{Records,Bytes}_total, SBK_Write_Request_RecordsPerSec,
//            SBK_Write_Request_Bytes_MBPerSec, SBK_Read_Request_{Records,Bytes}_total,
//            SBK_Read_Request_RecordsPerSec, SBK_Read_Request_MBPerSec (and
//            SBK_Read_Request_Bytes_MBPerSec, the spelling SBK's dashboard queries)
// Latencies are always in ns there (SBK's metrics default); counters are the
// run's totals; gauges are the latest closed window. Request metrics carry the
// run's records on the side its action starts with (Writ*: write requests,
// Read*: read requests); perld has no separate request count.
//
// Ordering: families in a fixed order, runs in the order given within each.
// Threads: pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/config/daemon_config.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/http/prometheus_text.h"

namespace perld::http {

// One window scope: its snapshot and its length in seconds (rates divide by
// it; 0 gives rate 0, as on the console).
struct ExpositionWindow {
  LatencySnapshot snapshot;
  double seconds = 0;       // the window's length
  double rate_seconds = 0;  // what its rates divide by (WindowRecord::RateSeconds); 0: seconds
  double RateSeconds() const { return rate_seconds > 0 ? rate_seconds : seconds; }
};

struct RunMetrics {
  uint64_t id = 0;     // the run id (0: not a daemon run)
  int64_t events = 0;  // window events published so far (changes with every window)
  Labels identity;     // e.g. run_id="7",run="nightly",source="bench"
  std::string state = "running";
  TimeUnit unit = TimeUnit::kMs;
  std::string action = "Writing";       // SBK action: Writing, Reading, Write_Reading, ...
  std::string sbk_class = "PerlBench";  // SBK 'class' label (the storage)
  std::string component = "sbk";        // SBK 'component': sbk (in-process) or sbm (aggregated)
  int writers = 0;
  int readers = 0;
  int max_writers = 0;
  int max_readers = 0;
  int connections = 0;  // remote clients connected now
  int max_connections = 0;
  double start_unix_seconds = 0;
  std::optional<ExpositionWindow> latest;  // latest closed periodic window
  // The run's total so far: counters, and exact percentiles when the source
  // has them (the daemon's live total does; a bench's running sum does not).
  ExpositionWindow total;
  bool total_final = false;
  bool total_exact = true;  // false: the total's distribution lost segments
  uint64_t dropped = 0;
  uint64_t blocked = 0;
  int64_t total_window_releases = 0;
  int64_t recorder_bytes = 0;  // the run's recorders' retained memory (running runs)
  int64_t cache_releases = 0;  // recorder caches released over budget after a report
  // Remote windows merged (runs fed by remote clients: component "sbm").
  int64_t remote_reports = 0;  // run so far
  int64_t late_reports = 0;    // run so far
  int64_t window_clients = 0;  // clients that contributed to the latest window
};

// SBK's action name of a run with these workers ("Write_Reading" when both).
const char* SbkAction(int writers, int readers);
// SBK's percentile name part: "0.##" (half-even), '.' -> '_' (99.9 -> "99_9").
std::string SbkPercentileName(double percent);
// SBK's sliding latency coverage (LatencyWindow.getSLC) of a snapshot:
// {slc1, slc2}, from its percentile values and median.
std::pair<int64_t, int64_t> SlidingLatencyCoverage(const LatencySnapshot& s);

// perld's run families, in exposition order (RunFragments are indexed by it),
// with their names, types and help texts.
enum PerldFamily : size_t {
  kInfo,
  kStartTime,
  kRecords,
  kBytes,
  kInvalid,
  kLowerDiscards,
  kHigherDiscards,
  kDropped,
  kBlocked,
  kTotalReleases,
  kFullCloses,
  kLatency,
  kTotalLatency,
  kQuantileRecords,
  kWindowSeconds,
  kRecordsPerSecond,
  kBytesPerSecond,
  kAverage,
  kMin,
  kMax,
  kWriters,
  kReaders,
  kClients,
  kRecorderMemory,
  kCacheReleases,
  kRemoteReports,
  kLateReports,
  kWindowClients,
  kPerldFamilies
};
struct PerldFamilyInfo {
  const char* name;
  MetricType type;
  const char* help;
};
extern const PerldFamilyInfo kPerldFamilyInfo[kPerldFamilies];

void WritePerldRunFamilies(std::span<const RunMetrics> runs, PrometheusText& out);

// The same in two steps, so a caller can keep a run's rendering while the
// run has not changed (a scrape then mostly copies text): RenderPerldRun
// writes one run's lines of each perld family into its own fragment
// (fragments[k]: family k's lines, maybe empty); WritePerldFamilies writes
// each family's HELP/TYPE once and the runs' fragments in the order given.
using RunFragments = std::vector<std::string>;
void RenderPerldRun(const RunMetrics& run, RunFragments* fragments);
void WritePerldFamilies(std::span<const RunFragments* const> runs, PrometheusText& out);
void WriteSbkRunFamilies(std::span<const RunMetrics> runs, PrometheusText& out);
// Both, as `names` says.
void WriteRunFamilies(std::span<const RunMetrics> runs, config::MetricNames names,
                      PrometheusText& out);

}  // namespace perld::http
