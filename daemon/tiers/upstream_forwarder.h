// UpstreamForwarder: tiers of perld. A daemon configured with an
// `upstream.target` forwards every run's closed periodic windows -- exact
// latency/count pairs and counters -- to a parent perld, which merges the
// windows of every edge exactly (the merge is associative: any tree gives
// the percentiles of one daemon fed everything).
//
// Each local run is one client of the parent's run of the same name:
// perld.v1.Ingest in windows mode, client id "<nodeId>/<run id>", the run's
// time unit, range, percentiles and interval, sequence numbers 1, 2, ... per
// local run (IngestSender: resends after a reconnect, the parent drops
// duplicates). A window larger than upstream.maxPairsPerReport is sent in
// parts (EncodeWindowParts) that merge to it exactly. Total segments and the
// run total are not sent: the parent builds its own from the windows. When
// the local run ends, its last window is sent and the stream closed (the
// parent's run ends once every client closed).
//
// Exact across a crash of this daemon (UpstreamJournal): a run whose
// windows are checkpointed (an ingest run with a state store) is "gated" --
// its messages go to the parent only once the checkpoint covering their
// window committed them to the state database (table upstream_messages),
// and they are deleted there once the parent reports them durable. A run
// that resumes after a crash continues its stream from the stored sequence
// and resends the stored messages; a run that ended before the crash has
// its stored messages resent and its stream closed at the next start
// (Restore, then DeliverRestored). Windows after the resumed cut never
// reached the parent, so none is counted twice. Other runs (in-process
// benches, SBP, no state) are forwarded as their windows close.
//
// Backpressure: messages wait in one queue while the parent is slow or
// down; past upstream.maxQueuedWindows a window of an ungated run is
// dropped, counted and logged as an error. A gated run's messages are
// never dropped: they are in the state database until the parent has them.
// Nothing else in the daemon waits for the parent.
//
// Threads: the RunObserver callbacks only queue (OnRunStarted may run under
// the run manager's lock); TakeForCheckpoint on the dispatcher thread,
// Committed on the store's writer thread; one worker thread owns the
// streams. Counters() from any thread. Stop() sends what is queued, closes
// every stream (each waits up to upstream.closeTimeoutMs for its
// acknowledgements) and joins.
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
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/lib/ingest_sender.h"
#include "daemon/config/daemon_config.h"
#include "daemon/runs/run_observer.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/state_store.h"
#include "daemon/state/upstream_journal.h"

namespace perld::tiers {

class UpstreamForwarder final : public runs::RunObserver, public state::UpstreamJournal {
 public:
  struct Counters {
    uint64_t runs = 0;             // runs forwarded (streams opened)
    uint64_t open_streams = 0;     // runs whose stream is not closed yet
    uint64_t windows_sent = 0;     // WindowReports handed to a stream (parts counted)
    uint64_t messages_acked = 0;   // acknowledged by the parent
    uint64_t windows_dropped = 0;  // windows lost: queue full or the parent refused the run
    uint64_t queued = 0;           // windows waiting now
    uint64_t restored = 0;         // streams continued from the state database
  };

