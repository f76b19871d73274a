#include "daemon/remote_write/remote_writer.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/log.h"
#include "daemon/core/thread_name.h"
#include "daemon/remote_write/exposition_samples.h"
#include "daemon/remote_write/remote_write_encoding.h"
#include "daemon/remote_write/retry_policy.h"

namespace perld::remote_write {
namespace {

int64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string StatusText(const SendResult& r) {
  if (r.status == 0) return absl::StrCat("no answer (", r.error, ")");
  std::string body = r.error;
  std::replace(body.begin(), body.end(), '\n', ' ');
  return absl::StrCat("HTTP ", r.status, body.empty() ? "" : ": ", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteWriter>> RemoteWriter::Create(
    const config::RemoteWriteConfig& config, Options options) {
  std::shared_ptr<RemoteWriteEndpoint> endpoint;
  if (config.enabled()) {
    absl::StatusOr<std::unique_ptr<RemoteWriteEndpoint>> made = RemoteWriteEndpoint::Create(config);
    if (!made.ok()) return made.status();
    endpoint = *std::move(made);
  }
  if (!options.now_unix_ms) {
    options.now_unix_ms = [] { return absl::ToUnixMillis(absl::Now()); };
  }
  return std::unique_ptr<RemoteWriter>(
      new RemoteWriter(config, std::move(options), std::move(endpoint)));
}

RemoteWriter::RemoteWriter(const config::RemoteWriteConfig& config, Options options,
                           std::shared_ptr<RemoteWriteEndpoint> endpoint)
    : options_(std::move(options)),
      config_(config),
      endpoint_(std::move(endpoint)),
      queue_(static_cast<size_t>(std::max<int64_t>(config.max_queued_samples, 1))) {
  stats_.SetCapacity(queue_.capacity());
}

RemoteWriter::~RemoteWriter() { Stop(0); }

bool RemoteWriter::running() const {
  MutexLock lock(mu_);
  return running_;
}

void RemoteWriter::Start() {
  MutexLock lock(mu_);
  if (!running_ && endpoint_ != nullptr) StartLocked();
}

void RemoteWriter::StartLocked() {
  running_ = true;
  stop_collecting_ = stop_sending_ = final_collection_ = sender_done_ = false;
  log::Info("remote write: every ", config_.interval_ms, " ms to ", config_.url, " (at most ",
            queue_.capacity(), " samples queued)");
  collector_ = std::thread([this] { CollectLoop(); });
  sender_ = std::thread([this] { SendLoop(); });
}

absl::Status RemoteWriter::Reconfigure(const config::RemoteWriteConfig& config) {
  std::shared_ptr<RemoteWriteEndpoint> endpoint;
  if (config.enabled()) {
    absl::StatusOr<std::unique_ptr<RemoteWriteEndpoint>> made = RemoteWriteEndpoint::Create(config);
    if (!made.ok()) return made.status();
    endpoint = *std::move(made);
  } else {
    Stop(0);  // turned off: nothing more is collected or sent
  }
  MutexLock lock(mu_);
  const int64_t capacity = static_cast<int64_t>(queue_.capacity());
  config_ = config;
  config_.max_queued_samples = capacity;  // [restart]
  endpoint_ = std::move(endpoint);
  ++interval_changes_;
  collect_cv_.NotifyAll();
  send_cv_.NotifyAll();
  if (!running_ && endpoint_ != nullptr) StartLocked();
  return absl::OkStatus();
}

void RemoteWriter::Stop(int64_t flush_ms) {
  {
    MutexLock lock(mu_);
    if (!running_) return;
    stop_collecting_ = true;
    final_collection_ = flush_ms > 0;
    collect_cv_.NotifyAll();
  }
  collector_.join();  // after its last collection, when asked for
  {
    MutexLock lock(mu_);
    stop_sending_ = true;
    flush_deadline_ = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(flush_ms, 0));
    send_cv_.NotifyAll();
    // A request in flight at the deadline is cut: the stop is bounded.
    while (!sender_done_) {
      if (done_cv_.WaitUntil(mu_, flush_deadline_) == std::cv_status::timeout ||
          Clock::now() >= flush_deadline_) {
        if (sending_ != nullptr) sending_->Abort();
        done_cv_.WaitFor(mu_, std::chrono::milliseconds(50));
      }
    }
  }
  sender_.join();
  MutexLock lock(mu_);
  running_ = false;
}

void RemoteWriter::CollectLoop() {
  NameThisThread("perld-rw-coll");
  std::string text;
  auto last = Clock::now();
  MutexLock lock(mu_);
  while (true) {
    const auto interval = std::chrono::milliseconds(config_.interval_ms);
    const auto next = last + interval;
    const uint64_t changes = interval_changes_;
    collect_cv_.WaitUntil(mu_, next, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_collecting_ || changes != interval_changes_;
    });
    if (stop_collecting_) {
      if (final_collection_) CollectOnce(&text);
      break;
    }
    const auto now = Clock::now();
    if (now < next) continue;                   // a reload: wait again with the new interval
    last = now - next < interval ? next : now;  // on schedule; a late one restarts it
    CollectOnce(&text);
  }
}

void RemoteWriter::CollectOnce(std::string* text) {
  mu_.Unlock();
  const int64_t timestamp_ms = options_.now_unix_ms();
  options_.render(text);
  std::vector<QueuedSample> samples;
  series_.Collect(*text, timestamp_ms, &samples);
  const size_t n = samples.size();
  mu_.Lock();
  const size_t dropped = queue_.Push(std::move(samples));
  stats_.AddCollection();
  stats_.AddCollected(n);
  stats_.SetQueued(queue_.size());
  if (dropped > 0) {
    stats_.AddDropped(DropReason::kQueueFull, dropped);
    if (FirstOf("queue_full")) {
      log::Warning("remote write: queue full (remoteWrite.maxQueuedSamples ", queue_.capacity(),
                   "): the oldest samples are dropped, counted in "
                   "perld_remote_write_samples_dropped_total{reason=\"queue_full\"}");
    }
  }
  send_cv_.NotifyAll();
  stats_.SetCollectCpuNs(ThreadCpuNanos());
}

bool RemoteWriter::FirstOf(const std::string& kind) { return logged_.insert(kind).second; }

void RemoteWriter::SendLoop() {
  NameThisThread("perld-rw-send");
  RetryBackoff backoff(options_.min_backoff_ms, options_.max_backoff_ms);
  std::vector<QueuedSample> batch;  // in flight: sent again until sent or dropped
  std::string body;
  auto retry_at = Clock::now();
  MutexLock lock(mu_);
  while (true) {
    // Wait for samples (and the retry time), or the stop.
    while (true) {
      const bool have = !batch.empty() || queue_.waiting() > 0;
      if (stop_sending_ && (!have || Clock::now() >= flush_deadline_)) break;
      if (have && Clock::now() >= retry_at) break;
      if (!have) {
        send_cv_.Wait(mu_);
      } else {
        send_cv_.WaitUntil(mu_, stop_sending_ ? std::min(retry_at, flush_deadline_) : retry_at);
      }
    }
    if (stop_sending_ &&
        ((batch.empty() && queue_.waiting() == 0) || Clock::now() >= flush_deadline_)) {
      break;
    }
    const bool fresh = batch.empty();
    if (fresh) {
      batch = queue_.TakeBatch(static_cast<size_t>(config_.max_samples_per_request));
    } else {
      stats_.AddRetry();
    }
    std::shared_ptr<RemoteWriteEndpoint> endpoint = endpoint_;
    if (endpoint == nullptr) break;  // turned off
    sending_ = endpoint;
    mu_.Unlock();
    if (fresh) body = SnappyBlock(EncodeWriteRequest(batch));
    const SendResult result = endpoint->Send(body);
    const int64_t cpu_ns = ThreadCpuNanos();
    mu_.Lock();
    sending_ = nullptr;
    stats_.SetSendCpuNs(cpu_ns);
    stats_.AddRequest(result.status);
    switch (Classify(result.status)) {
      case Outcome::kSent:
        stats_.AddSent(batch.size());
        stats_.SetLastSentMs(batch.back().timestamp_ms);
        if (backoff.failures() > 0) {
          log::Info("remote write to ", endpoint->url().SchemeHostPort(), " works again after ",
                    backoff.failures(), " failed attempt(s)");
        }
        backoff.Reset();
        logged_.clear();
        batch.clear();
        queue_.FinishBatch();
        break;
      case Outcome::kRetry: {
        const int64_t delay_ms = backoff.NextDelayMs(result.retry_after_ms);
        retry_at = Clock::now() + std::chrono::milliseconds(delay_ms);
        if (FirstOf("retry")) {
          log::Warning("remote write to ", endpoint->url().SchemeHostPort(), ": ",
                       StatusText(result), "; retrying with backoff (samples stay queued)");
        }
        break;
      }
      case Outcome::kDrop:
        stats_.AddDropped(DropReason::kRejected, batch.size());
        if (FirstOf(absl::StrCat("rejected ", result.status))) {
          log::Error("remote write to ", endpoint->url().SchemeHostPort(), " refused ",
                     batch.size(), " samples: ", StatusText(result),
                     " (dropped, counted in perld_remote_write_samples_dropped_total"
                     "{reason=\"rejected\"})");
        }
        batch.clear();
        queue_.FinishBatch();
        break;
    }
    stats_.SetQueued(queue_.size());
  }
  // Stopped: what was not sent is counted.
  const size_t left = batch.size() + queue_.Clear();
  queue_.FinishBatch();
  if (left > 0) {
    stats_.AddDropped(DropReason::kShutdown, left);
    log::Warning("remote write: ", left,
                 " samples not sent at the stop (counted in "
                 "perld_remote_write_samples_dropped_total{reason=\"shutdown\"})");
  }
  stats_.SetQueued(queue_.size());
  sender_done_ = true;
  done_cv_.NotifyAll();
}

}  // namespace perld::remote_write
