#include "daemon/server/upstream_forwarder.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/lib/wire_encoder.h"
#include "daemon/log/log.h"
#include "daemon/service/run_proto.h"

namespace perld::server {
namespace {

// Unacknowledged messages one stream may hold before the worker waits.
constexpr int64_t kMaxUnackedPerStream = 256;
// Windows one stream keeps until the root reports them durable.
constexpr int64_t kMaxUndurableBytesPerStream = int64_t{256} << 20;

// upstream.nodeId when set, else $PERLD_NODE_ID (a Kubernetes DaemonSet sets
// it from spec.nodeName), else the host name.
std::string NodeId(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* env = std::getenv("PERLD_NODE_ID");  // NOLINT(concurrency-mt-unsafe): read once
  if (env != nullptr && env[0] != '\0') return env;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "perld";
  return name;
}

}  // namespace

UpstreamForwarder::UpstreamForwarder(config::UpstreamConfig config,
                                     std::shared_ptr<grpc::Channel> channel)
    : config_(std::move(config)),
      channel_(std::move(channel)),
      node_id_(NodeId(config_.node_id)),
      worker_([this] { Work(); }) {
  log::Info("upstream: forwarding every run's windows to ", config_.target, " as '", node_id_, "'");
}

UpstreamForwarder::~UpstreamForwarder() { Stop(); }

void UpstreamForwarder::OnRunStarted(const runs::RunInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  Task& t = tasks_.emplace_back();
  t.kind = Task::Kind::kStart;
  t.info = info;
  t.run_id = info.id;
  cv_.notify_one();
}

void UpstreamForwarder::OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) {
  if (window.kind != runs::WindowRecord::Kind::kPeriodic) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  if (queued_windows_.load(std::memory_order_relaxed) >= config_.max_queued_windows) {
    windows_dropped_.fetch_add(1, std::memory_order_relaxed);
    log::Error("upstream: run ", info.id, " '", info.spec.name, "': window ", window.seq,
               " dropped, upstream.maxQueuedWindows (", config_.max_queued_windows,
               ") windows are waiting for ", config_.target);
    return;
  }
  Task& t = tasks_.emplace_back();
  t.kind = Task::Kind::kWindow;
  t.window = window;
  t.run_id = info.id;
  queued_windows_.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_one();
}

void UpstreamForwarder::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord&) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  Task& t = tasks_.emplace_back();
  t.kind = Task::Kind::kEnd;
  t.run_id = info.id;
  cv_.notify_one();
}

void UpstreamForwarder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  worker_.join();
}

void UpstreamForwarder::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) break;  // stopping, everything handed over
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    if (task.kind == Task::Kind::kWindow) {
      queued_windows_.fetch_sub(1, std::memory_order_relaxed);
    }
    lock.unlock();
    switch (task.kind) {
      case Task::Kind::kStart:
        Start(task.info);
        break;
      case Task::Kind::kWindow:
        Send(task.run_id, task.window);
        break;
      case Task::Kind::kEnd:
        End(task.run_id);
        break;
    }
    lock.lock();
  }
  lock.unlock();
  // Runs still open at shutdown (they end before the forwarder stops, so
  // this only happens when the daemon gives up early): close them too.
  std::vector<runs::RunId> open;
  {
    std::lock_guard<std::mutex> senders(senders_mu_);
    for (const auto& [id, sender] : senders_) open.push_back(id);
  }
  for (runs::RunId id : open) End(id);
}

void UpstreamForwarder::Start(const runs::RunInfo& info) {
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
  auto sender = std::make_unique<client::IngestSender>(
      channel_, std::move(open), kMaxUnackedPerStream, kMaxUndurableBytesPerStream);
  runs_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> senders(senders_mu_);
  senders_[info.id] = std::move(sender);
}

void UpstreamForwarder::Send(runs::RunId id, const runs::WindowRecord& window) {
  client::IngestSender* sender = nullptr;
  {
    std::lock_guard<std::mutex> senders(senders_mu_);
    auto it = senders_.find(id);
    if (it != senders_.end()) sender = it->second.get();
  }
  if (sender == nullptr) return;  // a run restored from the history: not forwarded
  std::vector<v1::WindowReport> parts =
      client::EncodeWindowParts(window.snapshot, window.distribution, config_.max_pairs_per_report,
                                sender->next_sequence(), window.start_unix_ms, window.end_unix_ms);
  for (v1::WindowReport& part : parts) {
    v1::IngestRequest message;
    *message.mutable_window() = std::move(part);
    if (!sender->Enqueue(std::move(message))) {
      windows_dropped_.fetch_add(1, std::memory_order_relaxed);
      if (refused_.insert(id).second) {  // once per run; the rest are counted
        perld::Counters c;
        sender->FillCounters(&c);
        log::Error(
            "upstream: run ", id, ": window ", window.seq,
            " and the run's later windows not forwarded: ",
            c.last_stream_error.empty() ? "the parent refused the stream" : c.last_stream_error);
      }
      return;
    }
    windows_sent_.fetch_add(1, std::memory_order_relaxed);
  }
}

void UpstreamForwarder::End(runs::RunId id) {
  std::unique_ptr<client::IngestSender> sender;
  {
    std::lock_guard<std::mutex> senders(senders_mu_);
    auto it = senders_.find(id);
    if (it == senders_.end()) return;
    sender = std::move(it->second);
    senders_.erase(it);
  }
  refused_.erase(id);
  const perld::FlushResult r = sender->Close(std::chrono::milliseconds(config_.close_timeout_ms));
  perld::Counters c;
  sender->FillCounters(&c);
  closed_acked_.fetch_add(c.acked_sequence, std::memory_order_relaxed);
  if (!r.acked) {
    log::Error("upstream: run ", id, ": ", r.unacked_messages,
               " window message(s) not acknowledged by ", config_.target, " (", r.error, ")");
  }
}

UpstreamForwarder::Counters UpstreamForwarder::counters() const {
  Counters out;
  out.runs = runs_.load(std::memory_order_relaxed);
  out.windows_sent = windows_sent_.load(std::memory_order_relaxed);
  out.windows_dropped = windows_dropped_.load(std::memory_order_relaxed);
  out.queued = static_cast<uint64_t>(queued_windows_.load(std::memory_order_relaxed));
  out.messages_acked = closed_acked_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> senders(senders_mu_);
  out.open_streams = senders_.size();
  for (const auto& [id, sender] : senders_) {
    perld::Counters c;
    sender->FillCounters(&c);
    out.messages_acked += c.acked_sequence;
  }
  return out;
}

}  // namespace perld::server