  // REQUIRES: !config.target.empty(); `channel` reaches it (OpenChannel with
  // the upstream's TLS and token, see UpstreamSecurity). The node id is
  // config.node_id, resolved by the caller (state::ResolveNodeId: the
  // configured one, $PERLD_NODE_ID, or the state directory's UUID). `store` (may
  // be null: nothing is gated) keeps gated runs' messages;
  // `checkpointed(id)` says whether a run's windows are checkpointed
  // (IngestRuns::Checkpointed), asked at its first window.
  UpstreamForwarder(config::UpstreamConfig config, std::shared_ptr<grpc::Channel> channel,
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

  // Sends everything queued, closes every stream, joins the worker. Idempotent.
  void Stop();
  Counters counters() const;
  const std::string& node_id() const { return node_id_; }

 private:
  using Message = state::UpstreamMessage;
  struct Task {
    enum class Kind { kStart, kMessages, kReload, kEnd };
    Kind kind = Kind::kStart;
    runs::RunInfo info;             // kStart
    uint64_t first_sequence = 1;    // kStart: the stream's first message
    bool gated = false;             // kMessages: stored until the parent has them
    std::vector<Message> messages;  // kMessages
    runs::RunId run_id = 0;
  };
  // A run's stream as the observer callbacks see it (mu_).
  struct Stream {
    bool decided = false;             // gated is known (the first window came)
    bool gated = false;               // its messages wait for their checkpoint
    bool ended = false;               // OnRunEnded: close once all is handed over
    uint64_t next_sequence = 1;       // the next message's
    std::vector<Message> untaken;     // gated: not in a checkpoint yet
    std::deque<Message> uncommitted;  // gated: in a checkpoint not committed yet
    uint64_t committed_next = 1;      // gated: every message below is committed
    // Gated, non-zero: the messages from here up to committed_next are in
    // the state database only (a full queue, or a restart); a kReload task
    // reads them back in order.
    uint64_t stored_from = 0;
  };
  // A stream to the parent as the worker owns it.
  struct Sender {
    std::unique_ptr<client::IngestSender> sender;
    bool gated = false;
    uint64_t released = 0;  // the parent's durable sequence last deleted from the store
    // When End asked for the close (max: open).
    std::chrono::steady_clock::time_point closing_since =
        std::chrono::steady_clock::time_point::max();
  };

  // mu_ held:
  Stream& StartRestoredLocked(runs::RunInfo info, const state::UpstreamBacklog& backlog);
  void MaybeEndLocked(runs::RunId id);  // an ended run with everything handed over: End
  void QueueLocked(Task task);
  void QueueMessagesLocked(runs::RunId id, std::vector<Message> messages, bool gated);
  void QueueReloadLocked(runs::RunId id);
  void QueueEndLocked(runs::RunId id);

  // The worker thread:
  void Work();
  void Start(const Task& task);
  void Send(runs::RunId id, const std::vector<Message>& messages, bool gated);
  void Reload(runs::RunId id);  // sends the next stored messages
  void End(runs::RunId id);     // asks the parent to close the stream
  // Deletes from the store what parents made durable; finishes the streams
  // whose close was acknowledged (or, ungated, timed out); `last`: finishes
  // every stream (Stop).
  void Tend(bool last);
  // Closes (waiting up to `wait` for the acknowledgement) and accounts.
  void Finish(runs::RunId id, Sender& sender, std::chrono::milliseconds wait);

  const config::UpstreamConfig config_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::string node_id_;
  state::StateStore* const store_;
  const std::function<bool(runs::RunId)> checkpointed_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;                                  // mu_
  std::map<runs::RunId, Stream> streams_;                   // mu_
  std::map<runs::RunId, state::UpstreamBacklog> restored_;  // mu_: until the run starts
  // mu_: once stopping, a stream waits for room only until then.
  std::chrono::steady_clock::time_point give_up_at_ = std::chrono::steady_clock::time_point::max();
  std::atomic<int64_t> queued_windows_{0};  // messages in tasks_ (changed under mu_)
  bool stopping_ = false;                   // mu_

  // The worker's streams; senders_mu_ guards the map for Counters() (only
  // the worker changes it, so a sender it holds outlives a call).
  mutable std::mutex senders_mu_;
  std::map<runs::RunId, Sender> senders_;
  std::set<runs::RunId> refused_;  // worker: runs whose parent refused them (logged once)
  std::atomic<uint64_t> runs_{0};
  std::atomic<uint64_t> windows_sent_{0};
  std::atomic<uint64_t> closed_acked_{0};  // acked messages of closed streams
  std::atomic<uint64_t> windows_dropped_{0};
  std::atomic<uint64_t> restored_count_{0};
  std::thread worker_;  // last: starts once every member above exists
};

}  // namespace perld::tiers
