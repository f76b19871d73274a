#include "daemon/tiers/upstream_forwarder.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/lib/wire_encoder.h"
#include "daemon/common/failpoint.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/core/contract.h"
#include "daemon/service/run_proto.h"

namespace perld::tiers {
namespace {

// Stored messages read back from the state database at a time.
constexpr size_t kReloadBatch = 64;
// Messages one lane hands over before the other lanes get their turn.
constexpr int kTurn = 32;
// A failed read of the state database is retried after this.
constexpr auto kRetryRead = std::chrono::milliseconds(200);

v1::IngestOpen OpenFor(const runs::RunInfo& info, const std::string& node_id) {
  v1::IngestOpen open;
  open.set_run_name(info.spec.name);
  open.mutable_labels()->insert(info.spec.labels.begin(), info.spec.labels.end());
  open.set_time_unit(service::ToProto(info.spec.latency.time_unit));
  open.set_min_latency(info.spec.latency.min_latency);
  open.set_max_latency(info.spec.latency.max_latency);
  for (double p : info.spec.latency.percentiles) open.add_percentiles(p);
  open.set_reporting_interval_ms(
      std::clamp<int64_t>(info.spec.reporting_interval_ms, 10, 86'400'000));
  open.set_client_id(absl::StrCat(node_id, "/", info.id));
  open.set_client_name(absl::StrCat("perld ", node_id, " run ", info.id));
  open.set_mode(v1::IngestOpen::MODE_WINDOWS);
  if (info.response_run != 0) {
    // A rate-controlled run: the parent's run keeps a response view too.
    open.set_target_rate(info.spec.target_rate);
    open.set_late_threshold_ns(info.spec.late_threshold_ns);
  }
  return open;
}

}  // namespace

UpstreamForwarder::UpstreamForwarder(config::UpstreamConfig config,
                                     std::shared_ptr<grpc::Channel> channel,
                                     state::StateStore* store,
                                     std::function<bool(runs::RunId)> checkpointed)
    : UpstreamForwarder(std::move(config), GrpcParentStreams(std::move(channel)), store,
                        std::move(checkpointed)) {}

UpstreamForwarder::UpstreamForwarder(config::UpstreamConfig config, ParentStreamFactory streams,
                                     state::StateStore* store,
                                     std::function<bool(runs::RunId)> checkpointed)
    : config_(std::move(config)),
      streams_(std::move(streams)),
      node_id_(config_.node_id.empty() ? "perld" : config_.node_id),
      store_(store),
      checkpointed_(std::move(checkpointed)),
      worker_([this] { Work(); }) {
  log::Info("upstream: forwarding every run's windows to ", config_.target, " as '", node_id_, "'");
}

UpstreamForwarder::~UpstreamForwarder() { Stop(); }

void UpstreamForwarder::Restore(const std::vector<state::UpstreamBacklog>& backlog) {
  MutexLock lock(mu_);
  for (const state::UpstreamBacklog& b : backlog) restored_[b.run] = b;
}

void UpstreamForwarder::DeliverRestored(
    const std::function<std::optional<runs::RunInfo>(runs::RunId)>& info) {
  MutexLock lock(mu_);
  for (const auto& [id, backlog] : restored_) {
    const uint64_t stored = backlog.next_sequence - backlog.first_sequence;
    std::optional<runs::RunInfo> run = info(id);
    if (!run) {
      log::Error("upstream: run ", id, ": ", stored,
                 " stored window message(s) not forwarded: the run is no longer in the history");
      if (store_ != nullptr) store_->EndUpstream(id);
      continue;
    }
    log::Info("upstream: run ", id, " '", run->spec.name,
              "' ended before perld stopped: resending ", stored, " stored window message(s) to ",
              config_.target);
    Lane& lane = StartRestoredLocked(*std::move(run), backlog);
    lane.ended = true;
  }
  restored_.clear();
}

UpstreamForwarder::Lane& UpstreamForwarder::StartRestoredLocked(
    runs::RunInfo info, const state::UpstreamBacklog& backlog) {
  const runs::RunId id = info.id;
  Lane& lane = lanes_[id];
  lane.info = std::move(info);
  lane.first_sequence = backlog.first_sequence;
  lane.decided = true;
  lane.gated = true;
  lane.next_sequence = backlog.next_sequence;
  lane.committed_next = backlog.next_sequence;
  // The stored messages come first, read back in turn.
  if (backlog.first_sequence < backlog.next_sequence) lane.stored_from = backlog.first_sequence;
  restored_count_.fetch_add(1, std::memory_order_relaxed);
  ReadyLocked(id);
  return lane;
}

void UpstreamForwarder::OnRunStarted(const runs::RunInfo& info) {
  if (info.service_run != 0) return;  // a response view: its run's stream carries it
  MutexLock lock(mu_);
  if (stopping_) return;
  if (auto r = restored_.find(info.id); r != restored_.end()) {
    // A run resumed after a crash: its stream continues where the state
    // database says, beginning with the stored messages.
    log::Info("upstream: run ", info.id, " '", info.spec.name, "' resumed: its stream to ",
              config_.target, " continues at message ", r->second.first_sequence);
    StartRestoredLocked(info, r->second);
    restored_.erase(r);
    return;
  }
  auto [it, added] = lanes_.try_emplace(info.id);
  if (!added) return;  // already forwarded
  it->second.info = info;
  ReadyLocked(info.id);  // the worker opens the stream
}

void UpstreamForwarder::OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) {
  if (window.kind != runs::WindowRecord::Kind::kPeriodic) return;
  // A response view's windows go on its run's stream as response windows
  // (published before the run's windows of the same instant, so the run's
  // checkpoint at that instant takes them too).
  const bool response = info.service_run != 0;
  const runs::RunId id = response ? info.service_run : info.id;
  bool gated = false;
  uint64_t first = 0;
  {
    MutexLock lock(mu_);
    auto it = lanes_.find(id);
    if (stopping_ || it == lanes_.end()) return;  // a run restored from the history
    Lane& lane = it->second;
    if (!lane.decided) {
      lane.decided = true;
      lane.gated = store_ != nullptr && checkpointed_ && checkpointed_(id);
    }
    gated = lane.gated;
    if (!gated && !RoomLocked(lane, 1)) {
      windows_dropped_.fetch_add(1, std::memory_order_relaxed);
      log::Error("upstream: run ", info.id, " '", info.spec.name, "': window ", window.seq,
                 " dropped, upstream.maxQueuedWindows (", config_.max_queued_windows,
                 ") windows are waiting for ", config_.target, ", ", lane.queue.size(),
                 " of them this run's");
      return;
    }
    first = lane.next_sequence;
  }
  // Encoded outside the lock: only this (the dispatcher) thread moves a
  // lane's next_sequence once it started.
  // The window's start as the parent reads it: the span its records cover
  // (its rate seconds, window_rate.h), so the parent rates it as this perld
  // did -- a short window holding clients' longer windows is no spike there.
  const int64_t span_start =
      window.end_unix_ms - std::max<int64_t>(1, std::llround(window.RateSeconds() * 1000));
  std::vector<v1::WindowReport> parts =
      client::EncodeWindowParts(window.snapshot, window.distribution, config_.max_pairs_per_report,
                                first, span_start, window.end_unix_ms);
  std::vector<Message> messages;
  messages.reserve(parts.size());
  for (v1::WindowReport& part : parts) {
    const uint64_t sequence = part.sequence();
    if (response) {
      part.set_response(true);
      // The schedule once, on the window's last part.
      if (&part == &parts.back()) service::ToProto(window.schedule, part.mutable_schedule());
    }
    v1::IngestRequest request;
    *request.mutable_window() = std::move(part);
    messages.push_back(Message{sequence, request.SerializeAsString()});
  }
  MutexLock lock(mu_);
  auto it = lanes_.find(id);
  if (it == lanes_.end()) return;  // given up at the stop deadline
  Lane& lane = it->second;
  lane.next_sequence = first + messages.size();
  if (gated) {
    lane.untaken.insert(lane.untaken.end(), std::make_move_iterator(messages.begin()),
                        std::make_move_iterator(messages.end()));
  } else {
    QueueMessagesLocked(id, lane, std::move(messages));
  }
}

