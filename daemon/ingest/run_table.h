// RunTable: the runs fed by remote clients (perld.v1.Ingest, and SBK's SBP
// translated onto it) -- joining and creating them by name, their clients'
// membership, reconnects, and ending a run when its clients are done. The
// messages themselves go through each client's ClientSession. Nothing here
// knows a transport: requests are plain structs (ingest_types.h), a stream
// is an IngestStream (cancel / is cancelled); the gRPC services adapt.
//
// A run is created by the first client that opens a stream with its name and
// joined by the next ones (their time unit and range must match). Every
// message reaches the single recorder through the run's RemoteWindowInbox:
// a window is merged, a raw batch's timestamps are recorded one by one as a
// local writer's.
//
// Durability (runs created with checkpoints on): a message is durable once
// a committed checkpoint holds it (MarkDurable, from the checkpointer). A
// client's close is durable once a checkpoint records it closed (the
// checkpoint of the run's next interval window, or its stored end). Runs
// without checkpoints (SBP, or ingest.checkpoints off) count a message
// durable as soon as it is applied. Resume() rebuilds a run from its
// checkpoint after a restart: its clients come back with their stored
// sequences and replay the rest. A client that reconnects (same client id)
// takes over from its previous stream, which is cancelled.
//
// Reconnects (OpenRequest::run_id): a client that names its run is answered
// for that run only -- rejoined while it runs; its repeated close
// acknowledged when it had closed (the run's clients are kept in memory for
// the last kEndedBreakdowns ended runs and in the state store, table
// run_clients, for every stored run); FAILED_PRECONDITION when the run
// ended before it closed; NOT_FOUND when the daemon does not know the run.
// Never joined or created by name. A client whose durable_sequence is above
// what the daemon holds for it lost data on the daemon's side: DATA_LOSS,
// counted and logged. A run leaves the by-name table and becomes "ended" for
// reconnects in the same critical section (ReadyToEndLocked).
//
// A run ends when no stream that may still send is attached (a closed
// client's stream waiting for its acknowledgement sends nothing more) and
// every client has closed or is gone (its stream broke and it did not come back within
// ingest.clientTimeoutMs; the run then ends failed, naming the client), or
// when Control.StopRun stopped it, or at shutdown (EndAll). Ending happens
// only once no stream is attached, so every producer has stopped sending
// (RunManager::EndRun's requirement), and reports departures
// (SetDepartureHook).
//
// Threads: every public method is thread-safe and never waits for the
// recorder (a reaper thread times out gone clients, ends runs, and merges
// the windows a quiet windows client's breakdown row left out once due: it
// looks every ClientTotals::kRefreshMs while such a client is attached); the RoomNotifier's thread
// resumes parked messages. Locks: `mu_` (runs, clients' attachment) is never held while a
// ClientSession lock is taken, except ClientSession's progress and
// listeners locks (MarkDurable, rows); never while waiting for anything.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/config/current_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/ingest/client_session.h"
#include "daemon/ingest/client_totals.h"
#include "daemon/ingest/ingest_stats.h"
#include "daemon/ingest/ingest_stream.h"
#include "daemon/ingest/ingest_types.h"
#include "daemon/ingest/room_notifier.h"
#include "daemon/runs/run_manager.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/state_store.h"

namespace perld::ingest {

class RunTable {
 public:
  struct Run;
  struct Member;
  // One stream's hold on its client. Movable; Leave() ends it.
  struct Session {
    std::shared_ptr<Run> run;
    ClientSession* client = nullptr;  // owned by run
    Member* member = nullptr;         // owned by run
    uint64_t generation = 0;
    runs::RunId run_id = 0;
    bool created = false;  // this open created the run
    // A rate-controlled client (IngestOpen.target_rate > 0): its windows are
    // service windows followed by response windows (RemoteWindow::paced_client).
    bool paced_client = false;
    uint64_t acked_sequence = 0;  // where the client resumes
    // The client closed its part already (a reconnect after a lost close
    // acknowledgement): the stream only repeats the close (CloseDurable).
    bool closed = false;
    int64_t max_memory_bytes = 0;  // ingest.maxClientMemoryBytes when it joined
  };

  // `store` (may be null: nothing persisted) keeps ended runs' clients.
  RunTable(runs::RunManager& manager, const config::CurrentConfig& config, IngestStats& stats,
           state::StateStore* store = nullptr);
  ~RunTable();  // stops the reaper; REQUIRES EndAll() ran if any run exists
  RunTable(const RunTable&) = delete;
  RunTable& operator=(const RunTable&) = delete;

