#include "daemon/tiers/upstream_forwarder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/lib/wire_encoder.h"
#include "daemon/common/failpoint.h"
#include "daemon/core/contract.h"
#include "daemon/log/log.h"
#include "daemon/service/run_proto.h"

namespace perld::tiers {
namespace {

// Unacknowledged messages one stream may hold before the worker waits.
constexpr int64_t kMaxUnackedPerStream = 256;
// Windows one stream keeps until the root reports them durable.
constexpr int64_t kMaxUndurableBytesPerStream = int64_t{256} << 20;
// Stored messages read back from the state database at a time.
constexpr size_t kReloadBatch = 64;
// How often the worker deletes from the state store what parents made
// durable and looks after closing streams.
constexpr auto kTendEvery = std::chrono::milliseconds(100);

}  // namespace

UpstreamForwarder::UpstreamForwarder(config::UpstreamConfig config,
                                     std::shared_ptr<grpc::Channel> channel,
                                     state::StateStore* store,
                                     std::function<bool(runs::RunId)> checkpointed)
    : config_(std::move(config)),
      channel_(std::move(channel)),
      node_id_(config_.node_id.empty() ? "perld" : config_.node_id),
      store_(store),
      checkpointed_(std::move(checkpointed)),
      worker_([this] { Work(); }) {
  log::Info("upstream: forwarding every run's windows to ", config_.target, " as '", node_id_, "'");
}

UpstreamForwarder::~UpstreamForwarder() { Stop(); }

void UpstreamForwarder::Restore(const std::vector<state::UpstreamBacklog>& backlog) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const state::UpstreamBacklog& b : backlog) restored_[b.run] = b;
}

void UpstreamForwarder::DeliverRestored(
    const std::function<std::optional<runs::RunInfo>(runs::RunId)>& info) {
  std::lock_guard<std::mutex> lock(mu_);
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
    Stream& s = StartRestoredLocked(*std::move(run), backlog);
    s.ended = true;
    MaybeEndLocked(id);
  }
  restored_.clear();
}

UpstreamForwarder::Stream& UpstreamForwarder::StartRestoredLocked(
    runs::RunInfo info, const state::UpstreamBacklog& backlog) {
  const runs::RunId id = info.id;
  Stream& s = streams_[id];
  s.decided = true;
  s.gated = true;
  s.next_sequence = backlog.next_sequence;
  s.committed_next = backlog.next_sequence;
  Task start;
  start.kind = Task::Kind::kStart;
  start.info = std::move(info);
  start.run_id = id;
  start.first_sequence = backlog.first_sequence;
  QueueLocked(std::move(start));
  if (backlog.first_sequence < backlog.next_sequence) {
    s.stored_from = backlog.first_sequence;
    QueueReloadLocked(id);
  }
  restored_count_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

void UpstreamForwarder::OnRunStarted(const runs::RunInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
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
  streams_[info.id] = Stream();
  Task start;
  start.kind = Task::Kind::kStart;
  start.info = info;
  start.run_id = info.id;
  QueueLocked(std::move(start));
}

void UpstreamForwarder::OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) {
  if (window.kind != runs::WindowRecord::Kind::kPeriodic) return;
  bool gated = false;
  uint64_t first = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(info.id);
    if (stopping_ || it == streams_.end()) return;  // a run restored from the history
    Stream& s = it->second;
    if (!s.decided) {
      s.decided = true;
      s.gated = store_ != nullptr && checkpointed_ && checkpointed_(info.id);
    }
    gated = s.gated;
    if (!gated && queued_windows_.load(std::memory_order_relaxed) >= config_.max_queued_windows) {
      windows_dropped_.fetch_add(1, std::memory_order_relaxed);
      log::Error("upstream: run ", info.id, " '", info.spec.name, "': window ", window.seq,
                 " dropped, upstream.maxQueuedWindows (", config_.max_queued_windows,
                 ") windows are waiting for ", config_.target);
      return;
    }
    first = s.next_sequence;
  }
  // Encoded outside the lock: only this (the dispatcher) thread moves a
  // stream's next_sequence once it started.
  std::vector<v1::WindowReport> parts =
      client::EncodeWindowParts(window.snapshot, window.distribution, config_.max_pairs_per_report,
                                first, window.start_unix_ms, window.end_unix_ms);
  std::vector<Message> messages;
  messages.reserve(parts.size());
  for (v1::WindowReport& part : parts) {
    const uint64_t sequence = part.sequence();
    v1::IngestRequest request;
    *request.mutable_window() = std::move(part);
    messages.push_back(Message{sequence, request.SerializeAsString()});
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(info.id);
  if (it == streams_.end()) return;
  it->second.next_sequence = first + messages.size();
  if (gated) {
    std::vector<Message>& untaken = it->second.untaken;
    untaken.insert(untaken.end(), std::make_move_iterator(messages.begin()),
                   std::make_move_iterator(messages.end()));
  } else {
    QueueMessagesLocked(info.id, std::move(messages), false);
  }
}

