// IngestRuns: the runs fed by remote clients (perld.v1.Ingest) -- joining and
// creating them by name, each client's sequence state, applying messages
// exactly once, and ending a run when its clients are done.
//
// A run is created by the first client that opens a stream with its name and
// joined by the next ones (their time unit and range must match). Every
// message goes to the single recorder through the run's RemoteWindowInbox:
// a window is merged, a raw batch's timestamps are recorded one by one as a
// local writer's (RecordBatch).
//
// Exactly once: a client's messages are applied under its apply lock, in
// sequence order; the highest contiguous sequence applied is what the stream
// acknowledges. A resend (sequence <= applied) is counted and skipped; a
// gap is refused. Every message -- a raw client's batch too, whose
// timestamps the recorder then records one by one as a local writer's --
// reaches the recorder whole through the run's RemoteWindowInbox, tagged
// with its sequence, so
// each closed periodic window names the last sequence of every client it
// holds (WindowRecord::applied): the cut a checkpoint stores.
//
// Durability (runs created with checkpoints on): a message is durable once
// a committed checkpoint holds it (MarkDurable, from the checkpointer); the
// stream reports it in IngestAck.durable_sequence and the client may forget
// it only then. A client's close is durable once a checkpoint records it
// closed. Runs without checkpoints (SBP, or state.checkpoints off) count a
// message durable as soon as it is applied. Resume() rebuilds a run from its
// checkpoint after a restart: its clients come back with their stored
// sequences and replay the rest. A client that reconnects (same client id) takes over from
// its previous stream, which is cancelled; the apply lock makes the hand-over
// exact (the old stream's in-flight message is either applied before the new
// stream learns `applied`, or not at all).
//
// A run ends when no stream is attached and every client has closed or is
// gone (its stream broke and it did not come back within
// ingest.clientTimeoutMs; the run then ends failed, naming the client), or
// when Control.StopRun stopped it, or at shutdown (EndAll). Ending happens
// only once no stream is attached, so every producer has stopped sending
// (RunManager::EndRun's requirement).
//
// Reconnects (IngestOpen.run_id): a client that names its run is answered
// for that run only -- rejoined while it runs; its repeated close
// acknowledged when it had closed (the run's clients are kept in memory for
// the last kEndedBreakdowns ended runs and in the state store, table
// run_clients, for every stored run); FAILED_PRECONDITION when the run
// ended before it closed; NOT_FOUND when the daemon does not know the run.
// Never joined or created by name. A client whose durable_sequence is above
// what the daemon holds for it lost data on the daemon's side: DATA_LOSS,
// counted and logged. A run leaves the by-name table and becomes "ended" for
// reconnects in the same critical section (ReadyToEndLocked): no reconnect
// can fall between the two.
//
// Threads: every public method is thread-safe (gRPC handler threads, the
// control service, the main thread); a reaper thread times out gone clients
// and reports departures (SetDepartureHook).
// Locks: `mu_` (runs, clients' attachment) and each client's apply lock are
// never held together.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/runs/run_manager.h"
#include "daemon/service/client_totals.h"
#include "daemon/service/current_config.h"
#include "daemon/service/ingest_stats.h"
#include "daemon/service/ingest_stream.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/state_store.h"
#include "perld/v1/ingest.pb.h"

namespace perld::service {

class IngestRuns {
 public:
  struct Run;
  struct Client;
  // One stream's hold on its client. Movable; Leave() ends it.
  struct Session {
    std::shared_ptr<Run> run;
    Client* client = nullptr;  // owned by run
    uint64_t generation = 0;
    runs::RunId run_id = 0;
    bool created = false;         // this open created the run
    uint64_t acked_sequence = 0;  // where the client resumes
    // The client closed its part already (a reconnect after a lost close
    // acknowledgement): the stream only repeats the close (WaitClosed).
    bool closed = false;
    int64_t max_memory_bytes = 0;
  };
  // What one applied (or skipped) message leaves behind.
  struct Applied {
    uint64_t acked_sequence = 0;
    uint64_t duplicates = 0;
    bool duplicate = false;
  };
  // A client's acknowledgement state, as its stream reports it.
  struct Progress {
    uint64_t applied = 0;
    uint64_t durable = 0;
    uint64_t duplicates = 0;
    bool close_durable = false;  // a checkpoint holds the client's close
    bool operator==(const Progress&) const = default;
  };