  // Joins or creates the run `open` names and attaches `stream` (cancelled
  // if a newer stream of the same client takes over or the run is stopped;
  // null: a client registered without a stream, SBP). Errors:
  // InvalidArgument (the open itself, over a limits.* cap), NotFound
  // (must_exist, or an unknown run_id), FailedPrecondition (unit/range/mode
  // differ, client already closed, run_id names a run that ended before the
  // client closed), DataLoss (durable_sequence above what the daemon
  // holds), ResourceExhausted (runs, clients per run, memory budget),
  // Unavailable (shutting down). `source` names who feeds a run this open
  // creates (ingest, or sbp).
  absl::StatusOr<Session> Join(const OpenRequest& open, IngestStream* stream,
                               runs::RunSource source = runs::RunSource::kIngest);

  // The session's messages (see ClientSession: duplicates, gaps, parking
  // for room with `on_applied`).
  absl::StatusOr<Offered> OfferWindow(const Session& session, uint64_t sequence,
                                      WindowBuilder build, OnApplied on_applied);
  absl::StatusOr<Offered> OfferBatch(const Session& session, uint64_t sequence, BatchBuilder build,
                                     OnApplied on_applied);
  // The client is done with the run. OutOfRange unless last_sequence is the
  // sequence applied. Its acknowledgement follows once the close is durable
  // (CloseDurable): at once without checkpoints; else when the checkpoint
  // of the run's next interval window records it, or -- the last client to
  // close ends the run at once -- when the run's end is stored. A close
  // never closes a window.
  absl::StatusOr<Applied> Close(const Session& session, uint64_t last_sequence);
  // The stream was cancelled: a message it parked gets its `on_applied`
  // now, on this thread (ClientSession::CancelParked).
  void CancelParked(const Session& session);
  // The stream ended (after Close, or broken). May end the run. A message
  // the stream had parked is dropped; no `on_applied` runs after this returns.
  void Leave(Session& session);

  // The client's acknowledgement state; listeners are called after every
  // change (ClientSession::AddListener).
  Progress CurrentProgress(const Session& session) const;
  uint64_t AddProgressListener(const Session& session, std::function<void()> on_change);
  void RemoveProgressListener(const Session& session, uint64_t token);
  // A closed session (Session::closed): whether the client's close is
  // durable -- a checkpoint holds it, or its run ended and its final total
  // and clients are committed (then its listeners are called).
  bool CloseDurable(const Session& session) const;

  // Checkpoints (the checkpointer, on the dispatcher and store threads).
  // True for a running run whose messages become durable by checkpoints.
  bool Checkpointed(runs::RunId id) const;
  // The run's clients at a cut: `applied` is WindowRecord::applied (by
  // client index); a client is closed in the cut when it closed with its
  // last message inside the cut. Empty when the run is unknown.
  std::vector<state::CheckpointClient> CutClients(runs::RunId id,
                                                  const std::vector<uint64_t>& applied) const;
  // A checkpoint holding `clients` committed: their messages up to
  // `applied` (and closes) are durable.
  void MarkDurable(runs::RunId id, const std::vector<state::CheckpointClient>& clients);
  // Called (on the closing stream's thread) when a client of a checkpointed
  // run closed after `last_sequence`: the checkpointer makes the close
  // durable. Set before any stream opens.
  using CloseHook = std::function<void(runs::RunId id, int client_index, uint64_t last_sequence)>;
  void SetCloseHook(CloseHook hook) { close_hook_ = std::move(hook); }
  // A client that left its run for good without closing -- gone (not back
  // within ingest.clientTimeoutMs) or given up (Abandon) -- or, with
  // client_id empty, a run that ended.
  struct Departure {
    runs::RunId run_id = 0;
    std::string client_id;  // "": the run ended
  };
  // Called on the reaper thread, outside the table's locks, in the order the
  // departures happened (SbpService frees registrations). Set it before any
  // stream opens; departures before that, or still queued at destruction,
  // are not reported.
  using DepartureHook = std::function<void(const Departure&)>;
  void SetDepartureHook(DepartureHook hook);
  // The client gives its part of run `id` up now (SBP's closeClient of a
  // client that never streamed or whose stream failed): the run stops
  // waiting for it and ends failed naming it, as if it had timed out. OK
  // when the client closed or is gone already, or the run has ended;
  // FailedPrecondition while a stream of the client is attached.
  absl::Status Abandon(runs::RunId id, const std::string& client_id);
  // Rebuilds a running ingest run from its stored checkpoint (after the
  // daemon stopped without ending it): same id, name and start; total from
  // the checkpoint; clients detached, each resuming after its `applied`
  // (gone unless it reconnects within ingest.clientTimeoutMs). A checkpoint
  // that knows no client (the daemon stopped before the run's first one,
  // RunHistory::Restore) resumes the run empty: it waits as long for a first
  // client -- by run_id or by name -- and ends failed if none comes.
  // A rate-controlled run resumes with its response view (`response_view`,
  // 0 or 1 entry, each with its checkpoint at the same cut).
  absl::Status Resume(runs::RunInfo info, std::vector<runs::WindowRecord> history,
                      state::Checkpoint checkpoint,
                      std::vector<state::StoredRun> response_view = {});