void UpstreamForwarder::TakeForCheckpoint(runs::RunId id, state::Checkpoint* checkpoint) {
  MutexLock lock(mu_);
  auto it = lanes_.find(id);
  if (it == lanes_.end() || !it->second.gated) return;
  Lane& lane = it->second;
  checkpoint->upstream.insert(checkpoint->upstream.end(), lane.untaken.begin(), lane.untaken.end());
  checkpoint->upstream_next_sequence = lane.next_sequence;
  lane.uncommitted.insert(lane.uncommitted.end(), std::make_move_iterator(lane.untaken.begin()),
                          std::make_move_iterator(lane.untaken.end()));
  lane.untaken.clear();
}

void UpstreamForwarder::Committed(runs::RunId id, uint64_t next_sequence) {
  // The messages are in the state database, none of them sent yet.
  PERLD_FAILPOINT_HIT("upstream-stored-before-send");
  MutexLock lock(mu_);
  auto it = lanes_.find(id);
  if (it == lanes_.end()) return;
  Lane& lane = it->second;
  lane.committed_next = std::max(lane.committed_next, next_sequence);
  std::vector<Message> ready;
  while (!lane.uncommitted.empty() && lane.uncommitted.front().sequence < next_sequence) {
    ready.push_back(std::move(lane.uncommitted.front()));
    lane.uncommitted.pop_front();
  }
  if (!ready.empty() && lane.stored_from == 0 && !RoomLocked(lane, ready.size())) {
    // No room (the parent is slow or down): from here on the run's messages
    // are read back from the state database when its queue is empty.
    lane.stored_from = ready.front().sequence;
    log::Warning("upstream: run ", id, ": upstream.maxQueuedWindows (", config_.max_queued_windows,
                 ") messages wait for ", config_.target, ": from message ", lane.stored_from,
                 " on they wait in the state database and are read back in turn");
  }
  if (!ready.empty() && lane.stored_from == 0) {
    QueueMessagesLocked(id, lane, std::move(ready));
  } else {
    ReadyLocked(id);  // stored messages to read back, or the close may be due
  }
}

