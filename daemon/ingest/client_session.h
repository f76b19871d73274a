// ClientSession: one remote client of a run -- its sequence numbers, the
// messages it offers, their way to the run's recorder, and what its stream
// acknowledges. RunTable decides who the client is and when it comes and
// goes; this class applies its messages exactly once.
//
// Exactly once: a message is offered with its sequence; under the client's
// apply lock a resend (sequence <= applied) is counted and skipped, a gap is
// refused, and the next sequence is decoded (the caller's builder), checked
// against the run and queued whole to the run's inbox (RemoteWindowInbox),
// tagged with its sequence so each closed window names the last sequence of
// every client it holds (a checkpoint's cut). Only the stream that owns the
// client (its generation) may apply: a replaced stream gets ABORTED.
//
// Backpressure without a thread: a message that does not fit the client's
// share of queued memory (ingest.maxClientMemoryBytes) or everyone's
// (ingest.maxMemoryBytes) is parked -- decoded, sequence not yet advanced --
// and a retry is registered with the RoomNotifier; the offer returns
// "parked" and the caller stops reading the stream. When the recorder has
// made room the notifier's thread pushes the message and calls the offer's
// Resume with the outcome. The apply lock is never held while waiting. A
// message larger than either limit can never fit: INVALID_ARGUMENT (final).
//
// The breakdown row (View, for Query.GetClients) is published after every
// change under the apply lock and read under a lock held only to copy it:
// a query never waits behind a message being decoded or merged, nor behind
// an applier that lost its CPU while holding the apply lock. A busy
// client's row may trail its windows by up to ClientTotals::kRefreshMs
// while it sends (its row still one moment: its acknowledged sequence is
// the last one the row holds); its close, its stream's leaving and its
// run's end merge them all (FlushBreakdown), and so does the run table's
// reaper for a client that stays attached but sends nothing for
// ClientTotals::kRefreshMs (QuietWithWindowsWaiting): a busy client's next
// window merges them itself, so the reaper never takes its apply lock.
//
// Progress: applied, durable (MarkDurable, from a committed checkpoint; or
// = applied on a run without checkpoints), duplicates, close durable.
// Listeners (the stream's acknowledgement writer) are called after every
// change, under the listeners' own lock only: RemoveListener waits for a
// call in progress, so a listener is never called after it returns.
//
// Threads: every method is thread-safe. Locks, in this order: the apply
// lock, the listeners' lock, the progress lock; the view's lock is taken
// alone or under the apply lock, and only the breakdown's IndexRecycler
// lock under it (publishing may drop the last hold on an index). `on_applied` runs with none of
// them held. A listener must not call back into this client.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/config/current_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/core/time_stamp.h"
#include "daemon/ingest/client_totals.h"
#include "daemon/ingest/ingest_stats.h"
#include "daemon/ingest/ingest_types.h"
#include "daemon/ingest/room_notifier.h"
#include "daemon/runs/remote_window_inbox.h"
#include "daemon/runs/run_info.h"

namespace perld::ingest {

// What a client needs of its run: where messages go and how they are
// checked. Owned by the run; constant after the run is created.
struct RunContext {
  runs::RunId id = 0;
  LatencyConfig latency;
  std::shared_ptr<runs::RemoteWindowInbox> inbox;
  bool checkpointed = false;  // messages become durable by checkpoints
  // Rate-controlled (RunSpec::target_rate > 0, with a response view): raw
  // batches carry start lags, windows clients send response windows too.
  bool paced = false;
};

// What every client of the daemon shares.
struct Shared {
  const config::CurrentConfig& config;
  IngestStats& stats;
  std::shared_ptr<RoomNotifier> room;
  std::shared_ptr<BreakdownBudget> budget;
};

// Turns a message into a checked window for the run's latency range and
// pair limit (ingest_codec.h: DecodeWindow; SBP: SbpWindow).
using WindowBuilder = absl::FunctionRef<absl::StatusOr<runs::RemoteWindow>(const LatencyConfig& run,
                                                                           int64_t max_pairs)>;
// Decodes a raw batch into `out` (timestamps, and a rate-controlled run's
// intended starts and skipped slots), within `max_batch_length`; returns
// its records (the sum of the timestamps' record counts).
using BatchBuilder =
    absl::FunctionRef<absl::StatusOr<int64_t>(int64_t max_batch_length, runs::RemoteWindow* out)>;
// A parked message's outcome, called once on the RoomNotifier's thread.
using OnApplied = std::function<void(absl::StatusOr<Applied>)>;

// An offer's outcome now: applied (or a duplicate), or parked for room.
struct Offered {
  bool parked = false;
  Applied applied;  // when not parked
};

class ClientSession {
 public:
  // `clock`: the client's timestamp clock as people read it ("": not reported).
  ClientSession(std::string id, std::string name, std::string clock, ClientMode mode, int index,
                const RunContext& run, Shared shared);
  ~ClientSession();  // REQUIRES: no message parked (Detach ran)
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  const std::string& id() const { return id_; }
  const std::string& name() const { return name_; }
  ClientMode mode() const { return mode_; }
  int index() const { return index_; }