void UpstreamForwarder::TakeForCheckpoint(runs::RunId id, state::Checkpoint* checkpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end() || !it->second.gated) return;
  Stream& s = it->second;
  checkpoint->upstream.insert(checkpoint->upstream.end(), s.untaken.begin(), s.untaken.end());
  checkpoint->upstream_next_sequence = s.next_sequence;
  s.uncommitted.insert(s.uncommitted.end(), std::make_move_iterator(s.untaken.begin()),
                       std::make_move_iterator(s.untaken.end()));
  s.untaken.clear();
}

void UpstreamForwarder::Committed(runs::RunId id, uint64_t next_sequence) {
  // The messages are in the state database, none of them sent yet.
  PERLD_FAILPOINT_HIT("upstream-stored-before-send");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = it->second;
  s.committed_next = std::max(s.committed_next, next_sequence);
  std::vector<Message> ready;
  while (!s.uncommitted.empty() && s.uncommitted.front().sequence < next_sequence) {
    ready.push_back(std::move(s.uncommitted.front()));
    s.uncommitted.pop_front();
  }
  if (!ready.empty()) {
    if (s.stored_from == 0 &&
        queued_windows_.load(std::memory_order_relaxed) + static_cast<int64_t>(ready.size()) >
            config_.max_queued_windows) {
      // The queue is full (the parent is slow or down): from here on the
      // run's messages are read back from the state database in turn.
      s.stored_from = ready.front().sequence;
      QueueReloadLocked(id);
      log::Warning("upstream: run ", id, ": upstream.maxQueuedWindows (",
                   config_.max_queued_windows, ") messages wait for ", config_.target,
                   ": from message ", s.stored_from,
                   " on they wait in the state database and are read back in turn");
    }
    if (s.stored_from == 0) QueueMessagesLocked(id, std::move(ready), true);
  }
  MaybeEndLocked(id);
}

void UpstreamForwarder::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord&) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(info.id);
  if (it == streams_.end()) return;
  Stream& s = it->second;
  s.ended = true;
  // RunHistory::OnRunEnded (an earlier observer) took the run's last
  // messages with its final total (UpstreamJournal).
  PERLD_CONTRACT(s.untaken.empty(),
                 "a forwarded run ended with messages no store transaction took");
  MaybeEndLocked(info.id);
}

void UpstreamForwarder::MaybeEndLocked(runs::RunId id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  const Stream& s = it->second;
  if (!s.ended || !s.untaken.empty() || !s.uncommitted.empty() || s.stored_from != 0) return;
  streams_.erase(it);
  QueueEndLocked(id);
}

void UpstreamForwarder::Reload(runs::RunId id) {
  uint64_t from = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(id);
    if (it == streams_.end() || it->second.stored_from == 0) return;
    if (stopping_ && std::chrono::steady_clock::now() >= give_up_at_) return;  // stays stored
    from = it->second.stored_from;
  }
  absl::StatusOr<std::vector<Message>> messages =
      store_->LoadUpstreamMessages(id, from, kReloadBatch);
  if (!messages.ok()) {
    log::Error("upstream: run ", id, ": reading its stored window messages from ", from,
               " failed: ", messages.status().message(), " (retried in ",
               absl::FormatDuration(absl::FromChrono(kTendEvery)), ")");
    std::this_thread::sleep_for(kTendEvery);
    std::lock_guard<std::mutex> lock(mu_);
    QueueReloadLocked(id);
    return;
  }
  if (!messages->empty()) Send(id, *messages, true);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = it->second;
  if (messages->empty()) {
    // Committed but not there (the database was changed behind perld's
    // back): the stream cannot continue in order; Send reports the gap.
    log::Error("upstream: run ", id, ": stored window messages ", s.stored_from, "..",
               s.committed_next - 1, " are missing from the state database");
    s.stored_from = s.committed_next;
  } else {
    s.stored_from = messages->back().sequence + 1;
  }
  if (s.stored_from >= s.committed_next) {
    s.stored_from = 0;  // caught up: the next committed messages queue as usual
    MaybeEndLocked(id);
  } else {
    QueueReloadLocked(id);
  }
}

void UpstreamForwarder::QueueLocked(Task task) {
  if (task.kind == Task::Kind::kMessages) {
    queued_windows_.fetch_add(static_cast<int64_t>(task.messages.size()),
                              std::memory_order_relaxed);
  }
  tasks_.push_back(std::move(task));
  cv_.notify_one();
}