  // The run's registry entry (for the client's opened answer).
  absl::StatusOr<runs::RunInfo> Info(const Session& session) const;
  // True when `session`'s stream was replaced by a newer one, or its run was
  // stopped (why a cancelled stream ended).
  bool Superseded(const Session& session) const;
  bool RunStopped(const Session& session) const;

  // Control.StopRun for an ingest or SBP run: cancels its streams and ends
  // it once they are gone. NotFound when `id` is not a running remote run.
  // `cause` is what its clients are told.
  absl::Status Stop(runs::RunId id, std::string cause = "stopped by Control.StopRun");
  std::map<runs::RunId, Connections> ConnectionCounts() const;

  // The per-client breakdown of a running remote run or of one of the last
  // kEndedBreakdowns that ended, in join order: each client's state,
  // sequence, totals and (when its distribution fitted the budget) its
  // percentiles of `set`. NotFound otherwise.
  static constexpr size_t kEndedBreakdowns = 16;
  absl::StatusOr<std::vector<ClientView>> Clients(runs::RunId id, const PercentileSet& set) const;
  const BreakdownBudget& breakdown_budget() const { return *shared_.budget; }
  // Clients whose message waits for queue room now.
  int64_t parked_clients() const { return shared_.room->waiting_clients(); }

  // Shutdown: refuse new streams (Unavailable) from now on.
  void StopAccepting();
  bool accepting() const { return accepting_.load(std::memory_order_relaxed); }
  // Shutdown, after the gRPC server stopped (no stream attached): ends every
  // remote run (clients that did not close are named in the failure reason)
  // and waits until each has ended.
  void EndAll();

 private:
  void Reap();
  // A session for a client that closed its part of `run` already (mu_ held).
  Session ClosedSession(const std::shared_ptr<Run>& run, Member& m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Attaches `stream` to the client `open` names in `run` (joined or
  // created), or answers a closed client's reconnect (Session::closed).
  absl::StatusOr<Session> AttachLocked(const OpenRequest& open, IngestStream* stream,
                                       const LatencyConfig& latency,
                                       const config::DaemonConfig& config,
                                       const std::shared_ptr<Run>& run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Join's answer for a run_id that is neither running nor kept in memory
  // as ended: the registry and the state store. mu_ not held.
  absl::StatusOr<Session> JoinEnded(const OpenRequest& open);
  // The ended run `id` as the table keeps it: ending in active_, or in
  // ended_. Null when neither.
  std::shared_ptr<Run> FindEndedLocked(runs::RunId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every client's row as run_clients stores it.
  static std::vector<state::CheckpointClient> ClientRowsLocked(const Run& run);
  // True when the run can end now; marks it ending (and leaves by_name_).
  bool ReadyToEndLocked(Run& run, int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void End(const std::shared_ptr<Run>& run);
  absl::StatusOr<std::shared_ptr<Run>> CreateLocked(const OpenRequest& open, runs::RunSource source,
                                                    const LatencyConfig& latency,
                                                    const config::DaemonConfig& config)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The run's setup shared by new and resumed runs.
  runs::RunSetup SetupFor(const std::shared_ptr<Run>& run);
  std::unique_ptr<ClientSession> NewClient(const Run& run, std::string id, std::string name,
                                           std::string clock, ClientMode mode, int index);

  runs::RunManager& manager_;
  const config::CurrentConfig& config_;
  IngestStats& stats_;
  state::StateStore* const store_;  // null: nothing persisted
  const Shared shared_;             // what every client shares (stats, room, budget)
  std::atomic<bool> accepting_{true};

  mutable Mutex mu_;
  CondVar reap_cv_;  // a client went away, or stopping
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<Run>> by_name_ ABSL_GUARDED_BY(mu_);  // joinable
  std::map<runs::RunId, std::shared_ptr<Run>> active_ ABSL_GUARDED_BY(mu_);   // not yet ended
  std::deque<std::shared_ptr<Run>> ended_ ABSL_GUARDED_BY(mu_);  // the last kEndedBreakdowns
  CloseHook close_hook_;
  DepartureHook departure_hook_ ABSL_GUARDED_BY(mu_);
  std::vector<Departure> departures_ ABSL_GUARDED_BY(mu_);  // not yet reported
  // Runs ready to end (ReadyToEndLocked said so): the reaper ends them, so
  // no stream or control thread waits for the recorder and the dispatcher.
  std::vector<std::shared_ptr<Run>> to_end_ ABSL_GUARDED_BY(mu_);
  std::thread reaper_;
};

// Every capped field of an open (limits.maxNameBytes, maxLabels,
// maxLabelKeyBytes, maxLabelValueBytes, maxPercentiles): OK or
// INVALID_ARGUMENT naming the field, its size, the cap and its key.
absl::Status CheckOpenLimits(const OpenRequest& open, const config::LimitsConfig& limits);

}  // namespace perld::ingest