void UpstreamForwarder::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord&) {
  MutexLock lock(mu_);
  auto it = lanes_.find(info.id);
  if (it == lanes_.end()) return;
  Lane& lane = it->second;
  lane.ended = true;
  // RunHistory::OnRunEnded (an earlier observer) took the run's last
  // messages with its final total (UpstreamJournal).
  PERLD_CONTRACT(lane.untaken.empty(),
                 "a forwarded run ended with messages no store transaction took");
  ReadyLocked(info.id);
}

bool UpstreamForwarder::RoomLocked(const Lane& lane, size_t k) const {
  const int64_t budget = config_.max_queued_windows;
  const int64_t share =
      std::max<int64_t>(1, budget / std::max<int64_t>(1, static_cast<int64_t>(lanes_.size())));
  const auto more = static_cast<int64_t>(k);
  return queued_ + more <= budget || static_cast<int64_t>(lane.queue.size()) + more <= share;
}

void UpstreamForwarder::QueueMessagesLocked(runs::RunId id, Lane& lane,
                                            std::vector<Message> messages) {
  queued_ += static_cast<int64_t>(messages.size());
  lane.queue.insert(lane.queue.end(), std::make_move_iterator(messages.begin()),
                    std::make_move_iterator(messages.end()));
  ReadyLocked(id);
}

void UpstreamForwarder::ReadyLocked(runs::RunId id) {
  ready_.insert(id);
  cv_.NotifyOne();
}

void UpstreamForwarder::Wake(runs::RunId id) {
  MutexLock lock(mu_);
  if (lanes_.contains(id)) ReadyLocked(id);
}

void UpstreamForwarder::Stop() {
  // Everything below, the parent included, gets until here.
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(config_.close_timeout_ms);
  {
    MutexLock lock(mu_);
    if (stop_called_) return;
    stop_called_ = true;
  }
  // The runs have ended: let their last messages commit (and so be queued).
  if (store_ != nullptr) {
    if (absl::Status s = store_->Flush(); !s.ok()) {
      log::Error("state: not everything was stored: ", s.message());
    }
  }
  {
    MutexLock lock(mu_);
    stopping_ = true;
    stop_deadline_ = deadline;
    cv_.NotifyOne();
  }
  if (worker_.joinable()) worker_.join();
}

