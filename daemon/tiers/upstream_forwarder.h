// UpstreamForwarder: tiers of perld. A daemon configured with an
// `upstream.target` forwards every run's closed periodic windows -- exact
// latency/count pairs and counters -- to a parent perld, which merges the
// windows of every edge exactly (the merge is associative: any tree gives
// the percentiles of one daemon fed everything).
//
// Each local run is one client of the parent's run of the same name:
// perld.v1.Ingest in windows mode, client id "<nodeId>/<run id>", the run's
// time unit, range, percentiles and interval, sequence numbers 1, 2, ... per
// local run (a ParentStream: resends after a reconnect, the parent drops
// duplicates). A rate-controlled run (issue 30) opens with its target rate
// and late threshold, so the parent's run keeps a response view too; its
// response view's windows go on the run's own stream as response windows
// (WindowReport.response, the schedule on the last part), never as a run of
// their own. A window larger than upstream.maxPairsPerReport is sent in
// parts (EncodeWindowParts) that merge to it exactly. Total segments and the
// run total are not sent: the parent builds its own from the windows. When
// the local run ends, its last window is sent and the stream closed (the
// parent's run ends once every client closed).
//
// Exact across a crash of this daemon (UpstreamJournal): a run whose
// windows are checkpointed (an ingest run with a state store) is "gated" --
// its messages go to the parent only once the checkpoint covering their
// window committed them to the state database (table upstream_messages),
// and they are deleted there once handed to the stream and reported durable
// by the parent (never before their turn: a resumed stream resends, in
// order, what its parent holds already). A run
// that resumes after a crash continues its stream from the stored sequence
// and resends the stored messages; a run that ended before the crash has
// its stored messages resent and its stream closed at the next start
// (Restore, then DeliverRestored). Windows after the resumed cut never
// reached the parent, so none is counted twice. Other runs (in-process
// benches, SBP, no state) are forwarded as their windows close.
//
// One queue per parent stream, none waits for another: each run's messages
// wait in its own queue (its "lane") until its stream has room
// (ParentStream::TryEnqueue never blocks); a stream without room, refused
// for good, reconnecting or closing holds up only its own lane, and the
// worker serves the others meanwhile, a bounded turn each (round robin).
// The worker sleeps on a condition variable until a lane has work: a
// message queued, a run ended, or its stream's `wake` (an ack made room,
// the close was acknowledged, a final error); its only deadlines are
// upstream.closeTimeoutMs (an ungated stream's close, Stop) and the retry
// of a failed read of the state database.
//
// Bounds (upstream.maxQueuedWindows, "the budget", messages in every
// lane): a lane may always hold its share (the budget divided by the open
// lanes, at least 1) and beyond it what the others leave of the budget, so
// a stuck stream cannot take the others' room and at most about twice the
// budget waits in memory. A gated run's committed messages that find no
// room wait in the state database and are read back in turn when its lane
// is empty (never dropped); an ungated run's window that finds none is
// dropped, counted and logged as an error. A stream refused for good has
// its messages counted as dropped (a gated run's are deleted from the state
// database when its run ends). A message that cannot follow its stream in
// order (a fault of this perld, never the parent's) stops the lane without
// closing the stream: the parent's run ends failed, naming this client,
// rather than finished and short, and a gated run's messages stay stored
// and are resent at the next start. Nothing else in the daemon waits for
// the parent.
//
// Threads: the RunObserver callbacks only queue (OnRunStarted may run under
// the run manager's lock); TakeForCheckpoint on the dispatcher thread,
// Committed on the store's writer thread; one worker thread owns the
// streams (opens, offers, closes, destroys them); counters() from any
// thread. Lock order: mu_, then a stream's own lock (progress, HasRoom);
// store calls and stream destruction happen without mu_. Stop() gives
// every lane until upstream.closeTimeoutMs from its call, all lanes at
// once: what is queued is handed over, ended runs' streams are closed;
// then every stream left is cancelled (a gated run's unacknowledged
// messages stay in the state database for the next start) and the worker
// is joined -- whatever the parent does.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/common/mutex.h"
#include "daemon/config/daemon_config.h"
#include "daemon/runs/run_observer.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/state_store.h"
#include "daemon/state/upstream_journal.h"
#include "daemon/tiers/parent_stream.h"