  // A new stream takes the client over: the run table gives it the next
  // generation (under its lock, with the stream), then TakeOver waits for
  // an in-flight message of the replaced stream (after it, that stream
  // applies nothing more) and returns the sequence the client resumes
  // after. A message that stream had parked is never applied: the
  // notifier's next retry gives its `on_applied` ABORTED (the client
  // resends it), unless that stream's cancel or leave came first.
  uint64_t NewGeneration();
  uint64_t TakeOver();
  // The stream `generation` was cancelled: a message it parked is dropped
  // and its `on_applied` called at once, on this thread, with CANCELLED
  // (ABORTED when superseded), so the stream can end. Nothing parked: a
  // no-op (a retry that took the message calls `on_applied` itself).
  void CancelParked(uint64_t generation);
  // The stream `generation` left: a message it parked is dropped, and no
  // Resume runs after this returns.
  void Detach(uint64_t generation);
  bool Superseded(uint64_t generation) const {
    return generation_.load(std::memory_order_relaxed) != generation;
  }

  // A window (windows mode) or raw batch (raw mode) with its sequence, from
  // the stream `generation`. Errors: ABORTED (superseded), INVALID_ARGUMENT
  // (sequence 0, wrong mode, malformed, over a size limit), OUT_OF_RANGE (a
  // gap), FAILED_PRECONDITION (a new message after the client's close).
  // Parked: `on_applied` gets the outcome later.
  absl::StatusOr<Offered> OfferWindow(uint64_t generation, uint64_t sequence, WindowBuilder build,
                                      int64_t max_memory_bytes, OnApplied on_applied);
  absl::StatusOr<Offered> OfferBatch(uint64_t generation, uint64_t sequence, BatchBuilder build,
                                     int64_t max_memory_bytes, OnApplied on_applied);
  // The client closes its part after `last_sequence`: OUT_OF_RANGE unless
  // that is the sequence applied. From then on it applies nothing new (its
  // run may end while the closing stream waits for the acknowledgement).
  absl::StatusOr<Applied> Close(uint64_t generation, uint64_t last_sequence);

  // Progress.
  Progress progress() const;
  // A client resumed from a checkpoint: what it had (before any stream).
  void SetApplied(uint64_t applied);
  void SetProgress(const Progress& p);
  void MarkDurable(uint64_t applied, bool closed);
  void MarkCloseDurable();  // a run without checkpoints, or its end is stored
  uint64_t AddListener(std::function<void()> on_change);
  void RemoveListener(uint64_t token);
  // Calls every listener (e.g. the run's end was stored).
  void NotifyListeners() const;

  uint64_t applied() const;
  // The breakdown row (state filled by the caller); percentiles of `set`
  // when the client's distribution is kept. Never takes the apply lock.
  ClientView View(const PercentileSet& set) const;
  // Merges the windows waiting beside the breakdown row into it (the
  // client went quiet: its stream left, its run ended, or it sent nothing
  // more for a while).
  void FlushBreakdown();
  // Windows wait beside the row and the newest came kRefreshMs or more
  // before `now_unix_ms` (as of the last message applied): the reaper's cue
  // to FlushBreakdown. Never takes a lock.
  bool QuietWithWindowsWaiting(int64_t now_unix_ms) const {
    const int64_t since = windows_waiting_since_ms_.load(std::memory_order_relaxed);
    return since > 0 && ClientTotals::RefreshPassed(since, now_unix_ms);
  }

 private:
  struct Parked {
    runs::RemoteWindow window;
    uint64_t sequence = 0;
    uint64_t generation = 0;
    OnApplied on_applied;
    int64_t timestamps = 0;  // raw: for the counters
    int64_t records = 0;
    int64_t pairs = 0;  // windows: for the counters
  };