void UpstreamForwarder::Work() {
  MutexLock lock(mu_);
  Deferred deferred;
  const auto close_timeout = std::chrono::milliseconds(config_.close_timeout_ms);
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (stopping_ && (lanes_.empty() || now >= stop_deadline_)) break;
    // The only deadlines: the stop, ungated closes, retried reads.
    Clock::time_point wake = stopping_ ? stop_deadline_ : kNever;
    for (const auto& [id, lane] : lanes_) {
      Clock::time_point at = lane.retry_at;
      if (lane.close_asked && !lane.gated) at = std::min(at, lane.closing_since + close_timeout);
      if (at <= now) {
        ready_.insert(id);
      } else {
        wake = std::min(wake, at);
      }
    }
    if (ready_.empty()) {
      if (wake == kNever) {
        cv_.Wait(mu_);
      } else {
        cv_.WaitUntil(mu_, wake);
      }
      continue;
    }
    // One turn: every lane with work, once, in id order; what a lane could
    // not finish in its turn (or what arrives meanwhile) is the next turn's.
    std::set<runs::RunId> turn;
    turn.swap(ready_);
    for (runs::RunId id : turn) Serve(id, deferred);
    lock.Unlock();
    RunDeferred(deferred);
    lock.Lock();
  }
  // Stopped: every lane finished, or the deadline passed. What is left is
  // given up on (a gated run's messages stay in the state database).
  for (auto& [id, lane] : lanes_) FinishLocked(id, lane, /*give_up=*/true, deferred);
  lanes_.clear();
  ready_.clear();
  queued_ = 0;
  lock.Unlock();
  RunDeferred(deferred);
}

void UpstreamForwarder::Serve(runs::RunId id, Deferred& deferred) {
  auto it = lanes_.find(id);
  if (it == lanes_.end()) return;
  Lane& lane = it->second;  // stays valid: only this thread erases lanes
  if (lane.retry_at <= Clock::now()) lane.retry_at = kNever;
  if (lane.stream == nullptr) {
    v1::IngestOpen open = OpenFor(lane.info, node_id_);
    const uint64_t first = lane.first_sequence;
    // A restored stream's stored messages exist up to here: the parent may
    // hold them (the process before the crash sent them once committed).
    const uint64_t held = lane.committed_next - 1;
    mu_.Unlock();
    std::unique_ptr<ParentStream> stream =
        streams_(std::move(open), first, held, [this, id] { Wake(id); });
    mu_.Lock();
    lane.stream = std::move(stream);
    lane.released = first - 1;
    runs_.fetch_add(1, std::memory_order_relaxed);
  }
  ParentStream& stream = *lane.stream;
  if (lane.gated && store_ != nullptr) {
    ReleaseLocked(id, lane, stream.progress().durable, stream.next_sequence() - 1, deferred);
  }
  HandOver(id, lane);
  if (lane.queue.empty() && lane.stored_from != 0) Reload(id, lane);
  if (lane.broken && lane.ended && lane.untaken.empty() && lane.uncommitted.empty()) {
    // Never closed (HandOver): cancelled, as at a stop's deadline.
    FinishLocked(id, lane, /*give_up=*/true, deferred);
    lanes_.erase(it);
    return;
  }
  const Clock::time_point now = Clock::now();
  if (lane.ended && !lane.close_asked && lane.untaken.empty() && lane.uncommitted.empty() &&
      lane.queue.empty() && lane.stored_from == 0) {
    stream.RequestClose();  // its `wake` tells when the parent acknowledged
    lane.close_asked = true;
    lane.closing_since = now;
  }
  if (!lane.close_asked) return;
  const ParentStream::Progress p = stream.progress();
  // A gated stream keeps trying until perld stops or a final error: its
  // messages are safe in the state database meanwhile.
  if (p.closed || !p.error.empty() ||
      (!lane.gated &&
       now - lane.closing_since >= std::chrono::milliseconds(config_.close_timeout_ms))) {
    FinishLocked(id, lane, /*give_up=*/false, deferred);
    lanes_.erase(it);
  }
}

