// RunManager: hosts runs under the single recorder thread.
//
// It owns the recorder thread (RecorderThread driving a RecorderHost), the
// lock-free outbox the recorder publishes closed windows to, the dispatcher
// thread that takes them out in order and feeds the RunRegistry and the
// observers, and the id sequence. A source (an in-process bench, a remote
// ingest stream) creates a run, sends through the run's channels, and ends
// it once its producers have stopped:
//
//   CreateRun(setup)  -> id + channels; the run is registered (running),
//                        observers get OnRunStarted, the recorder attaches it;
//   ...producers Send...
//   EndRun(id)        -> REQUIRES every producer joined. The recorder drains
//                        the channels, closes the last window and the total;
//                        the dispatcher asks the setup's judge for the final
//                        state, stores the total, marks the run ended and
//                        calls OnRunEnded. WaitEnded(id) waits for that.
//
// Admission: a new run is refused at max_running_runs, and when the worst
// case its caps allow would take the runs' memory reservations past the
// budget (RunMemoryBudget, limits.maxMemoryBytes); an ended run's share is
// given back once its windows are freed. Refusals are counted by reason.
//
// Threads: all public methods are thread-safe. Observers are added before
// Start. Stop() ends the threads; it REQUIRES that every run has ended.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"
#include "daemon/config/daemon_config.h"
#include "daemon/core/recorder_thread.h"
#include "daemon/core/timestamp_channels.h"
#include "daemon/runs/recorder_event.h"
#include "daemon/runs/recorder_host.h"
#include "daemon/runs/remote_window_inbox.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/run_memory_budget.h"
#include "daemon/runs/run_observer.h"
#include "daemon/runs/run_recorder.h"
#include "daemon/runs/run_registry.h"

namespace perld::runs {

// Decides a run's final state from its total; sets `reason` when failed.
// Runs on the dispatcher thread. Null: the run finished.
using RunJudge = std::function<RunState(const WindowRecord& total, std::string* reason)>;

// A run resumed from a daemon checkpoint (state/checkpoint.h): it keeps its
// id, start time and history, and its total continues from `base`.
struct RunResume {
  RunInfo info;                                  // as stored (id, start_unix_ms, spec)
  std::vector<WindowRecord> history;             // its stored windows, oldest first
  LatencyCounters base;                          // the checkpointed total
  std::vector<LatencyBucket> base_distribution;  // ascending
  double base_seconds = 0;                       // the checkpointed total's length
  int64_t base_start_time = 0;                   // its first window's start (run's unit)
  RecorderResume recorder;  // window numbering, client cut, the checkpointed total's schedule
  // A rate-controlled run's response view at the same cut (0 or 1 entry;
  // its recorder numbering only): it resumes with the run.
  std::vector<RunResume> response_view;
};

struct RunSetup {
  RunSpec spec;             // name, labels, source, latency config, interval
  ChannelOptions channels;  // queue kind, topology, pending bound
  int producers = 1;        // producer handles of the channels; 0: no channels (inbox only)
  RunJudge judge;
  // Remote windows to merge (ingest in windows mode); null: none.
  std::shared_ptr<RemoteWindowInbox> inbox;
  // The SBM aggregator's recorders (a run fed by remote windows): hybrid
  // pages for nanosecond runs (exactLatency* keys), PerL's array/map policy
  // for ms and us runs. False: PerL's policy for every unit.
  bool aggregate = false;
  // Set: resume this run instead of creating a new one (spec is taken from
  // resume->info).
  std::optional<RunResume> resume;
  // A rate-controlled run (spec.target_rate > 0, with producers): slots its
  // producers dropped (`-catchup skip`), counted by them. May be null.
  std::shared_ptr<const std::atomic<int64_t>> skipped;
};

// Timestamps a run's producers could not hand over at the pending bound:
// dropped (overflow drop) or sent after waiting (overflow block).
struct ChannelCounters {
  uint64_t dropped = 0;
  uint64_t blocked = 0;
};

// Why a new run was refused (perld_runs_refused_total{reason}).
enum class RunRefusal {
  kInputLimit,   // a request's input over a limits.* cap (counted by the service)
  kRunningRuns,  // limits.maxRunningRuns
  kMemory,       // limits.maxMemoryBytes
  kCount
};
const char* RunRefusalName(RunRefusal refusal);  // "input_limit", "running_runs", "memory"

// A run with spec.target_rate > 0 and producers gets a response view: a
// second run (RunInfo::response_run), fed end - intended start of the same
// paced timestamps (TimeStampProducer::SendPaced) by the same recorder,
// closed at the same instants and ended with it. It is listed and queried
// like any run; it counts as one run with its service run against
// maxRunningRuns, and its windows against the memory budget.
struct CreatedRun {
  RunId id = 0;
  std::shared_ptr<TimeStampChannels> channels;
  RunInfo info;
};

class RunManager {
 public:
  struct Options {
    RecorderOptions recorder;
    config::RetentionConfig retention;
    int64_t max_running_runs = 16;
    int64_t max_memory_bytes = 0;  // the runs' memory budget; <= 0: none
    RunId first_id = 1;            // ids continue after the stored ones
    // Makes ids up to `through` durable before any is handed out (the state
    // store's ReserveRunIds), called with blocks of kIdBlock ids; an error
    // refuses the run. Null: ids are not reserved (tests, no state).
    std::function<absl::Status(RunId through)> reserve_ids;
    // Totals too large for memory, answered from the state store
    // (stored_totals.h). final_total is also called on the dispatcher thread
    // as a spilled run ends (a merge of many large segments takes seconds:
    // other runs' windows wait meanwhile). Empty: a spilled total keeps
    // exact counters and no percentiles.
    StoredTotals stored_totals;
  };
  static constexpr RunId kIdBlock = 16;