void UpstreamForwarder::QueueMessagesLocked(runs::RunId id, std::vector<Message> messages,
                                            bool gated) {
  Task t;
  t.kind = Task::Kind::kMessages;
  t.run_id = id;
  t.gated = gated;
  t.messages = std::move(messages);
  QueueLocked(std::move(t));
}

void UpstreamForwarder::QueueReloadLocked(runs::RunId id) {
  Task t;
  t.kind = Task::Kind::kReload;
  t.run_id = id;
  QueueLocked(std::move(t));
}

void UpstreamForwarder::QueueEndLocked(runs::RunId id) {
  Task t;
  t.kind = Task::Kind::kEnd;
  t.run_id = id;
  QueueLocked(std::move(t));
}

void UpstreamForwarder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !worker_.joinable()) return;
  }
  // The runs have ended: let their last messages commit (and so be queued).
  if (store_ != nullptr) {
    if (absl::Status s = store_->Flush(); !s.ok()) {
      log::Error("state: not everything was stored: ", s.message());
    }
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.close_timeout_ms);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    give_up_at_ = deadline;
  }
  {
    // A stream waiting for room (the parent is down) gives up at the deadline.
    std::lock_guard<std::mutex> senders(senders_mu_);
    for (auto& [id, s] : senders_) s.sender->GiveUpAt(deadline);
  }
  cv_.notify_one();
  worker_.join();
}

void UpstreamForwarder::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  auto tended_at = std::chrono::steady_clock::now();
  for (;;) {
    cv_.wait_for(lock, kTendEvery, [&] { return stopping_ || !tasks_.empty(); });
    if (std::chrono::steady_clock::now() - tended_at >= kTendEvery) {
      lock.unlock();
      Tend(false);
      tended_at = std::chrono::steady_clock::now();
      lock.lock();
    }
    if (tasks_.empty()) {
      if (stopping_) break;  // everything handed over
      continue;
    }
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    if (task.kind == Task::Kind::kMessages) {
      queued_windows_.fetch_sub(static_cast<int64_t>(task.messages.size()),
                                std::memory_order_relaxed);
    }
    lock.unlock();
    switch (task.kind) {
      case Task::Kind::kStart:
        Start(task);
        break;
      case Task::Kind::kMessages:
        Send(task.run_id, task.messages, task.gated);
        break;
      case Task::Kind::kReload:
        Reload(task.run_id);
        break;
      case Task::Kind::kEnd:
        End(task.run_id);
        break;
    }
    lock.lock();
  }
  lock.unlock();
  // Every stream still open or closing (its run ended; the parent may be
  // slow or down) gets until upstream.closeTimeoutMs from Stop().
  Tend(true);
}

void UpstreamForwarder::Start(const Task& task) {
  const runs::RunInfo& info = task.info;
  v1::IngestOpen open;
  open.set_run_name(info.spec.name);
  open.mutable_labels()->insert(info.spec.labels.begin(), info.spec.labels.end());
  open.set_time_unit(service::ToProto(info.spec.latency.time_unit));
  open.set_min_latency(info.spec.latency.min_latency);
  open.set_max_latency(info.spec.latency.max_latency);
  for (double p : info.spec.latency.percentiles) open.add_percentiles(p);
  open.set_reporting_interval_ms(
      std::clamp<int64_t>(info.spec.reporting_interval_ms, 10, 86'400'000));
  open.set_client_id(absl::StrCat(node_id_, "/", info.id));
  open.set_client_name(absl::StrCat("perld ", node_id_, " run ", info.id));
  open.set_mode(v1::IngestOpen::MODE_WINDOWS);
  Sender s;
  s.sender = std::make_unique<client::IngestSender>(channel_, std::move(open), kMaxUnackedPerStream,
                                                    kMaxUndurableBytesPerStream, nullptr,
                                                    task.first_sequence);
  s.released = task.first_sequence - 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (give_up_at_ != std::chrono::steady_clock::time_point::max()) {
      s.sender->GiveUpAt(give_up_at_);
    }
  }
  runs_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> senders(senders_mu_);
  senders_[info.id] = std::move(s);
}

