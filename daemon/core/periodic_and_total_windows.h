// PeriodicAndTotalWindows: the pair of exact windows one run keeps -- a
// periodic window reset at every reporting interval and a whole-run total --
// with SBK's window -> total copy and its IsFull policy, plus the run total
// that survives the total window's own early closes.
//
//   RecordBatch   -> periodic window only (checked for IsFull every
//                    kFullCheckInterval timestamps);
//   CloseWindow   -> periodic report; its distribution and counters are
//                    merged into the total in the same extraction pass;
//   CloseTotal    -> the run total (end of run).
// IsFull policy (never a silent skip): a full periodic window is reported
// (closed_full = true), merged into the total and reset; a full total window
// is reported as a kTotalSegment and reset, and its counters and distribution
// are carried into the run total (RunTotal), so the final kTotal report counts
// every record of the run across all segments. When the run total outgrows
// its budget (RunTotal drops its distribution), CloseTotal also queues the
// last segment as a kTotalSegment and marks the kTotal `spilled`: every
// segment was then reported with its exact distribution, and their merge is
// the run's exact total (the state store keeps them and merges them:
// StateStore::MergeTotalSegments) -- not for a run seeded from a checkpoint,
// whose seed is in no segment. Early reports are queued in
// order; drain them with TakePendingReports() after every call. A call's own
// `out` report precedes the reports it queued.
// Every report carries its window's exact distribution, ascending.
//
// Threads: single owner (the recorder thread). No clocks: every time is
// passed in, in the caller's clock. No I/O. Hot path: RecordBatch costs the
// recorder's batch loop plus one IsFull() per kFullCheckInterval timestamps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/core/run_total.h"
#include "daemon/core/time_stamp.h"

namespace perld {

struct WindowReport {
  // kPeriodic: an interval window; kTotalSegment: the total window closed
  // early on its own limit; kTotal: the run total (CloseTotal).
  enum class Scope { kPeriodic, kTotalSegment, kTotal };
  Scope scope = Scope::kPeriodic;
  LatencySnapshot snapshot;
  // The window's exact distribution, ascending; counts sum to the valid
  // records it covers (snapshot.valid unless a kTotal is not exact_total).
  std::vector<LatencyBucket> distribution;
  int64_t segments = 1;     // kTotal: total-window segments of the run
  bool exact_total = true;  // kTotal: the distribution covers every segment
  // kTotal, not exact_total: every segment was reported (the last one queued
  // by CloseTotal), so the merge of their distributions is the exact total.
  bool spilled = false;
};

class PeriodicAndTotalWindows {
 public:
  static constexpr size_t kFullCheckInterval = 256;

  // PerL policy (latency_recorder_builder.h): array or primitive-map periodic
  // window, primitive-map total. Both windows start at `start_time`.
  static absl::StatusOr<PeriodicAndTotalWindows> Create(const LatencyConfig& config,
                                                        int64_t start_time);
  // SBM aggregator: hybrid-paged periodic and total windows.
  static absl::StatusOr<PeriodicAndTotalWindows> CreateHybrid(const LatencyConfig& config,
                                                              int64_t start_time);
  // Explicit recorders (tests, custom policies). FailedPrecondition unless
  // both exist and have identical bounds.
  static absl::StatusOr<PeriodicAndTotalWindows> Create(std::unique_ptr<LatencyRecorder> periodic,
                                                        std::unique_ptr<LatencyRecorder> total,
                                                        PercentileSet percentiles,
                                                        int64_t start_time);

  PeriodicAndTotalWindows(PeriodicAndTotalWindows&&) = default;
  PeriodicAndTotalWindows& operator=(PeriodicAndTotalWindows&&) = default;

  // Who applies the IsFull policy to the periodic window.
  //   kSelf: RecordBatch and MergeWindow close a full window themselves.
  //   kCaller: they never close it; the caller checks PeriodicFull() after
  //   every merge and at least every kFullCheckInterval timestamps, and
  //   calls CloseFull(now). Two windows that must close together (a run's
  //   service and response views: response_times.h) use it.
  enum class FullClose { kSelf, kCaller };

