// WindowRecord: one closed window of one run, as it leaves the recorder
// thread -- the immutable unit that the snapshot store, Query/Watch, the
// console, CSV, Prometheus and the SQLite history all read.
//
// Kinds:
//   kPeriodic      an interval window (closed by its interval, or early by the
//                  IsFull policy: snapshot.closed_full);
//   kTotalSegment  the run's total window closed early on its own limit
//                  (memory budget or SBK counter range): kept and reported,
//                  and the run's total keeps accumulating across segments;
//   kTotal         the run's final total: every record of the run. Its
//                  counters are the sum over all segments; its distribution
//                  and percentiles cover the whole run when `exact_total`;
//                  a `spilled` total carries no distribution: its segments
//                  are stored, and their streaming merge gives the
//                  percentiles (RunManager at the end of the run, Query for
//                  other percentiles later). Otherwise none.
// Times: snapshot.start_time/end_time are in the run's time unit on the
// monotonic clock; *_unix_ms are wall-clock for people and storage.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/runs/run_info.h"

namespace perld::runs {

struct WindowRecord {
  enum class Kind { kPeriodic, kTotalSegment, kTotal };

  RunId run_id = 0;
  Kind kind = Kind::kPeriodic;
  int64_t seq = 0;  // 1, 2, ... per run and kind, in closing order
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;
  double seconds = 0;  // window length on the daemon's clock, as reports print it
  // The seconds its rates (records/s, MB/s) divide by: for a periodic window
  // that merged remote clients' windows, the clients' own spans
  // (window_rate.h); 0: `seconds` (local windows, totals, older history).
  double rate_seconds = 0;
  LatencySnapshot snapshot;
  // The window's exact distribution, ascending by latency, counts >= 1; its
  // counts sum to snapshot.valid. May be empty for history loaded without it.
  std::vector<LatencyBucket> distribution;
  int64_t segments = 1;     // kTotal: total-window segments the run had
  bool exact_total = true;  // kTotal: distribution covers every segment
  // kTotal: outgrew the run total's memory budget; every segment was
  // reported with its distribution (the last `segments` kTotalSegment
  // windows) and the total is their merge. exact_total turns true once the
  // merge filled the percentiles; `distribution` stays empty.
  bool spilled = false;
  // kTotalSegment: the last periodic window whose records it holds (the
  // segments partition a run's periodic windows since its warm-up). Not
  // stored in the history.
  int64_t through_window = 0;
  // Memory the run's periodic and total recorders retained as the window
  // closed (LatencyRecorder::RetainedBytes); not stored in the history.
  int64_t recorder_bytes = 0;
  // Times the run's recorders released their retained cache over budget
  // after a report, run so far (memory-cap events; the kTotalSegment closes
  // are the other kind). Not stored in the history.
  int64_t cache_releases = 0;
  // Remote windows (ingest windows mode, SBP) merged: kPeriodic -- in this
  // window; kTotalSegment/kTotal -- in the run so far. `clients` counts
  // distinct clients, `late` the reports whose client window ended before
  // the daemon's interval they were merged in began; `run_clients` the
  // distinct clients of the run so far. Not stored in the history.
  struct Remote {
    int64_t reports = 0;
    int64_t clients = 0;
    int64_t late = 0;
    int64_t run_clients = 0;
    bool operator==(const Remote&) const = default;
  };
  Remote remote;
  // kPeriodic windows of runs fed through a RemoteWindowInbox: per client
  // index, the last message sequence merged into this window or an earlier
  // one (0: none yet). The run's windows up to this one hold exactly those
  // messages. Not stored in the history.
  std::vector<uint64_t> applied;
  // `applied` is a consistent cut: false for a window the IsFull policy
  // closed in the middle of a raw message (it holds part of it).
  bool cut = false;
  // kPeriodic: the window lies in the run's warm-up (RunSpec::warmup_ms):
  // shown and kept, but left out of the run's total. Not stored in the
  // history.
  bool warmup = false;
  // kTotal of a run with a warm-up: the counters it left out (its records,
  // invalid latencies, ...), so every record of the run is accounted for.
  // Not stored in the history.
  LatencyCounters warmup_left_out;

  // Rate-controlled runs (issue 30): how the operations this window holds
  // kept their schedule -- on the service run's and the response view's
  // windows alike (RunInfo::response_run). kTotalSegment/kTotal: the run so
  // far. All zero for closed-loop runs. Lags are start - intended start, in
  // the run's unit. Not stored in the history.
  struct Schedule {
    int64_t operations = 0;  // timestamps with an intended start
    int64_t late = 0;        // started more than RunSpec::late_threshold_ns after their slot
    int64_t skipped = 0;     // slots dropped by `-catchup skip`: never sent
    int64_t max_lag = 0;
    int64_t min_lag = 0;  // the window's floor: > 0 when every operation started late
    int64_t total_lag = 0;
    // The run fell further behind in each of the last kBehindWindows
    // periodic windows (its floor rose above the late threshold): the
    // target rate is not sustained. kTotal: it was so at some window.
    bool not_sustained = false;
    // Folds a later window's schedule into this one (a run's so far).
    void Add(const Schedule& w) {
      if (w.operations > 0) {
        min_lag = operations == 0 ? w.min_lag : std::min(min_lag, w.min_lag);
        max_lag = operations == 0 ? w.max_lag : std::max(max_lag, w.max_lag);
      }
      operations += w.operations;
      late += w.late;
      skipped += w.skipped;
      total_lag += w.total_lag;
      not_sustained = not_sustained || w.not_sustained;
    }
    bool operator==(const Schedule&) const = default;
  };
  Schedule schedule;

  double RateSeconds() const { return rate_seconds > 0 ? rate_seconds : seconds; }

  bool operator==(const WindowRecord&) const = default;
};

const char* WindowKindName(WindowRecord::Kind kind);  // "periodic", "total_segment", "total"

}  // namespace perld::runs