void UpstreamForwarder::Send(runs::RunId id, const std::vector<Message>& messages, bool gated) {
  client::IngestSender* sender = nullptr;
  {
    std::lock_guard<std::mutex> senders(senders_mu_);
    auto it = senders_.find(id);
    if (it == senders_.end()) return;
    it->second.gated |= gated;
    sender = it->second.sender.get();
  }
  for (const Message& m : messages) {
    // After the first failure the run's later messages are only counted.
    if (refused_.contains(id)) {
      if (!gated || sender->failed()) windows_dropped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    v1::IngestRequest message;
    std::string why;
    if (m.sequence != sender->next_sequence()) {
      why = absl::StrCat("the stream expects message ", sender->next_sequence());
    } else if (!message.ParseFromString(m.bytes)) {
      why = "it does not parse";
    } else if (sender->Enqueue(std::move(message))) {
      windows_sent_.fetch_add(1, std::memory_order_relaxed);
      continue;
    } else {
      perld::Counters c;
      sender->FillCounters(&c);
      why = c.last_stream_error.empty() ? "the parent refused the stream or perld is stopping"
                                        : c.last_stream_error;
    }
    // A gated message is lost only when the parent refused the stream for
    // good; else (perld is stopping) it stays stored for the next start.
    if (!gated || sender->failed()) windows_dropped_.fetch_add(1, std::memory_order_relaxed);
    refused_.insert(id);
    log::Error("upstream: run ", id, ": message ", m.sequence,
               " and the run's later ones not forwarded: ", why);
  }
}

void UpstreamForwarder::End(runs::RunId id) {
  refused_.erase(id);
  std::lock_guard<std::mutex> senders(senders_mu_);
  auto it = senders_.find(id);
  if (it == senders_.end()) return;
  it->second.closing_since = std::chrono::steady_clock::now();
  it->second.sender->Close(std::chrono::milliseconds(0));  // asks; Tend() sees it through
}

void UpstreamForwarder::Tend(bool last) {
  std::vector<std::pair<runs::RunId, Sender>> done;
  {
    std::lock_guard<std::mutex> senders(senders_mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = senders_.begin(); it != senders_.end();) {
      Sender& s = it->second;
      perld::Counters c;
      s.sender->FillCounters(&c);
      if (s.gated && store_ != nullptr && c.durable_sequence > s.released) {
        store_->ReleaseUpstream(it->first, c.durable_sequence);
        s.released = c.durable_sequence;
      }
      const bool closing = s.closing_since != std::chrono::steady_clock::time_point::max();
      bool finished = last;
      if (closing && !last) {
        const perld::FlushResult r = s.sender->Close(std::chrono::milliseconds(0));
        // A gated stream keeps trying until perld stops or a final error:
        // its messages are safe in the state database meanwhile.
        finished = r.acked || s.sender->failed() ||
                   (!s.gated &&
                    now - s.closing_since >= std::chrono::milliseconds(config_.close_timeout_ms));
      }
      if (finished) {
        done.emplace_back(it->first, std::move(s));
        it = senders_.erase(it);
      } else {
        ++it;
      }
    }
  }
  auto deadline = std::chrono::steady_clock::time_point::max();
  if (last) {  // the deadline Stop() set, shared by every stream
    std::lock_guard<std::mutex> lock(mu_);
    deadline = give_up_at_;
  }
  for (auto& [id, s] : done) {
    std::chrono::milliseconds wait(0);  // not stopping: finished streams need none
    if (last) {
      wait = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max(deadline - std::chrono::steady_clock::now(),
                   std::chrono::steady_clock::duration::zero()));
    }
    Finish(id, s, wait);
  }
}

void UpstreamForwarder::Finish(runs::RunId id, Sender& s, std::chrono::milliseconds wait) {
  const perld::FlushResult r = s.sender->Close(wait);
  perld::Counters c;
  s.sender->FillCounters(&c);
  closed_acked_.fetch_add(c.acked_sequence, std::memory_order_relaxed);
  if (r.acked || s.sender->failed()) {
    // Delivered, or refused for good (a resend could not change that).
    if (s.gated && store_ != nullptr) store_->EndUpstream(id);
    if (r.acked) return;
  } else if (s.gated && store_ != nullptr) {
    if (c.durable_sequence > s.released) store_->ReleaseUpstream(id, c.durable_sequence);
    log::Error("upstream: run ", id, ": ", r.unacked_messages,
               " window message(s) not yet "
               "acknowledged by ",
               config_.target, " (", r.error,
               "): kept in the state "
               "database, resent when perld starts again");
    return;
  }
  log::Error("upstream: run ", id, ": ", r.unacked_messages,
             " window message(s) not acknowledged by ", config_.target, " (", r.error, ")");
}

UpstreamForwarder::Counters UpstreamForwarder::counters() const {
  Counters out;
  out.runs = runs_.load(std::memory_order_relaxed);
  out.windows_sent = windows_sent_.load(std::memory_order_relaxed);
  out.windows_dropped = windows_dropped_.load(std::memory_order_relaxed);
  out.queued = static_cast<uint64_t>(queued_windows_.load(std::memory_order_relaxed));
  out.messages_acked = closed_acked_.load(std::memory_order_relaxed);
  out.restored = restored_count_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> senders(senders_mu_);
  out.open_streams = senders_.size();
  for (const auto& [id, s] : senders_) {
    perld::Counters c;
    s.sender->FillCounters(&c);
    out.messages_acked += c.acked_sequence;
  }
  return out;
}

}  // namespace perld::tiers
