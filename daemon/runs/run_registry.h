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
// Events reads them from a number on, and Subscribe tells a watcher when a
// run changed, so it can follow them without a thread or a poll.
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
// distribution under the reader lock (O(distinct latencies)). Subscribers
// are called on the writer's thread after it released that mutex (never on
// the recorder thread: the recorder does not write here); the subscriber
// table has its own mutex, and each subscription one that is held while its
// callback runs.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"
#include "daemon/config/daemon_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/run_total.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/stored_totals.h"
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
  double rate_seconds = 0;  // the span the total's rate divides by
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
  // `stored` answers totals too large for memory (stored_totals.h): without
  // final_total a spilled total's other percentiles are FailedPrecondition;
  // without running_total a running total past memory has none.
  explicit RunRegistry(config::RetentionConfig retention, StoredTotals stored = {});
  ~RunRegistry();

  // A new running run. REQUIRES: a fresh id.
  void AddRunning(const RunInfo& info);
  // A running run resumed from a daemon checkpoint: its stored history, and
  // its total so far (`base`, `ascending`, `base_seconds` long from
  // `base_start_time`, a rate-controlled run's `base_schedule`) as the
  // start of its live total.
  // REQUIRES: a fresh id; `ascending` as RunTotal::Add requires.
  void AddResumed(const RunInfo& info, std::vector<WindowRecord> history,
                  const LatencyCounters& base, std::span<const LatencyBucket> ascending,
                  double base_seconds = 0, int64_t base_start_time = 0,
                  const WindowRecord::Schedule& base_schedule = {});
  // A run loaded from storage (ended, with its history and total).
  std::vector<RunId> Restore(const RunInfo& info, std::vector<WindowRecord> windows,
                             std::optional<WindowRecord> total);
  // Appends a published window; returns runs evicted by retention.
  std::vector<RunId> AddWindow(WindowRecord window);
  // The run ended with `total` (its final total, appended as its last
  // event in the same step, so a watcher sees the total and the end
  // together). Sets `ended` to the updated info; returns runs evicted by
  // retention.
  // `end_reason` kNone: kFailed for a failed run, else kCompleted.
  std::vector<RunId> MarkEnded(RunId id, WindowRecord total, RunState state, std::string reason,
                               int64_t end_unix_ms, RunInfo* ended,
                               EndReason end_reason = EndReason::kNone);
  void SetRetention(const config::RetentionConfig& retention);
  // The run's latest SLO verdict (run_slo.h); unknown runs are ignored.
  void SetSloStatus(RunId id, SloStatus status);
  // Marks a running run bucketed (RunSpec::bucketed_reason), and its
  // response view, unless they are already; false for an unknown run.
  bool MarkBucketed(RunId id, const std::string& reason);
  // Marks a run RunInfo::rate_not_sustained; unknown runs are ignored.
  void MarkRateNotSustained(RunId id);

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
  // Resolve, then the run holding `kind` of its operations (issue 30): a
  // rate-controlled run answers kResponse from its response view and
  // kService itself (a view: its service run); kDefault is the run an id
  // names, and for a name the response view of a rate-controlled run. A
  // closed-loop run has service time only: kResponse is FailedPrecondition.
  absl::StatusOr<RunId> ResolveKind(const std::string& id_or_name, LatencyKind kind) const;
  // Exact percentiles of any set (SBK's percent spelling: 50, 99.9, ...).
  // FailedPrecondition for kLatest before the run's first closed window.
  // A spilled final total answers other percentiles than its stored ones
  // by merging its stored segments (StoredTotals::final_total), outside the
  // lock. With `merge_running`, a running total past its memory budget is
  // merged from the store too (StoredTotals::running_total: costs a pass
  // over the run's stored data, so only where a user asked; else, and when
  // that merge fails, it has no percentile).
  absl::StatusOr<PercentileAnswer> Percentiles(
      RunId id, PercentileScope scope, std::vector<double> percents, bool merge_running = false,
      PercentileMethod method = PercentileMethod::kSbk) const;
  // An ended run's exact total distribution from the first latency above
  // `after` (none: from the lowest), at most `max` buckets; `more` when
  // some are left. FailedPrecondition while the run runs or when its total
  // is not exact.
  struct DistributionPage {
    WindowRecord total;  // its final total, without the distribution
    std::vector<LatencyBucket> buckets;
    bool more = false;
  };
  absl::StatusOr<DistributionPage> Distribution(RunId id, std::optional<int64_t> after,
                                                size_t max) const;
  // History entries with event numbers >= from (oldest retained first).
  absl::StatusOr<std::vector<WindowRecord>> History(RunId id, int64_t from = 0) const;

  // Watch: the run's events numbered >= `next` (with distributions
  // stripped) in order, and whether the run has ended (then the last event
  // is its total). Events older than the retained history are skipped:
  // `skipped` counts them. NotFound if the run is unknown (or was evicted).
  // Never waits: Subscribe says when to ask again.
  struct WatchBatch {
    std::vector<WindowRecord> events;
    int64_t next = 0;  // the event number to ask for next
    int64_t skipped = 0;
    bool ended = false;
  };
  absl::StatusOr<WatchBatch> Events(RunId id, int64_t next) const;

  // Change notification. Subscribe(id, f) calls f after every change of run
  // `id`: a window or total published, the run ended, evicted, its history
  // trimmed (SetRetention), or Notify(id). f is told nothing: it reads what
  // it needs (Events, Info, ...), so a change it was told of is visible to
  // those reads; a change that happened before Subscribe returned may be
  // told or not (read once after subscribing). f runs on the writer's thread
  // after the registry's lock was released -- the run manager's dispatcher
  // for windows and ends, so f must be cheap and must not block (hand work
  // to another thread). Calls of one subscription never overlap. The run
  // need not exist; a subscription outlives its run's eviction.
  class Subscription {
   public:
    Subscription() = default;
    ~Subscription() { reset(); }
    Subscription(Subscription&& other) noexcept;
    Subscription& operator=(Subscription&& other) noexcept;
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    // Ends the subscription: when it returns, f is not running and will not
    // be called again. REQUIRES: not called from within f.
    void reset();

   private:
    friend class RunRegistry;
    struct Subscriber;
    Subscription(const RunRegistry* registry, RunId id, std::shared_ptr<Subscriber> subscriber)
        : registry_(registry), id_(id), subscriber_(std::move(subscriber)) {}
    const RunRegistry* registry_ = nullptr;
    RunId id_ = 0;
    std::shared_ptr<Subscriber> subscriber_;
  };
  // REQUIRES: the registry outlives the subscription.
  [[nodiscard]] Subscription Subscribe(RunId id, std::function<void()> on_change) const;
  // Calls run `id`'s subscribers as a change would, on this thread: for state
  // kept beside the registry (the run manager's end of a run, WaitEnded).
  void Notify(RunId id) const;

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
  // What an answer under the lock still needs merged from the store: a
  // spilled total's segments (> 0), a running total's parts.
  struct StoreMerge {
    int64_t spilled_segments = 0;
    std::optional<RunningTotalParts> running;
  };
  // Percentiles under the lock; those of stored data are left to the caller
  // (`pending`).
  absl::StatusOr<PercentileAnswer> PercentilesLocked(RunId id, PercentileScope scope,
                                                     const PercentileSet& set, bool merge_running,
                                                     StoreMerge* pending) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  class ChangeLock;
  void NotifyAll(const std::vector<RunId>& ids) const;
  void Unsubscribe(RunId id, const Subscription::Subscriber* subscriber) const;

  // perld::SharedMutex (std::shared_mutex) rather than absl::Mutex: Debian's
  // Abseil is not built with ThreadSanitizer annotations, so TSan could not
  // see absl::Mutex ordering and the concurrency tests would report false
  // races (daemon/common/mutex.h).
  mutable SharedMutex mu_;
  const StoredTotals stored_;
  config::RetentionConfig retention_ ABSL_GUARDED_BY(mu_);
  std::map<RunId, std::unique_ptr<Entry>> runs_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Subscribers by run: taken to change the table or copy a run's list,
  // never while a callback runs.
  mutable Mutex subscribers_mu_;
  mutable std::multimap<RunId, std::shared_ptr<Subscription::Subscriber>> subscribers_
      ABSL_GUARDED_BY(subscribers_mu_);
};

}  // namespace perld::runs