  // `store` (may be null: nothing persisted) keeps ended runs' clients.
  IngestRuns(runs::RunManager& manager, const CurrentConfig& config, IngestStats& stats,
             state::StateStore* store = nullptr);
  ~IngestRuns();  // stops the reaper; REQUIRES EndAll() ran if any run exists
  IngestRuns(const IngestRuns&) = delete;
  IngestRuns& operator=(const IngestRuns&) = delete;

  // Joins or creates the run `open` names and attaches the stream
  // (`stream`, cancelled if a newer stream of the same client takes over or
  // the run is stopped; null: a client registered without a stream, SBP).
  // Errors: InvalidArgument (open itself), NotFound (must_exist, or an
  // unknown run_id), FailedPrecondition (unit/range/mode differ, client
  // already closed, run_id names a run that ended before the client
  // closed), DataLoss (durable_sequence above what the daemon holds),
  // ResourceExhausted (runs, clients per run), Unavailable (shutting down).
  // `source` names who feeds a run this open creates (ingest, or sbp for
  // SBK's protocol translated by SbpService).
  absl::StatusOr<Session> Join(const v1::IngestOpen& open, IngestStream* stream,
                               runs::RunSource source = runs::RunSource::kIngest);

  // Waits, as ApplyWindow, while the client's queued messages exceed its
  // memory limit (until `stream` is cancelled).
  absl::StatusOr<Applied> ApplyBatch(const Session& session, const v1::TimestampBatch& batch,
                                     const IngestStream& stream);
  // Waits while the client's unmerged windows exceed its memory limit
  // (until `stream` is cancelled). A message counts in the client's
  // breakdown only once it was queued for the recorder.
  absl::StatusOr<Applied> ApplyWindow(const Session& session, const v1::WindowReport& report,
                                      const IngestStream& stream);
  // The same for a window in another wire format (SBP): `build` turns it into
  // a checked RemoteWindow (ingest_codec.h: CheckPairs, CheckWindow) for the
  // run's latency range and pair limit; it runs only for a new sequence.
  using WindowBuilder = absl::FunctionRef<absl::StatusOr<runs::RemoteWindow>(
      const LatencyConfig& run, int64_t max_pairs)>;
  absl::StatusOr<Applied> ApplyWindow(const Session& session, uint64_t sequence,
                                      WindowBuilder build, const IngestStream& stream);
  // The client is done with the run. OutOfRange unless last_sequence is the
  // sequence applied.
  absl::StatusOr<Applied> Close(const Session& session, uint64_t last_sequence);
  // The stream ended (after Close, or broken). May end the run.
  void Leave(Session& session);

  // The client's progress once it differs from `seen`, `stop` is set (then
  // call WakeProgress), or `timeout` passed.
  Progress WaitProgress(const Session& session, const Progress& seen, const std::atomic<bool>& stop,
                        std::chrono::milliseconds timeout) const;
  void WakeProgress(const Session& session) const;
  Progress CurrentProgress(const Session& session) const;
  // A closed session (Session::closed): whether the client's close is
  // durable -- a checkpoint holds it, or its run ended and its final total
  // and clients are committed.
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
  // Called on the reaper thread, outside IngestRuns' locks, in the order the
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
  // (gone unless it reconnects within ingest.clientTimeoutMs).
  absl::Status Resume(runs::RunInfo info, std::vector<runs::WindowRecord> history,
                      state::Checkpoint checkpoint);

  // The run's registry entry (for IngestOpened).
  absl::StatusOr<runs::RunInfo> Info(const Session& session) const;
  // True when `session`'s stream was replaced by a newer one, or its run was
  // stopped (why a cancelled stream ended).
  bool Superseded(const Session& session) const;
  bool RunStopped(const Session& session) const;

  // Control.StopRun for an ingest run: cancels its streams and ends it once
  // they are gone. NotFound when `id` is not a running ingest run.
  absl::Status Stop(runs::RunId id);
  // Clients of every active ingest run: streams attached now and distinct
  // clients that ever joined (SBK_Connections / SBK_Max_Connections).
  struct Connections {
    int now = 0;
    int ever = 0;
  };
  std::map<runs::RunId, Connections> ConnectionCounts() const;

