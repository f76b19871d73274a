// RunRegistry: every run the daemon knows -- running, finished, failed, or
// restored from the state directory -- with the windows the recorder
// published for it. It is the snapshot store: the recorder thread never
// touches it; Query, Watch, /metrics and the console read it.
//
// Per run it keeps the RunInfo, the latest closed periodic window with its
// exact distribution (so any percentile of it can be asked), the running
// total of a live run (a RunTotal merged from its periodic windows, off the
// recorder thread), the final total with its distribution once the run
// ended, and a bounded history of every published window (without
// distributions). Window events of a run get consecutive event numbers from 0;
// WaitForEvents lets a watcher follow them.
//
// Memory estimate (ApproxBytes, bounded by retention.max_bytes): per run its
// entry, its RunInfo's strings (name, labels, parameters, percentiles,
// failure reason, clock), the retained windows and the distributions held.
//
// Retention: at most retention.max_windows_per_run history entries per run
// (the oldest go first) and at most retention.max_finished_runs ended runs;
// beyond retention.max_bytes of estimated memory the oldest ended runs are
// evicted too. Evicted runs are returned by the mutating call so the caller
// can drop them from storage. Running runs are never evicted.
//
// Threads: thread-safe. Writers (Add*, MarkEnded) come from the run manager
// (its dispatcher thread and the threads that create runs); readers from any
// thread. One shared mutex; readers share it, percentile queries walk a
// distribution under the reader lock (O(distinct latencies)).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/config/daemon_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/run_total.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/window_record.h"

namespace perld::runs {

// What Get returns: distributions are left out (see Percentiles).
struct RunView {
  RunInfo info;
  std::optional<WindowRecord> latest;  // latest closed periodic window
  WindowRecord total;                  // final total, or the running total so far
  bool total_final = false;            // total is the run's final total
  int64_t events = 0;                  // window events published so far
  // Total-window segments reported and released on their own limit so far.
  int64_t released_segments = 0;
};

enum class PercentileScope { kTotal, kLatest };

struct PercentileAnswer {
  LatencySnapshot snapshot;  // counters of the scope plus the requested percentiles
  bool exact = true;         // false when the total's distribution lost segments
  bool total_final = false;
};

struct RunFilter {
  std::optional<RunState> state;
  std::map<std::string, std::string> labels;  // every pair must match
};

// One page of List: matching runs in ascending id.
struct RunPage {
  std::vector<RunInfo> runs;
  bool more = false;  // a matching run with a higher id exists
};

class RunRegistry {
 public:
  explicit RunRegistry(config::RetentionConfig retention);
  ~RunRegistry();

  // A new running run. REQUIRES: a fresh id.
  void AddRunning(const RunInfo& info);
  // A running run resumed from a daemon checkpoint: its stored history, and
  // its total so far (`base`, `ascending`, `base_seconds` long from
  // `base_start_time`) as the start of its live total.
  // REQUIRES: a fresh id; `ascending` as RunTotal::Add requires.
  void AddResumed(const RunInfo& info, std::vector<WindowRecord> history,
                  const LatencyCounters& base, std::span<const LatencyBucket> ascending,
                  double base_seconds = 0, int64_t base_start_time = 0);
  // A run loaded from storage (ended, with its history and total).
  std::vector<RunId> Restore(const RunInfo& info, std::vector<WindowRecord> windows,
                             std::optional<WindowRecord> total);
  // Appends a published window; returns runs evicted by retention.
  std::vector<RunId> AddWindow(WindowRecord window);
  // The run ended with `total` (its final total, appended as its last
  // event in the same step, so a watcher sees the total and the end
  // together). Sets `ended` to the updated info; returns runs evicted by
  // retention.
  std::vector<RunId> MarkEnded(RunId id, WindowRecord total, RunState state, std::string reason,
                               int64_t end_unix_ms, RunInfo* ended);
  void SetRetention(const config::RetentionConfig& retention);

  // Queries. NotFound for an unknown id.
  std::vector<RunInfo> List(const RunFilter& filter) const;
  // At most `max` matching runs with ids above `after`, ascending.
  RunPage List(const RunFilter& filter, RunId after, size_t max) const;
  absl::StatusOr<RunInfo> Info(RunId id) const;
  absl::StatusOr<RunView> Get(RunId id) const;
  // A running run's live total with its exact distribution (a copy, O(D)):
  // what an ingest checkpoint stores, so a checkpointed run holds one exact
  // total, not two. The distribution is empty when the total is not exact
  // (exact_total false). FailedPrecondition once the run ended.
  absl::StatusOr<WindowRecord> LiveTotal(RunId id) const;
  // An id ("42") or a unique name. NotFound when nothing matches,
  // FailedPrecondition when a name matches several runs (listing their ids).
  absl::StatusOr<RunId> Resolve(const std::string& id_or_name) const;
  // Exact percentiles of any set (SBK's percent spelling: 50, 99.9, ...).
  // FailedPrecondition for kLatest before the run's first closed window.
  absl::StatusOr<PercentileAnswer> Percentiles(RunId id, PercentileScope scope,
                                               std::vector<double> percents) const;
  // History entries with event numbers >= from (oldest retained first).
  absl::StatusOr<std::vector<WindowRecord>> History(RunId id, int64_t from = 0) const;

  // Watch: waits until the run has events numbered >= `next`, has ended, or
  // `deadline` passes; returns those events (with distributions stripped)
  // in order and whether the run has ended (then the last event is its
  // total). Events older than the retained history are skipped: `skipped`
  // counts them. NotFound if the run is unknown (or was evicted).
  struct WatchBatch {
    std::vector<WindowRecord> events;
    int64_t next = 0;  // the event number to ask for next
    int64_t skipped = 0;
    bool ended = false;
  };
  absl::StatusOr<WatchBatch> WaitForEvents(RunId id, int64_t next, absl::Time deadline) const;

  size_t running() const;
  size_t size() const;
  int64_t ApproxBytes() const;
  // The estimate's share of one RunInfo: its strings, labels and percentiles.
  static int64_t InfoBytes(const RunInfo& info);

 private:
  struct Entry;
  Entry* Find(RunId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Entry* Find(RunId id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  std::vector<RunId> Evict() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Append(Entry& e, WindowRecord window) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddWindowLocked(Entry* e, WindowRecord window) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  class ChangeLock;
  // std::shared_mutex rather than absl::Mutex: Debian's Abseil is not built
  // with ThreadSanitizer annotations, so TSan could not see absl::Mutex
  // ordering and the concurrency tests would report false races.
  mutable std::shared_mutex mu_;
  mutable std::condition_variable_any changed_;  // notified on every change
  config::RetentionConfig retention_ ABSL_GUARDED_BY(mu_);
  std::map<RunId, std::unique_ptr<Entry>> runs_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace perld::runs