namespace perld::tiers {

class UpstreamForwarder final : public runs::RunObserver, public state::UpstreamJournal {
 public:
  struct Counters {
    uint64_t runs = 0;             // runs forwarded (streams opened)
    uint64_t open_streams = 0;     // runs whose stream is not closed yet
    uint64_t windows_sent = 0;     // WindowReports handed to a stream (parts counted)
    uint64_t messages_acked = 0;   // acknowledged by the parent
    uint64_t windows_dropped = 0;  // windows lost: no room, or the parent refused the run
    uint64_t queued = 0;           // messages waiting in the lanes now
    uint64_t restored = 0;         // streams continued from the state database
  };

  // REQUIRES: !config.target.empty(); `channel` reaches it (OpenParentChannel:
  // the upstream's TLS and token). The node id is
  // config.node_id, resolved by the caller (state::ResolveNodeId: the
  // configured one, $PERLD_NODE_ID, or the state directory's UUID). `store` (may
  // be null: nothing is gated) keeps gated runs' messages;
  // `checkpointed(id)` says whether a run's windows are checkpointed
  // (ingest::RunTable::Checkpointed), asked at its first window.
  UpstreamForwarder(config::UpstreamConfig config, std::shared_ptr<grpc::Channel> channel,
                    state::StateStore* store = nullptr,
                    std::function<bool(runs::RunId)> checkpointed = {});
  // The same over streams from `streams` (tests: streams without gRPC).
  UpstreamForwarder(config::UpstreamConfig config, ParentStreamFactory streams,
                    state::StateStore* store = nullptr,
                    std::function<bool(runs::RunId)> checkpointed = {});
  ~UpstreamForwarder() override;  // Stop()
  UpstreamForwarder(const UpstreamForwarder&) = delete;
  UpstreamForwarder& operator=(const UpstreamForwarder&) = delete;

  // At start, before any run starts: the streams a previous process stored
  // (StateStore::LoadUpstream). A run that resumes continues its own.
  void Restore(const std::vector<state::UpstreamBacklog>& backlog);
  // After the resumed runs started: the restored streams of runs that do
  // not run any more are resent and closed; `info` finds such a run
  // (nullopt: it is gone, its stream is dropped with an error).
  void DeliverRestored(const std::function<std::optional<runs::RunInfo>(runs::RunId)>& info);

  void OnRunStarted(const runs::RunInfo& info) override;
  void OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) override;
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override;

  void TakeForCheckpoint(runs::RunId id, state::Checkpoint* checkpoint) override;
  void Committed(runs::RunId id, uint64_t next_sequence) override;

  // Hands over what is queued and closes every ended run's stream, until
  // upstream.closeTimeoutMs after the call at most (for all streams
  // together), then cancels what is left and joins the worker. Idempotent.
  void Stop();
  Counters counters() const;
  const std::string& node_id() const { return node_id_; }

 private:
  using Message = state::UpstreamMessage;
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::time_point kNever = Clock::time_point::max();

  // One run's stream to the parent and its queue (mu_).
  struct Lane {
    // As the observer callbacks see the run:
    runs::RunInfo info;               // opens the stream
    uint64_t first_sequence = 1;      // the stream's first message
    bool decided = false;             // gated is known (the first window came)
    bool gated = false;               // its messages wait for their checkpoint
    bool ended = false;               // the run ended: close once all is handed over
    uint64_t next_sequence = 1;       // the next message's
    std::vector<Message> untaken;     // gated: not in a checkpoint yet
    std::deque<Message> uncommitted;  // gated: in a checkpoint not committed yet
    uint64_t committed_next = 1;      // gated: every message below is committed
    // Gated, non-zero: the messages from here up to committed_next are in
    // the state database only (no room, or a restart); the worker reads
    // them back in order when the queue is empty.
    uint64_t stored_from = 0;
    std::deque<Message> queue;  // ready, in order, not handed to the stream yet