  // The per-client breakdown of a running remote run or of one of the last
  // kEndedBreakdowns that ended: each client's state, sequence, totals and
  // (when its distribution fitted the budget) its percentiles of `set`.
  // NotFound otherwise.
  static constexpr size_t kEndedBreakdowns = 16;
  // Appends one RemoteClient per client to `out`, in join order.
  absl::Status Clients(runs::RunId id, const PercentileSet& set,
                       google::protobuf::RepeatedPtrField<v1::RemoteClient>* out) const;
  const BreakdownBudget& breakdown_budget() const { return *budget_; }

  // Shutdown: refuse new streams (Unavailable) from now on.
  void StopAccepting();
  bool accepting() const { return accepting_.load(std::memory_order_relaxed); }
  // Shutdown, after the gRPC server stopped (no stream attached): ends every
  // ingest run (clients that did not close are named in the failure reason)
  // and waits until each has ended.
  void EndAll();

 private:
  void Reap();
  // A session for a client that closed its part of `run` already (mu_ held).
  Session ClosedSession(const std::shared_ptr<Run>& run, Client& c);
  // Attaches `stream` to the client `open` names in `run` (joined or
  // created), or answers a closed client's reconnect (Session::closed).
  absl::StatusOr<Session> AttachLocked(const v1::IngestOpen& open, IngestStream* stream,
                                       const LatencyConfig& latency,
                                       const config::DaemonConfig& config,
                                       const std::shared_ptr<Run>& run);
  // Join's answer for a run_id that is neither running nor kept in memory
  // as ended: the registry and the state store. mu_ not held.
  absl::StatusOr<Session> JoinEnded(const v1::IngestOpen& open);
  // The ended run `id` as IngestRuns keeps it (mu_ held): ending in
  // active_, or in ended_. Null when neither.
  std::shared_ptr<Run> FindEndedLocked(runs::RunId id) const;
  // Every client's row as run_clients stores it (mu_ held).
  static std::vector<state::CheckpointClient> ClientRowsLocked(const Run& run);
  // Under mu_: true when the run can end now; marks it ending.
  bool ReadyToEndLocked(Run& run, int64_t now_ns);
  void End(const std::shared_ptr<Run>& run);
  absl::StatusOr<std::shared_ptr<Run>> CreateLocked(const v1::IngestOpen& open,
                                                    runs::RunSource source,
                                                    const LatencyConfig& latency,
                                                    const config::DaemonConfig& config);
  // The run's setup shared by new and resumed runs.
  runs::RunSetup SetupFor(const std::shared_ptr<Run>& run);
  // Waits until `bytes` more of the client's messages may be queued (its
  // share and everyone's: backpressure); refuses a message that can never
  // fit. Under the client's apply lock.
  absl::Status WaitForRoom(const Session& session, Client& c, int64_t bytes, uint64_t sequence,
                           const config::DaemonConfig& config, const IngestStream& stream);
  // Queues a checked message of the client for the recorder and advances
  // its sequence (after WaitForRoom). Under the client's apply lock.
  void Push(const Session& session, Client& c, runs::RemoteWindow w, uint64_t sequence);
  void Advanced(const Session& session, Client& c) const;

  runs::RunManager& manager_;
  const CurrentConfig& config_;
  IngestStats& stats_;
  state::StateStore* const store_;  // null: nothing persisted
  std::atomic<bool> accepting_{true};

  mutable std::mutex mu_;
  std::condition_variable reap_cv_;  // a client went away, or stopping
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<Run>> by_name_;  // joinable runs
  std::map<runs::RunId, std::shared_ptr<Run>> active_;   // every run not yet ended
  std::deque<std::shared_ptr<Run>> ended_;               // the last kEndedBreakdowns ended
  std::shared_ptr<BreakdownBudget> budget_;
  CloseHook close_hook_;
  DepartureHook departure_hook_;       // mu_
  std::vector<Departure> departures_;  // mu_: not yet reported (the reaper reports them)
  std::thread reaper_;
};

}  // namespace perld::service