  explicit RunManager(const Options& options);
  ~RunManager();  // Stop()
  RunManager(const RunManager&) = delete;
  RunManager& operator=(const RunManager&) = delete;

  void AddObserver(RunObserver* observer);  // before Start
  // Stops a run whose SLO's abort_on_fail found a term failed for good
  // (run_slo.h); `why` is its verdict ("invalid=0: 1"). Called once per run on the dispatcher
  // thread, after the run's end reason became kSloFailed: it must not
  // block (ask the run's producers to stop: BenchJobs::Stop, RunTable::Stop).
  using SloAbort = std::function<void(const RunInfo& info, const std::string& why)>;
  void OnSloAbort(SloAbort abort);  // before Start
  void Start();
  // Refuses new runs from now on (shutdown begins): runs that end from now
  // on, not stopped by request before, end with EndReason::kShutdown.
  void StopAccepting();
  // Stops the recorder and dispatcher. REQUIRES: every run has ended.
  void Stop();

  // Validates the spec (latency config, channel topology), reserves the
  // run's worst-case memory, assigns an id (or keeps setup.resume's,
  // REQUIRES below Options::first_id), builds the windows by the recorder
  // policy, registers and attaches the run. ResourceExhausted at
  // max_running_runs or over the memory budget (counted), Unavailable after
  // StopAccepting, InvalidArgument for a bad configuration. A run without a
  // name is named "<source>-<id>" (e.g. bench-7).
  absl::StatusOr<CreatedRun> CreateRun(RunSetup setup);
  // New limits for runs created from now on (SIGHUP); running runs keep
  // their reservations.
  void SetLimits(int64_t max_running_runs, int64_t max_memory_bytes);
  const RunMemoryBudget& memory_budget() const { return budget_; }
  // A refusal decided outside (kInputLimit), or by CreateRun.
  void CountRefusal(RunRefusal refusal) {
    refused_[static_cast<size_t>(refusal)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t refused(RunRefusal refusal) const {
    return refused_[static_cast<size_t>(refusal)].load(std::memory_order_relaxed);
  }
  // Ends a run. REQUIRES: every producer of the run has stopped sending and
  // been joined. Idempotent.
  void EndRun(RunId id);
  // Control.StopRun asked the running run `id` to stop: it ends with
  // EndReason::kStopped (call before stopping it).
  void NoteStopRequested(RunId id);
  // True once the run's end was dispatched (total stored, state final).
  // Without waiting: the registry's subscribers of the run
  // (RunRegistry::Subscribe) are notified once this holds; a zero timeout
  // then asks.
  bool WaitEnded(RunId id, absl::Duration timeout);

  RunRegistry& registry() { return registry_; }
  const RunRegistry& registry() const { return registry_; }
  // Timestamps the recorder consumed since start, over every run.
  uint64_t consumed() const { return recorder_.consumed(); }
  // The recorder thread's ticks (it ticks every 10 ms, busy or idle).
  uint64_t recorder_ticks() const { return recorder_.ticks(); }
  // Runs attached to the recorder thread right now.
  int attached() const { return host_.attached(); }
  // Windows the recorder published that the dispatcher has not handled yet.
  size_t outbox_depth() const { return outbox_.ApproxSize(); }
  // Channel counters of every running run (live, approximate) and of ended
  // runs the registry still holds (final). Any thread.
  std::map<RunId, ChannelCounters> ChannelCounts() const;

 private:
  struct Pending {
    RunJudge judge;
    std::optional<WindowRecord> total;
    bool ending = false;
    EndReason cause = EndReason::kNone;  // kStopped or kShutdown once known
    std::weak_ptr<TimeStampChannels> channels;
    RunMemoryBudget::Reservation memory;  // given back when the run has ended
    // A rate-controlled run's response view (RunInfo::response_run): it ends
    // with its service run (HandleFinished); on the view, its service run.
    RunId response_run = 0;
    RunId service_run = 0;
  };
  // An ended run to the observers (CSV Total row written, final total
  // queued for storage), then to the registry: a client that sees the run
  // ended finds its outputs complete. Dispatcher thread.
  void PublishEnded(const RunInfo& ended, WindowRecord total);
  // Ends a response view with its service run's outcome (dispatcher
  // thread); returns the view's final total.
  WindowRecord EndResponseView(RunId view, const RunInfo& service_ended);
  void Dispatch();
  void HandleWindow(RecorderEvent& event);
  void HandleFinished(RecorderEvent& event);
  // The run's SLO on its total so far, after periodic window `window`
  // (registry_ holds it); aborts the run through slo_abort_ when asked to.
  void JudgeSlo(const RunInfo& info, int64_t window);
  // The SLO's verdict on the run's final total (its exact distribution).
  SloStatus FinalSloStatus(const RunInfo& info, const WindowRecord& total);
  // A spilled total's percentiles from its stored segments
  // (Options::stored_totals); when they cannot be merged, none (the
  // reason is logged) and the total is no longer `spilled`.
  void MergeSpilledTotal(const RunInfo& info, WindowRecord* total);
  void NotifyEvicted(const std::vector<RunId>& ids);
  // Makes sure ids next_id_ .. next_id_ + count - 1 are reserved
  // (Options::reserve_ids), without holding mu_ while the reservation
  // commits.
  absl::Status ReserveNextIds(RunId count);

  const Options options_;
  RunMemoryBudget budget_;  // outlives pending_ (declared first)
  std::array<std::atomic<uint64_t>, static_cast<size_t>(RunRefusal::kCount)> refused_{};
  std::atomic<int64_t> max_running_runs_;
  RunRegistry registry_;
  RecorderOutbox outbox_;
  RecorderHost host_;
  RecorderThread recorder_;
  std::vector<RunObserver*> observers_;
  SloAbort slo_abort_;
  std::thread dispatcher_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;

  // perld::Mutex, not absl::Mutex: see RunRegistry::mu_ (ThreadSanitizer).
  mutable Mutex mu_;
  CondVar ended_;  // notified when a run leaves pending_
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  RunId next_id_ ABSL_GUARDED_BY(mu_);
  RunId reserved_through_ ABSL_GUARDED_BY(mu_);  // ids up to it are reserved
  Mutex reserve_mu_;  // one reservation at a time (guards no member: serializes)
  std::map<RunId, Pending> pending_ ABSL_GUARDED_BY(mu_);  // runs not yet ended
  std::map<RunId, ChannelCounters> ended_counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::runs