    // The worker's (changed under mu_, so counters() may read them):
    std::unique_ptr<ParentStream> stream;  // null until the worker opened it
    uint64_t released = 0;  // deleted from the store up to here (handed over and durable)
    bool refused = false;   // handed-over failed: later messages are only counted
    // A message could not follow the stream in order (a fault of ours):
    // nothing more is handed over and the stream is never closed, only
    // cancelled once the run ended (the parent's run fails, not short).
    bool broken = false;
    bool close_asked = false;  // RequestClose was called
    Clock::time_point closing_since = kNever;
    Clock::time_point retry_at = kNever;  // a failed read of the store is retried then
  };
  // What a turn of the worker does once mu_ is released.
  struct Deferred {
    std::vector<std::pair<runs::RunId, uint64_t>> release;  // StateStore::ReleaseUpstream
    std::vector<runs::RunId> end;                           // StateStore::EndUpstream
    std::vector<std::unique_ptr<ParentStream>> streams;     // to destroy (cancel)
  };

  // mu_ held:
  Lane& StartRestoredLocked(runs::RunInfo info, const state::UpstreamBacklog& backlog)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `k` more messages fit `lane`'s queue (the budget, see above).
  bool RoomLocked(const Lane& lane, size_t k) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueMessagesLocked(runs::RunId id, Lane& lane, std::vector<Message> messages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadyLocked(runs::RunId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // the worker looks next
  void Wake(runs::RunId id);                                            // a stream's `wake`

  // The worker thread (mu_ held on entry and exit of each; they release it
  // around a stream's calls and the store's reads):
  void Work() ABSL_LOCKS_EXCLUDED(mu_);
  // Does what the lane can do now: opens its stream, deletes what the
  // parent made durable, hands over a turn's messages, reads stored ones
  // back, asks for the close, finishes it.
  void Serve(runs::RunId id, Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands over up to a turn of the lane's queue; false: no room (or done).
  void HandOver(runs::RunId id, Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reload(runs::RunId id, Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets the state database drop the lane's messages up to `handed` (the
  // last one handed to its stream) that the parent holds (`durable`).
  void ReleaseLocked(runs::RunId id, Lane& lane, uint64_t durable, uint64_t handed,
                     Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts what a refused lane still holds (queued and stored) as dropped.
  void DropRefusedLocked(Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Accounts for a lane whose stream closed, failed, timed out or (`give_up`)
  // is left at the stop deadline; the caller erases it.
  void FinishLocked(runs::RunId id, Lane& lane, bool give_up, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunDeferred(Deferred& deferred) ABSL_LOCKS_EXCLUDED(mu_);

  const config::UpstreamConfig config_;
  const ParentStreamFactory streams_;
  const std::string node_id_;
  state::StateStore* const store_;
  const std::function<bool(runs::RunId)> checkpointed_;

  mutable Mutex mu_;
  CondVar cv_;  // the worker: ready_, stopping_, a deadline
  // Only the worker erases a lane, so a Lane& it holds stays valid while it
  // releases mu_.
  std::map<runs::RunId, Lane> lanes_ ABSL_GUARDED_BY(mu_);
  std::set<runs::RunId> ready_ ABSL_GUARDED_BY(mu_);  // lanes the worker looks at next
  std::map<runs::RunId, state::UpstreamBacklog> restored_
      ABSL_GUARDED_BY(mu_);                  // until the run starts
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // messages in every lane's queue
  bool stop_called_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // the observers ignore new runs and windows
  Clock::time_point stop_deadline_ ABSL_GUARDED_BY(mu_) = kNever;

  // Atomics, not guarded: counters() reads them without mu_.
  std::atomic<uint64_t> runs_{0};
  std::atomic<uint64_t> windows_sent_{0};
  std::atomic<uint64_t> closed_acked_{0};  // acked messages of finished lanes (added under mu_)
  std::atomic<uint64_t> windows_dropped_{0};
  std::atomic<uint64_t> restored_count_{0};
  std::thread worker_;  // last: starts once every member above exists
};

}  // namespace perld::tiers