  // Records n timestamps into the periodic window. `now` is used only as
  // the close time if the IsFull policy closes a window inside this batch.
  void RecordBatch(const TimeStamp* ts, size_t n, int64_t now,
                   FullClose full_close = FullClose::kSelf);

  // Adds an already-aggregated remote window to the periodic window (see
  // LatencyRecorder::MergeBuckets, with its `checked`; nothing changes on
  // error), then applies the IsFull policy at `now` (kSelf).
  [[nodiscard]] absl::Status MergeWindow(const LatencyCounters& counters,
                                         std::span<const LatencyBucket> buckets, int64_t now,
                                         FullClose full_close = FullClose::kSelf,
                                         CheckedBounds checked = {});

  // The periodic window is over its memory budget (IsFull).
  bool PeriodicFull() const { return periodic_->IsFull(); }
  // Closes the periodic window early at `now`: a queued kPeriodic report
  // with closed_full set, then the total's own IsFull check (as kSelf does).
  void CloseFull(int64_t now);

  // Closes the periodic window at `now` into `out` (always, even if empty),
  // merges it into the total and starts the next window at `now`; a total
  // that became full is then reported (queued) and reset.
  void CloseWindow(int64_t now, WindowReport* out);

  // Closes the total window at `now` and reports the run total into `out`:
  // counters summed over every total segment, percentiles and distribution
  // over them all (see RunTotal for the memory budget). Restarts both
  // windows and the run total. Periodic data not yet closed is folded into
  // the total first without a periodic report: call CloseWindow(now, ...)
  // before to report it.
  void CloseTotal(int64_t now, WindowReport* out);
  // Leaves out everything the total holds so far (a run's warm-up): the
  // total window and the run total restart empty at `now`. The periodic
  // window is untouched: close it first, so its records go with the warm-up.
  // Returns the counters left out.
  LatencyCounters DiscardTotal(int64_t now);

  // Carries a total restored from elsewhere (a daemon checkpoint) into the
  // run total, as if it were an earlier total segment: the final kTotal
  // counts it. REQUIRES: `ascending` strictly ascending, counts >= 1 summing
  // to counters.valid (LatencyRecorder::CheckBuckets).
  void SeedTotal(const LatencyCounters& counters, std::span<const LatencyBucket> ascending) {
    run_total_.Add(counters, ascending);
    seeded_ = true;
  }

  bool HasPendingReports() const { return !pending_.empty(); }
  // Early (IsFull) reports in the order they were produced.
  std::vector<WindowReport> TakePendingReports();

  const LatencyRecorder& periodic() const { return *periodic_; }
  const LatencyRecorder& total() const { return *total_; }
  const PercentileSet& percentiles() const { return percentiles_; }
  int64_t periodic_full_closes() const { return periodic_full_closes_; }
  int64_t total_full_closes() const { return total_full_closes_; }
  // The run total so far: closed total segments only.
  const RunTotal& run_total() const { return run_total_; }

 private:
  PeriodicAndTotalWindows(std::unique_ptr<LatencyRecorder> periodic,
                          std::unique_ptr<LatencyRecorder> total, PercentileSet percentiles,
                          int64_t start_time);

  void ClosePeriodicInto(int64_t now, WindowReport* out);
  // Extracts the total window at `now` into `out` and carries it into the
  // run total.
  void CloseTotalSegment(int64_t now, WindowReport* out);
  void CheckTotalFull(int64_t now);

  std::unique_ptr<LatencyRecorder> periodic_;
  std::unique_ptr<LatencyRecorder> total_;
  PercentileSet percentiles_;
  RunTotal run_total_;
  int64_t run_start_time_;
  std::vector<WindowReport> pending_;
  int64_t periodic_full_closes_ = 0;
  int64_t total_full_closes_ = 0;
  bool seeded_ = false;  // SeedTotal since the last CloseTotal/DiscardTotal
};

}  // namespace perld