void UpstreamForwarder::HandOver(runs::RunId id, Lane& lane) {
  if (lane.refused) {
    DropRefusedLocked(lane);
    return;
  }
  ParentStream& stream = *lane.stream;
  for (int n = 0; n < kTurn; ++n) {
    if (lane.queue.empty() || !stream.HasRoom()) return;  // `wake` comes with room
    Message m = std::move(lane.queue.front());
    lane.queue.pop_front();
    --queued_;
    // Parsed and offered without the lock (the observers queue meanwhile).
    mu_.Unlock();
    std::string why;
    ParentStream::Offer offer = ParentStream::Offer::kFailed;
    v1::IngestRequest message;
    if (m.sequence != stream.next_sequence()) {
      why = absl::StrCat("the stream expects message ", stream.next_sequence());
    } else if (!message.ParseFromString(m.bytes)) {
      why = "it does not parse";
    } else {
      offer = stream.TryEnqueue(&message);
    }
    mu_.Lock();
    if (offer == ParentStream::Offer::kQueued) {
      windows_sent_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (offer == ParentStream::Offer::kFull && why.empty()) {  // HasRoom said otherwise: retry
      lane.queue.push_front(std::move(m));
      ++queued_;
      return;
    }
    if (!why.empty()) {
      // Ours, not the parent's: the message cannot follow the stream in
      // order. Closing the stream would end the parent's run short while
      // it looks finished; left unclosed, the parent sees this client
      // vanish and ends its run failed, naming it -- or, gated, this
      // perld's next start resends the stored messages in order.
      lane.broken = true;
      const uint64_t sequence = m.sequence;
      lane.queue.push_front(std::move(m));
      ++queued_;
      const bool kept = lane.gated && store_ != nullptr;
      if (kept) {
        // Committed, so stored: from the first one not handed over on, the
        // lane's messages stay in the state database (Reload leaves them).
        lane.stored_from = lane.queue.front().sequence;
        queued_ -= static_cast<int64_t>(lane.queue.size());
        lane.queue.clear();
      } else {
        lane.refused = true;  // this message and the later ones are dropped
        DropRefusedLocked(lane);
      }
      log::Error("upstream: run ", id, ": message ", sequence, " cannot follow its stream to ",
                 config_.target, " (", why, "): nothing more is forwarded and the stream is not ",
                 "closed, so the parent's run ends failed rather than short",
                 kept ? "; the messages stay in the state database and are resent when perld "
                        "starts again"
                      : "");
      return;
    }
    {
      const ParentStream::Progress p = stream.progress();
      why = !p.error.empty()        ? p.error
            : !p.last_error.empty() ? p.last_error
                                    : "the parent refused the stream";
    }
    // Never sent in order now: this message and the run's later ones are
    // lost to the parent (a gated run's are deleted when its stream closes).
    lane.refused = true;
    windows_dropped_.fetch_add(1, std::memory_order_relaxed);
    log::Error("upstream: run ", id, ": message ", m.sequence,
               " and the run's later ones not forwarded: ", why);
    DropRefusedLocked(lane);
    return;
  }
  if (!lane.queue.empty()) ReadyLocked(id);  // the rest after the other lanes
}

void UpstreamForwarder::Reload(runs::RunId id, Lane& lane) {
  if (lane.refused) {
    DropRefusedLocked(lane);
    return;
  }
  if (lane.broken) return;  // its messages stay stored for the next start
  if (lane.retry_at != kNever || !lane.stream->HasRoom()) return;  // its retry, or `wake`
  PERLD_CONTRACT(store_ != nullptr, "a lane with stored messages and no state store");
  const uint64_t from = lane.stored_from;
  mu_.Unlock();
  absl::StatusOr<std::vector<Message>> messages =
      store_->LoadUpstreamMessages(id, from, kReloadBatch);
  mu_.Lock();
  if (!messages.ok()) {
    log::Error("upstream: run ", id, ": reading its stored window messages from ", from,
               " failed: ", messages.status().message(), " (retried in ",
               absl::FormatDuration(absl::FromChrono(kRetryRead)), ")");
    lane.retry_at = Clock::now() + kRetryRead;
    return;
  }
  // Only what Committed told of: the store's writer commits a checkpoint's
  // messages before it calls Committed, and those come from `uncommitted`
  // then -- read here too, they would go to the stream twice (a gap).
  std::erase_if(*messages, [&](const Message& m) { return m.sequence >= lane.committed_next; });
  if (messages->empty()) {
    // Committed but not there (the database was changed behind perld's
    // back): the stream cannot continue in order; HandOver reports the gap.
    log::Error("upstream: run ", id, ": stored window messages ", lane.stored_from, "..",
               lane.committed_next - 1, " are missing from the state database");
    lane.stored_from = lane.committed_next;
  } else {
    lane.stored_from = messages->back().sequence + 1;
    queued_ += static_cast<int64_t>(messages->size());
    lane.queue.insert(lane.queue.end(), std::make_move_iterator(messages->begin()),
                      std::make_move_iterator(messages->end()));
  }
  // Caught up: the next committed messages queue as usual.
  if (lane.stored_from >= lane.committed_next) lane.stored_from = 0;
  ReadyLocked(id);
}

void UpstreamForwarder::ReleaseLocked(runs::RunId id, Lane& lane, uint64_t durable, uint64_t handed,
                                      Deferred& deferred) {
  // Never a message not handed over yet: a resumed stream's parent may hold
  // messages the stream has yet to read back (the process before the crash
  // sent them); the stream, which cannot skip a sequence, resends them (the
  // parent drops them as duplicates), and deleting them first would leave
  // the read-back a gap it cannot cross.
  const uint64_t through = std::min(durable, handed);
  if (through <= lane.released) return;
  deferred.release.emplace_back(id, through);
  lane.released = through;
}

void UpstreamForwarder::DropRefusedLocked(Lane& lane) {
  uint64_t dropped = lane.queue.size();
  if (lane.stored_from != 0) dropped += lane.committed_next - lane.stored_from;
  windows_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  queued_ -= static_cast<int64_t>(lane.queue.size());
  lane.queue.clear();
  lane.stored_from = 0;
}

void UpstreamForwarder::FinishLocked(runs::RunId id, Lane& lane, bool give_up, Deferred& deferred) {
  ParentStream::Progress p;
  uint64_t handed = lane.first_sequence - 1;
  if (lane.stream != nullptr) {
    p = lane.stream->progress();
    handed = lane.stream->next_sequence() - 1;
    deferred.streams.push_back(std::move(lane.stream));
  }
  closed_acked_.fetch_add(p.acked, std::memory_order_relaxed);
  const bool keep = lane.gated && store_ != nullptr;
  if (!give_up && (p.closed || !p.error.empty())) {
    // Delivered, or refused for good (a resend could not change that).
    if (keep) deferred.end.push_back(id);
    if (p.closed) return;
    DropRefusedLocked(lane);
    log::Error("upstream: run ", id, ": ", handed - std::min(p.acked, handed),
               " window message(s) not acknowledged by ", config_.target, " (", p.error, ")");
    return;
  }
  uint64_t unacked = handed - std::min(p.acked, handed) + lane.queue.size();
  if (lane.stored_from != 0) unacked += lane.committed_next - lane.stored_from;
  const std::string why = lane.broken             ? std::string("not in order: see above")
                          : !p.error.empty()      ? p.error
                          : !p.last_error.empty() ? p.last_error
                                                  : std::string("timed out");
  queued_ -= static_cast<int64_t>(lane.queue.size());
  if (keep) {
    ReleaseLocked(id, lane, p.durable, handed, deferred);
    lane.queue.clear();  // stored: read back at the next start
    log::Error("upstream: run ", id, ": ", unacked, " window message(s) not yet acknowledged by ",
               config_.target, " (", why,
               "): kept in the state database, resent when perld starts again");
    return;
  }
  windows_dropped_.fetch_add(lane.queue.size(), std::memory_order_relaxed);  // never handed over
  lane.queue.clear();
  log::Error("upstream: run ", id, ": ", unacked, " window message(s) not acknowledged by ",
             config_.target, " (", why, ")");
}

void UpstreamForwarder::RunDeferred(Deferred& deferred) {
  for (const auto& [id, through] : deferred.release) store_->ReleaseUpstream(id, through);
  for (runs::RunId id : deferred.end) store_->EndUpstream(id);
  deferred.release.clear();
  deferred.end.clear();
  // Cancels them; their threads may be in `wake`, which takes mu_ (not held).
  deferred.streams.clear();
}

UpstreamForwarder::Counters UpstreamForwarder::counters() const {
  Counters out;
  out.runs = runs_.load(std::memory_order_relaxed);
  out.windows_sent = windows_sent_.load(std::memory_order_relaxed);
  out.windows_dropped = windows_dropped_.load(std::memory_order_relaxed);
  out.restored = restored_count_.load(std::memory_order_relaxed);
  MutexLock lock(mu_);
  out.queued = static_cast<uint64_t>(std::max<int64_t>(0, queued_));
  out.messages_acked = closed_acked_.load(std::memory_order_relaxed);
  for (const auto& [id, lane] : lanes_) {
    if (lane.stream == nullptr) continue;
    ++out.open_streams;
    out.messages_acked += lane.stream->progress().acked;
  }
  return out;
}

}  // namespace perld::tiers
