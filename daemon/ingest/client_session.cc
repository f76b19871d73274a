#include "daemon/ingest/client_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/mutex.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/run_total.h"
#include "daemon/ingest/refusals.h"

namespace perld::ingest {
namespace {

constexpr char kTookOver[] = "a newer stream of this client took over";

}  // namespace

const char* ClientModeName(ClientMode mode) {
  return mode == ClientMode::kRaw ? "MODE_RAW" : "MODE_WINDOWS";
}

ClientSession::ClientSession(std::string id, std::string name, std::string clock, ClientMode mode,
                             int index, const RunContext& run, Shared shared)
    : id_(std::move(id)),
      name_(std::move(name)),
      clock_(std::move(clock)),
      mode_(mode),
      index_(index),
      run_(run),
      shared_(std::move(shared)),
      totals_(shared_.budget) {
  MutexLock lock(apply_mu_);
  PublishViewLocked();  // a new client: nothing applied, its distribution empty
}

ClientSession::~ClientSession() = default;

uint64_t ClientSession::NewGeneration() {
  return generation_.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint64_t ClientSession::TakeOver() {
  uint64_t applied = 0;
  {
    // Waits for an in-flight message of the replaced stream.
    MutexLock lock(apply_mu_);
    applied = applied_;
  }
  // A message the replaced stream parked is its own to end: the notifier's
  // next retry answers it ABORTED (Retry), as does that stream's cancel.
  shared_.room->Poke();
  return applied;
}

void ClientSession::CancelParked(uint64_t generation) {
  OnApplied on_applied = DropParked(generation);
  if (!on_applied) return;  // nothing parked: a retry took it and answers it
  on_applied(
      Superseded(generation)
          ? Refuse(shared_.stats, Refusal::kSuperseded, absl::AbortedError(kTookOver))
          : absl::CancelledError("the stream was cancelled with a message waiting for room"));
}

void ClientSession::Detach(uint64_t generation) {
  DropParked(generation);
  FlushBreakdown();  // its stream is gone: nothing may come to merge them
}

void ClientSession::FlushBreakdown() {
  MutexLock lock(apply_mu_);
  if (!totals_.pending()) return;
  totals_.Flush(ClientTotals::NowUnixMs());
  PublishViewLocked();
}

OnApplied ClientSession::DropParked(uint64_t generation) {
  OnApplied on_applied;
  uint64_t token = 0;
  {
    MutexLock lock(apply_mu_);
    if (parked_ && parked_->generation == generation) {
      on_applied = std::move(parked_->on_applied);
      parked_.reset();
    }
    token = room_token_;
  }
  // Also when nothing is parked: a retry may be calling its on_applied now.
  if (token != 0) shared_.room->Remove(token);
  return on_applied;
}

absl::Status ClientSession::CheckOffer(uint64_t generation, uint64_t sequence, ClientMode mode,
                                       bool* duplicate) {
  *duplicate = false;
  if (mode != mode_) {
    return Refuse(shared_.stats, Refusal::kMalformed,
                  absl::InvalidArgumentError(mode_ == ClientMode::kWindows
                                                 ? "a MODE_WINDOWS client sent a TimestampBatch"
                                                 : "a MODE_RAW client sent a WindowReport"));
  }
  if (Superseded(generation)) {
    return Refuse(shared_.stats, Refusal::kSuperseded, absl::AbortedError(kTookOver));
  }
  if (sequence == 0) {
    return Refuse(
        shared_.stats, Refusal::kMalformed,
        absl::InvalidArgumentError(absl::StrCat(mode == ClientMode::kRaw ? "batch" : "window",
                                                ": sequence numbers start at 1")));
  }
  if (parked_) {
    return absl::FailedPreconditionError("a message of this client waits for room already");
  }
  if (sequence <= applied_) {
    ++duplicates_;
    PublishViewLocked();
    shared_.stats.duplicates.fetch_add(1, std::memory_order_relaxed);
    *duplicate = true;
    return absl::OkStatus();
  }
  if (closed_) {
    return Refuse(
        shared_.stats, Refusal::kMismatch,
        absl::FailedPreconditionError(absl::StrCat(
            "message ", sequence, " after this client closed its part after message ", applied_)));
  }
  if (sequence != applied_ + 1) {
    return Refuse(shared_.stats, Refusal::kSequenceGap,
                  absl::OutOfRangeError(
                      absl::StrCat("sequence gap: expected ", applied_ + 1, ", got ", sequence)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Offered> ClientSession::OfferWindow(uint64_t generation, uint64_t sequence,
                                                   WindowBuilder build, int64_t max_memory_bytes,
                                                   OnApplied on_applied) {
  return OfferMessage(
      generation, sequence, ClientMode::kWindows, max_memory_bytes, std::move(on_applied),
      [&](const config::DaemonConfig& config, Parked* p) -> absl::Status {
        absl::StatusOr<runs::RemoteWindow> w =
            build(run_.latency, config.ingest.max_pairs_per_report);
        if (!w.ok()) {
          return Refuse(shared_.stats, RefusalOf(w.status(), Refusal::kPairs), Final(w.status()));
        }
        p->pairs = static_cast<int64_t>(w->buckets.size());
        p->window = *std::move(w);
        return absl::OkStatus();
      });
}

absl::StatusOr<Offered> ClientSession::OfferBatch(uint64_t generation, uint64_t sequence,
                                                  BatchBuilder build, int64_t max_memory_bytes,
                                                  OnApplied on_applied) {
  return OfferMessage(
      generation, sequence, ClientMode::kRaw, max_memory_bytes, std::move(on_applied),
      [&](const config::DaemonConfig& config, Parked* p) -> absl::Status {
        // A merged batch's buffer: no allocation here, no free on the recorder.
        p->window.timestamps = run_.inbox->TakeTimestampBuffer();
        absl::StatusOr<int64_t> records = build(config.ingest.max_batch_length, &p->window);
        if (!records.ok()) {
          const absl::Status& s = records.status();
          return Refuse(shared_.stats, RefusalOf(s, Refusal::kBatchLength), Final(s));
        }
        p->records = *records;
        p->timestamps = static_cast<int64_t>(p->window.timestamps.size());
        p->window.raw = true;
        return absl::OkStatus();
      });
}

absl::StatusOr<Offered> ClientSession::OfferMessage(uint64_t generation, uint64_t sequence,
                                                    ClientMode mode, int64_t max_memory_bytes,
                                                    OnApplied on_applied, Decode decode) {
  MutexLock lock(apply_mu_);
  bool duplicate = false;
  if (absl::Status s = CheckOffer(generation, sequence, mode, &duplicate); !s.ok()) return s;
  if (duplicate) {
    Applied a = AppliedLocked();
    a.duplicate = true;
    lock.Unlock();
    Advanced(a);
    return Offered{false, a};
  }
  const std::shared_ptr<const config::DaemonConfig> config = shared_.config.Get();
  Parked p;
  if (absl::Status s = decode(*config, &p); !s.ok()) return s;
  p.sequence = sequence;
  p.generation = generation;
  p.on_applied = std::move(on_applied);
  absl::StatusOr<Offered> offered = Offer(std::move(p), max_memory_bytes, *config);
  if (offered.ok() && !offered->parked) {
    lock.Unlock();
    Advanced(offered->applied);
  }
  return offered;
}

absl::StatusOr<Offered> ClientSession::Offer(Parked p, int64_t max_memory_bytes,
                                             const config::DaemonConfig& config) {
  absl::StatusOr<RoomNotifier::Result> pushed = PushIfRoom(p, max_memory_bytes, config);
  if (!pushed.ok()) return pushed.status();
  if (*pushed == RoomNotifier::Result::kDone) return Offered{false, AppliedLocked()};
  // Backpressure: parked until the recorder has merged enough; the caller
  // reads no more of the stream meanwhile.
  if (*pushed == RoomNotifier::Result::kWaitOwnRoom) {
    shared_.stats.memory_waits.fetch_add(1, std::memory_order_relaxed);
  } else {
    shared_.stats.global_memory_waits.fetch_add(1, std::memory_order_relaxed);
  }
  parked_ = std::move(p);
  parked_limit_ = max_memory_bytes;

  // The notifier's first run of the retry waits for this lock.
  room_token_ = shared_.room->Add([this] { return Retry(); });
  return Offered{true, {}};
}

absl::StatusOr<RoomNotifier::Result> ClientSession::PushIfRoom(Parked& p, int64_t max_memory_bytes,
                                                               const config::DaemonConfig& config) {
  const int64_t bytes = p.window.bytes();
  // Larger than the limit itself: no wait can make room, a resend cannot
  // help (INVALID_ARGUMENT, final for the client).
  if (bytes > max_memory_bytes) {
    return Refuse(shared_.stats, Refusal::kClientMemory,
                  absl::InvalidArgumentError(
                      absl::StrCat("ingest.maxClientMemoryBytes: message ", p.sequence, " needs ",
                                   bytes, " bytes, the limit is ", max_memory_bytes)));
  }
  const int64_t max_total = config.ingest.max_memory_bytes;
  if (bytes > max_total) {
    return Refuse(shared_.stats, Refusal::kMemory,
                  absl::InvalidArgumentError(
                      absl::StrCat("ingest.maxMemoryBytes: message ", p.sequence, " needs ", bytes,
                                   " bytes, the limit for all clients is ", max_total)));
  }
  // seq_cst: the charges' releases and the notifier's registration are
  // ordered (RoomSignal). Two clients may pass the total check at once: it
  // is exceeded by at most one message each.
  if (charge_->load(std::memory_order_seq_cst) + bytes > max_memory_bytes) {
    return RoomNotifier::Result::kWaitOwnRoom;
  }
  if (shared_.stats.queued_window_bytes->load(std::memory_order_seq_cst) + bytes > max_total) {
    return RoomNotifier::Result::kWaitSharedRoom;
  }
  Push(p);
  return RoomNotifier::Result::kDone;
}

void ClientSession::Push(Parked& p) {
  runs::RemoteWindow& w = p.window;
  w.charge = charge_;
  w.total_charge = shared_.stats.queued_window_bytes;
  w.room = shared_.room;
  w.client = index_;
  w.sequence = p.sequence;
  // Counted in the breakdown only now: a refused or dropped message is
  // resent and must not count twice.
  if (w.raw) {
    totals_.AddBatch(p.timestamps, p.records, ClientTotals::NowUnixMs());
    shared_.stats.batches.fetch_add(1, std::memory_order_relaxed);
    shared_.stats.timestamps.fetch_add(static_cast<uint64_t>(p.timestamps),
                                       std::memory_order_relaxed);
  } else {
    // A response window counts the service window's records again: the
    // breakdown (service time) has them already.
    if (!w.response) totals_.AddWindow(w.counters, w.buckets, ClientTotals::NowUnixMs());
    shared_.stats.windows.fetch_add(1, std::memory_order_relaxed);
    shared_.stats.pairs.fetch_add(static_cast<uint64_t>(p.pairs), std::memory_order_relaxed);
  }
  run_.inbox->Push(std::move(w));
  applied_ = p.sequence;
  PublishViewLocked();
}

void ClientSession::PublishViewLocked() {
  // The row names the last sequence its totals hold: a row is one moment.
  if (!totals_.pending()) row_applied_ = applied_;
  windows_waiting_since_ms_.store(totals_.pending() ? totals_.pending_last_unix_ms() : 0,
                                  std::memory_order_relaxed);
  PublishedView v{row_applied_, duplicates_, totals_.Snap()};
  MutexLock lock(view_mu_);
  view_ = std::move(v);
}

RoomNotifier::Result ClientSession::Retry() {
  OnApplied on_applied;
  absl::StatusOr<Applied> outcome;
  {
    MutexLock lock(apply_mu_);
    // Dropped: its stream left or was cancelled.
    if (!parked_) return RoomNotifier::Result::kDone;
    if (Superseded(parked_->generation)) {
      // A newer stream took over: never applied, the client resends it.
      outcome = Refuse(shared_.stats, Refusal::kSuperseded, absl::AbortedError(kTookOver));
    } else {
      const std::shared_ptr<const config::DaemonConfig> config = shared_.config.Get();
      absl::StatusOr<RoomNotifier::Result> pushed = PushIfRoom(*parked_, parked_limit_, *config);
      if (pushed.ok() && *pushed != RoomNotifier::Result::kDone) return *pushed;  // not yet
      // An error: the limits shrank (a reload) below the message.
      outcome = pushed.ok() ? absl::StatusOr<Applied>(AppliedLocked())
                            : absl::StatusOr<Applied>(pushed.status());
    }
    on_applied = std::move(parked_->on_applied);
    parked_.reset();
  }
  if (outcome.ok()) Advanced(*outcome);
  on_applied(outcome);  // no lock held: it may end the stream (Detach)
  return RoomNotifier::Result::kDone;
}

absl::StatusOr<Applied> ClientSession::Close(uint64_t generation, uint64_t last_sequence) {
  MutexLock lock(apply_mu_);
  if (Superseded(generation)) {
    return Refuse(shared_.stats, Refusal::kSuperseded, absl::AbortedError(kTookOver));
  }
  if (last_sequence != applied_) {
    return Refuse(shared_.stats, Refusal::kSequenceGap,
                  absl::OutOfRangeError(absl::StrCat("close: last_sequence is ", last_sequence,
                                                     " but ", applied_, " is applied")));
  }
  closed_ = true;
  totals_.Flush(ClientTotals::NowUnixMs());  // the row holds every window from now on
  PublishViewLocked();
  return AppliedLocked();
}

Applied ClientSession::AppliedLocked() const {
  Applied a;
  a.acked_sequence = applied_;
  a.duplicates = duplicates_;
  return a;
}

void ClientSession::Advanced(const Applied& a) {
  {
    MutexLock lock(progress_mu_);
    // max: the stream's thread and the notifier's may publish out of order.
    progress_.applied = std::max(progress_.applied, a.acked_sequence);
    progress_.duplicates = std::max(progress_.duplicates, a.duplicates);
    if (!run_.checkpointed) progress_.durable = progress_.applied;
  }
  NotifyListeners();
}

Progress ClientSession::progress() const {
  MutexLock lock(progress_mu_);
  return progress_;
}

void ClientSession::SetProgress(const Progress& p) {
  MutexLock lock(progress_mu_);
  progress_ = p;
}

void ClientSession::MarkDurable(uint64_t applied, bool closed) {
  {
    MutexLock lock(progress_mu_);
    progress_.durable = std::max(progress_.durable, applied);
    progress_.close_durable |= closed;
  }
  NotifyListeners();
}

void ClientSession::MarkCloseDurable() { MarkDurable(0, true); }

uint64_t ClientSession::AddListener(std::function<void()> on_change) {
  MutexLock lock(listeners_mu_);
  const uint64_t token = next_listener_++;
  listeners_.emplace(token, std::move(on_change));
  return token;
}

void ClientSession::RemoveListener(uint64_t token) {
  MutexLock lock(listeners_mu_);  // waits for a call in progress
  listeners_.erase(token);
}

void ClientSession::NotifyListeners() const {
  MutexLock lock(listeners_mu_);
  for (const auto& [token, on_change] : listeners_) on_change();
}

uint64_t ClientSession::applied() const {
  MutexLock lock(apply_mu_);
  return applied_;
}

void ClientSession::SetApplied(uint64_t applied) {
  MutexLock lock(apply_mu_);
  applied_ = applied;
  PublishViewLocked();
}

ClientView ClientSession::View(const PercentileSet& set) const {
  ClientView v;
  v.id = id_;
  v.name = name_;
  v.clock = clock_;
  v.mode = mode_;
  PublishedView published;
  {
    MutexLock lock(view_mu_);
    published = view_;
  }
  v.acked_sequence = published.acked_sequence;
  v.duplicates = published.duplicates;
  const ClientTotals::Snapshot& t = published.totals;
  v.reports = t.reports;
  v.timestamps = t.timestamps;
  v.counters = t.counters;
  v.exact = t.distribution != nullptr;
  v.last_report_unix_ms = t.last_report_unix_ms;
  if (v.exact) v.percentiles = Percentiles(t, set);
  return v;
}

std::shared_ptr<const LatencySnapshot> ClientSession::Percentiles(
    const ClientTotals::Snapshot& totals, const PercentileSet& set) const {
  {
    MutexLock lock(memo_mu_);
    if (memo_.distribution_version == totals.distribution_version && memo_.method == set.method() &&
        memo_.percents == set.percents()) {
      return memo_.percentiles;
    }
  }
  auto filled = std::make_shared<LatencySnapshot>();
  totals.distribution->Fill(set, filled.get());  // no lock held
  MutexLock lock(memo_mu_);
  // A concurrent View may have stored a newer distribution's: keep the newest.
  if (totals.distribution_version >= memo_.distribution_version) {
    memo_.distribution_version = totals.distribution_version;
    memo_.percents = set.percents();
    memo_.method = set.method();
    memo_.percentiles = filled;
  }
  return filled;
}

}  // namespace perld::ingest