  // Under apply_mu_: the checks every offer passes before decoding; sets
  // *duplicate for a resend.
  absl::Status CheckOffer(uint64_t generation, uint64_t sequence, ClientMode mode, bool* duplicate)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // Queues `p` now if it fits (kDone), else says which room it waits for.
  // Refuses one that never can fit.
  absl::StatusOr<RoomNotifier::Result> PushIfRoom(Parked& p, int64_t max_memory_bytes,
                                                  const config::DaemonConfig& config)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // Takes the message `generation` parked off the notifier and waits for a
  // retry in progress: its `on_applied` (empty when none was parked), for
  // the caller to call or drop. No retry runs its `on_applied` after this.
  OnApplied DropParked(uint64_t generation) ABSL_LOCKS_EXCLUDED(apply_mu_);
  // Pushes, counts and advances for a message that fits.
  void Push(Parked& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // Fills a message's body (its window, its counts); a refusal is final.
  using Decode = absl::FunctionRef<absl::Status(const config::DaemonConfig&, Parked*)>;
  // OfferWindow's and OfferBatch's one path: checks the sequence, answers a
  // resend, decodes (under apply_mu_, so a message is decoded once), then
  // pushes the message or parks it.
  absl::StatusOr<Offered> OfferMessage(uint64_t generation, uint64_t sequence, ClientMode mode,
                                       int64_t max_memory_bytes, OnApplied on_applied,
                                       Decode decode) ABSL_LOCKS_EXCLUDED(apply_mu_);
  // Pushes `p` or parks it. The caller releases apply_mu_ and calls
  // Advanced() for one that was not parked.
  absl::StatusOr<Offered> Offer(Parked p, int64_t max_memory_bytes,
                                const config::DaemonConfig& config)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // The notifier's retry of the parked message.
  RoomNotifier::Result Retry();
  Applied AppliedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // Publishes applied/duplicates to the progress and calls the listeners.
  void Advanced(const Applied& a);
  // Copies what View reports to view_ (after every change under apply_mu_).
  void PublishViewLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);

  // What View reports, published by the applier: View never takes
  // apply_mu_, so a query never waits behind a message being decoded or
  // merged (or behind its applier thread's time slice).
  struct PublishedView {
    uint64_t acked_sequence = 0;  // the last sequence `totals` holds
    uint64_t duplicates = 0;
    ClientTotals::Snapshot totals;
  };

  const std::string id_;
  const std::string name_;
  const std::string clock_;
  const ClientMode mode_;
  const int index_;
  const RunContext& run_;
  const Shared shared_;
  std::atomic<uint64_t> generation_{0};
  // Bytes of this client's messages queued and not yet merged.
  const std::shared_ptr<std::atomic<int64_t>> charge_ = std::make_shared<std::atomic<int64_t>>(0);

  mutable Mutex apply_mu_;
  uint64_t applied_ ABSL_GUARDED_BY(apply_mu_) = 0;  // highest contiguous sequence applied
  bool closed_ ABSL_GUARDED_BY(apply_mu_) = false;   // Close succeeded: nothing new applies
  uint64_t duplicates_ ABSL_GUARDED_BY(apply_mu_) = 0;
  ClientTotals totals_ ABSL_GUARDED_BY(apply_mu_);
  // The highest sequence totals_' published row holds (applied_ but for
  // windows waiting to be merged).
  uint64_t row_applied_ ABSL_GUARDED_BY(apply_mu_) = 0;
  std::optional<Parked> parked_ ABSL_GUARDED_BY(apply_mu_);
  int64_t parked_limit_ ABSL_GUARDED_BY(apply_mu_) = 0;  // the parked offer's client limit
  uint64_t room_token_ ABSL_GUARDED_BY(apply_mu_) = 0;   // its retry at the notifier

  // ClientTotals::pending_last_unix_ms() while windows wait beside the row,
  // else 0; written under apply_mu_ as the row is published.
  std::atomic<int64_t> windows_waiting_since_ms_{0};

  // Held only to copy view_ in or out (ordered after apply_mu_).
  mutable Mutex view_mu_ ABSL_ACQUIRED_AFTER(apply_mu_);
  PublishedView view_ ABSL_GUARDED_BY(view_mu_);

  // The percentiles View filled last and what they came from: a client's
  // distribution changes at most every ClientTotals::kRefreshMs while a
  // dashboard or a CI gate may ask for the same set many times in between,
  // and the searches were a GetClients answer's largest single cost
  // (tests/bench/DAEMON.md, "GetClients' percentiles once per
  // distribution"). The same distribution and set give the same values.
  struct PercentileMemo {
    uint64_t distribution_version = 0;  // 0: none yet
    std::vector<double> percents;
    PercentileMethod method = PercentileMethod::kSbk;
    // Shared with the views that read them (never written once stored).
    std::shared_ptr<const LatencySnapshot> percentiles;
  };
  // View's percentiles of `totals`' distribution for `set`, from memo_ when
  // it holds them.
  std::shared_ptr<const LatencySnapshot> Percentiles(const ClientTotals::Snapshot& totals,
                                                     const PercentileSet& set) const;
  // Held only to compare or copy memo_ (never while searching).
  mutable Mutex memo_mu_;
  mutable PercentileMemo memo_ ABSL_GUARDED_BY(memo_mu_);

  mutable Mutex listeners_mu_;  // held while listeners run
  std::map<uint64_t, std::function<void()>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  uint64_t next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 1;

  mutable Mutex progress_mu_;
  Progress progress_ ABSL_GUARDED_BY(progress_mu_);
};

}  // namespace perld::ingest
