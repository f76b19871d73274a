// RunInfo: what the daemon knows about one run besides its windows -- the
// unit users see, list, query and stop.
//
// A run has a server-assigned id (unique for the life of a state directory,
// never reused), a user-given name (not necessarily unique) and labels, its
// latency configuration, its source (an in-process bench, remote ingest, the
// SBK protocol), a state, start/end times and a description of its clock.
// Plain data; copied freely between threads (the registry hands out copies).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/latency_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder.h"

namespace perld::runs {

using RunId = uint64_t;

enum class RunSource { kBench, kIngest, kSbp };
enum class RunState { kRunning, kFinished, kFailed };
// Why an ended run ended (issue 26): it completed (a bench's records or
// seconds, every remote client closed), was stopped by request
// (Control.StopRun, `perlctl stop`), was cut by the daemon's shutdown, or
// failed (RunInfo::failure_reason says how). A stop or a shutdown is named
// even when the run also failed. kNone: running, or ended before perld
// kept the reason. kSloFailed: its SLO's abortOnFail stopped it (a term
// failed for good; RunInfo::slo_status says which).
enum class EndReason { kNone, kCompleted, kStopped, kShutdown, kFailed, kSloFailed };
// A run's SLO verdict (run_slo.h): none without an SLO; pending before the
// first closed window; holding/failing while it runs; passed/failed once
// it ended.
enum class SloState { kNone, kPending, kHolding, kFailing, kPassed, kFailed };

// Stable spellings used in the gRPC API, JSON, SQLite and logs.
const char* RunSourceName(RunSource source);  // "bench", "ingest", "sbp"
const char* RunStateName(RunState state);     // "running", "finished", "failed"
// "", "completed", "stopped", "shutdown", "failed", "slo_failed"
const char* EndReasonName(EndReason reason);
// "", "pending", "holding", "failing", "passed", "failed"
const char* SloStateName(SloState state);
bool ParseSloState(std::string_view name, SloState* out);
bool ParseRunSource(std::string_view name, RunSource* out);
bool ParseRunState(std::string_view name, RunState* out);
bool ParseEndReason(std::string_view name, EndReason* out);

// Fixed when the run is created.
struct RunSpec {
  std::string name;
  std::map<std::string, std::string> labels;
  RunSource source = RunSource::kBench;
  LatencyConfig latency;  // unit, inclusive range, percentiles, recorder sizes
  int64_t reporting_interval_ms = 5'000;
  RecorderKind periodic_recorder = RecorderKind::kArray;  // chosen by the builder policy
  RecorderKind total_recorder = RecorderKind::kLongHashMap;
  std::string clock;                // e.g. "tsc" or "monotonic (tsc not in available clocksources)"
  int64_t clock_resolution_ns = 0;  // smallest non-zero step of back-to-back reads; 0: unknown
  std::string parameters;           // source-specific settings, human readable (bench options)
  int writers = 0;                  // SBK writer / reader counts (bench workers, remote clients)
  int readers = 0;
  // An ingest run checkpointed from its start (ingest.checkpoints when it
  // was created): no client of it is told a message is durable before a
  // checkpoint holds it, so a crash before its first checkpoint lost nothing
  // a client was told -- it resumes empty and its clients replay everything.
  bool checkpointed = false;
  // The run's total leaves out its first warmup_ms (perld bench -warmup):
  // the recorder cuts a window there and starts the total afresh; the
  // warm-up's windows stay in the history (WindowRecord::warmup). 0: none.
  // Not stored in the state database (a bench run's parameters say it).
  int64_t warmup_ms = 0;
  // An SLO (slo.h's expression; "" none) evaluated on the run's exact total
  // at every closed periodic window and at the end (run_slo.h);
  // abort_on_fail stops the run once a term fails for good.
  std::string slo;
  bool abort_on_fail = false;
  // Non-empty: the run's latencies are not all raw measurements but values
  // standing for them (an ingest client's IngestOpen.bucketed_reason, e.g.
  // HdrHistogram bucket values from `perlctl import --format hlog`), and
  // why. Set when the run is created, or later by the first bucketed client
  // to join it (RunRegistry::MarkBucketed): never cleared.
  std::string bucketed_reason;
  // Rate-controlled runs (issue 30): the target rate, operations per second
  // over all workers (> 0: the run keeps a response view; 0: closed loop,
  // service time only), and how late an operation may start after its slot
  // before it counts as late (WindowRecord::Schedule::late).
  double target_rate = 0;
  int64_t late_threshold_ns = 1'000'000;

  bool operator==(const RunSpec&) const = default;
};

// The SLO's latest verdict, one per term in the expression's order.
struct SloStatus {
  struct Verdict {
    std::string term;  // as written, spaces removed: "p99<=2ms"
    bool held = false;
    std::string line;  // "PASS p99<=2ms: 1830 us (1.83 ms; the limit 2 ms)"

    bool operator==(const Verdict&) const = default;
  };
  SloState state = SloState::kNone;
  int64_t window = 0;  // the periodic window it was last evaluated at
  std::vector<Verdict> verdicts;

  bool operator==(const SloStatus&) const = default;
};

struct RunInfo {
  RunId id = 0;
  RunSpec spec;
  RunState state = RunState::kRunning;
  std::string failure_reason;  // set when state == kFailed
  EndReason end_reason = EndReason::kNone;
  int64_t start_unix_ms = 0;  // wall clock
  int64_t end_unix_ms = 0;    // 0 while running
  SloStatus slo_status;       // kNone when spec.slo is empty
  // A rate-controlled run's two exact views of the same operations (issue
  // 30): the run itself holds service time (end - actual start); its
  // response view -- a run of its own, created, fed, closed and ended with
  // it by the same recorder -- holds response time (end - intended start).
  // On the service run: the response view's id (0: closed loop). On the
  // response view: the service run's id.
  RunId response_run = 0;
  RunId service_run = 0;
  // A rate-controlled run fell further behind its schedule window after
  // window (WindowRecord::Schedule::not_sustained): its target rate was not
  // sustained. Set on both views; never cleared.
  bool rate_not_sustained = false;

  bool operator==(const RunInfo&) const = default;
};

// "response" for a response view, else "service" (the latency kind a
// run's windows hold).
const char* LatencyKindOf(const RunInfo& info);

// The latency kind a query asks for (issue 30). kDefault: response time for
// a rate-controlled run (its response view), else the run itself.
enum class LatencyKind { kDefault, kResponse, kService };

// The run's percentile set (its spec's percents; SBK's default when they do
// not form a valid set).
PercentileSet PercentilesOf(const RunSpec& spec);

}  // namespace perld::runs
