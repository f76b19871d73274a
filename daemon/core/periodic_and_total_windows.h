// PeriodicAndTotalWindows: the pair of exact windows one run keeps -- a
// periodic window reset at every reporting interval and a whole-run total --
// with SBK's window -> total copy and its IsFull policy.
//
//   RecordBatch   -> periodic window only (checked for IsFull every
//                    kFullCheckInterval timestamps);
//   CloseWindow   -> periodic snapshot; its distribution and counters are
//                    merged into the total in the same extraction pass;
//   CloseTotal    -> the total snapshot (end of run).
// IsFull policy (never a silent skip): a full periodic window is reported
// (closed_full = true), merged into the total and reset; a full total window
// is reported and reset. Such early reports are queued in order; drain them
// with TakePendingReports() after every call. A call's own `out` snapshot
// precedes the reports it queued.
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
#include "daemon/core/time_stamp.h"

namespace perld {

struct WindowReport {
  enum class Scope { kPeriodic, kTotal };
  Scope scope = Scope::kPeriodic;
  LatencySnapshot snapshot;
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

  // Records n timestamps into the periodic window. `now` is used only as
  // the close time if the IsFull policy closes a window inside this batch.
  void RecordBatch(const TimeStamp* ts, size_t n, int64_t now);

  // Adds an already-aggregated remote window to the periodic window (see
  // LatencyRecorder::MergeBuckets; nothing changes on error), then applies
  // the IsFull policy at `now`.
  [[nodiscard]] absl::Status MergeWindow(const LatencyCounters& counters,
                                         std::span<const LatencyBucket> buckets, int64_t now);

  // Closes the periodic window at `now` into `out` (always, even if empty),
  // merges it into the total and starts the next window at `now`; a total
  // that became full is then reported (queued) and reset.
  void CloseWindow(int64_t now, LatencySnapshot* out);

  // Closes the total window at `now` into `out` and restarts both windows.
  // Periodic data not yet closed is folded into the total first without a
  // periodic report: call CloseWindow(now, ...) before to report it.
  void CloseTotal(int64_t now, LatencySnapshot* out);

  bool HasPendingReports() const { return !pending_.empty(); }
  // Early (IsFull) reports in the order they were produced.
  std::vector<WindowReport> TakePendingReports();

  const LatencyRecorder& periodic() const { return *periodic_; }
  const LatencyRecorder& total() const { return *total_; }
  const PercentileSet& percentiles() const { return percentiles_; }
  int64_t periodic_full_closes() const { return periodic_full_closes_; }
  int64_t total_full_closes() const { return total_full_closes_; }

 private:
  PeriodicAndTotalWindows(std::unique_ptr<LatencyRecorder> periodic,
                          std::unique_ptr<LatencyRecorder> total, PercentileSet percentiles,
                          int64_t start_time);

  void ClosePeriodicInto(int64_t now, LatencySnapshot* out);
  void ClosePeriodicFull(int64_t now);
  void CheckTotalFull(int64_t now);

  std::unique_ptr<LatencyRecorder> periodic_;
  std::unique_ptr<LatencyRecorder> total_;
  PercentileSet percentiles_;
  std::vector<WindowReport> pending_;
  int64_t periodic_full_closes_ = 0;
  int64_t total_full_closes_ = 0;
};

}  // namespace perld
