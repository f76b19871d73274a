#include "client/lib/ingest_sender.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/failpoint.h"
#include "daemon/common/mutex.h"
#include "daemon/core/contract.h"

namespace perld::client {
namespace {

// Codes the daemon uses for errors a resend cannot fix. RESOURCE_EXHAUSTED
// is not one: the daemon uses it only for transient limits (streams, runs,
// clients per run, memory), so the sender retries with capped backoff.
bool IsFinal(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::DATA_LOSS:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return true;
    default:
      return false;
  }
}

}  // namespace

IngestSender::IngestSender(std::shared_ptr<grpc::Channel> channel, v1::IngestOpen open,
                           int64_t max_unacked, int64_t max_undurable_bytes,
                           std::unique_ptr<Spool> spool, uint64_t first_sequence,
                           std::function<void()> on_progress, uint64_t held_through)
    : channel_(std::move(channel)),
      stub_(v1::Ingest::NewStub(channel_)),
      max_unacked_(std::max<int64_t>(1, max_unacked)),
      max_undurable_bytes_(std::max<int64_t>(1, max_undurable_bytes)),
      spool_(std::move(spool)),
      on_progress_(std::move(on_progress)),
      held_through_(held_through) {
  run_id_ = open.run_id();  // a spool's meta names the run its messages belong to
  *open_.mutable_open() = std::move(open);
  made_.store(std::max<uint64_t>(first_sequence, 1) - 1, std::memory_order_relaxed);
  counted_ = made_.load(std::memory_order_relaxed);
  if (spool_ != nullptr) {
    // Every key below the spool's first one was released: the daemon had
    // reported it durable. A daemon that comes back with less lost them.
    if (const uint64_t first = spool_->first_key(); first > 1) {
      durable_ = first - 1;
      acked_ = counted_ = durable_;
    }
    // What a previous process spooled goes first, with its own sequences
    // (read into locals: the constructor's members need no lock, the
    // callback's would).
    std::string bad_record;
    decltype(outbox_) replayed;
    int64_t replayed_bytes = 0;
    const absl::Status replay = spool_->ForEach([&](uint64_t key, std::string_view payload) {
      auto message = std::make_shared<v1::IngestRequest>();
      if (!message->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
        bad_record = "spool: a record does not hold an Ingest message";
        return false;
      }
      replayed_bytes += static_cast<int64_t>(payload.size());
      replayed.emplace_back(key, std::move(message));
      return true;
    });
    if (!bad_record.empty()) error_ = std::move(bad_record);
    outbox_bytes_ += replayed_bytes;
    spool_replayed_ += replayed.size();
    for (auto& m : replayed) outbox_.push_back(std::move(m));
    if (!replay.ok()) error_ = std::string(replay.message());
    made_.store(spool_->last_key(), std::memory_order_relaxed);
  }
  thread_ = std::thread([this] { Run(); });
}

IngestSender::~IngestSender() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    if (live_ != nullptr) live_->TryCancel();
  }
  cv_.NotifyAll();
  thread_.join();
}

int64_t IngestSender::RecordsOf(const v1::IngestRequest& message) {
  if (message.has_window()) return message.window().records();
  if (!message.has_batch()) return 0;
  const v1::TimestampBatch& b = message.batch();
  if (b.records_size() == 0) {
    return int64_t{b.count()} * (b.constant_records() == 0 ? 1 : b.constant_records());
  }
  int64_t n = 0;
  for (uint32_t r : b.records()) n += r;
  return n;
}

bool IngestSender::Enqueue(v1::IngestRequest message) {
  const uint64_t seq = made_.load(std::memory_order_relaxed) + 1;
  auto shared = std::make_shared<const v1::IngestRequest>(std::move(message));
  const auto unsent = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++unsent_;
    unsent_records_ += RecordsOf(*shared);
    return false;
  };
  {
    // Room first: a message that is given up on is never spooled, and one
    // that is spooled is always queued (sent, or replayed by the next
    // process) -- the spool and the sequence numbers never disagree.
    MutexLock lock(mu_);
    if (!RoomLocked()) {
      ++full_waits_;
      const auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return RoomLocked() || !error_.empty() || stop_;
      };
      // GiveUpAt may come while this waits: the deadline is re-read each wake.
      while (!room()) {
        if (give_up_at_ == std::chrono::steady_clock::time_point::max()) {
          cv_.Wait(mu_);
        } else if (cv_.WaitUntil(mu_, give_up_at_) == std::cv_status::timeout && !room()) {
          return unsent();
        }
      }
    }
    if (!error_.empty() || stop_) return unsent();
  }
  if (spool_ != nullptr) {
    if (!SpoolAppend(seq, *shared)) {
      MutexLock lock(mu_);
      return unsent();
    }
    PERLD_FAILPOINT_HIT("spool-after-append-before-send");
  }
  MutexLock lock(mu_);
  outbox_bytes_ += static_cast<int64_t>(shared->ByteSizeLong());
  outbox_.emplace_back(seq, std::move(shared));
  made_.store(seq, std::memory_order_relaxed);
  cv_.NotifyAll();
  return true;
}

IngestSender::Offer IngestSender::TryEnqueue(v1::IngestRequest* message) {
  PERLD_CONTRACT(spool_ == nullptr, "TryEnqueue on a sender with a spool");
  MutexLock lock(mu_);
  if (!error_.empty() || stop_) return Offer::kFailed;
  if (!RoomLocked()) return Offer::kFull;
  const uint64_t seq = made_.load(std::memory_order_relaxed) + 1;
  auto shared = std::make_shared<const v1::IngestRequest>(std::move(*message));
  outbox_bytes_ += static_cast<int64_t>(shared->ByteSizeLong());
  outbox_.emplace_back(seq, std::move(shared));
  made_.store(seq, std::memory_order_relaxed);
  cv_.NotifyAll();
  return Offer::kQueued;
}

bool IngestSender::SpoolAppend(uint64_t seq, const v1::IngestRequest& message) {
  const std::string bytes = message.SerializeAsString();
  bool waited = false;
  for (;;) {
    const absl::Status s = spool_->Append(seq, bytes);
    if (s.ok()) return true;
    MutexLock lock(mu_);
    if (s.code() != absl::StatusCode::kResourceExhausted) {
      if (error_.empty()) error_ = std::string(s.message());  // a disk error is final
      cv_.NotifyAll();
      return false;
    }
    // Full: wait for acknowledgements to release segments (the recorder
    // blocks, as on a full outbox), until stopped or given up.
    if (!waited) ++spool_full_waits_;
    waited = true;
    if (!error_.empty() || stop_ || std::chrono::steady_clock::now() >= give_up_at_) return false;
    cv_.WaitFor(mu_, std::chrono::milliseconds(20));
  }
}

bool IngestSender::RoomLocked() const {
  // With a spool, recording while the daemon is away is the point: the
  // messages wait in the spool (bounded by its own size) and in memory
  // (max_undurable_bytes), not behind the in-flight bound.
  const uint64_t made = made_.load(std::memory_order_relaxed);
  return (spool_ != nullptr ||
          static_cast<int64_t>(made - std::min(acked_, made)) < max_unacked_) &&
         outbox_bytes_ < max_undurable_bytes_;
}

void IngestSender::ReleaseDurableLocked() {
  // Records of newly acknowledged messages (all still in the outbox).
  while (counted_ < acked_ && !outbox_.empty() && counted_ + 1 >= outbox_.front().first) {
    const uint64_t at = counted_ + 1 - outbox_.front().first;
    if (at >= outbox_.size()) break;
    acked_records_ += RecordsOf(*outbox_[at].second);
    ++counted_;
  }
  while (!outbox_.empty() && outbox_.front().first <= durable_) {
    outbox_bytes_ -= static_cast<int64_t>(outbox_.front().second->ByteSizeLong());
    outbox_.pop_front();
  }
  if (spool_ != nullptr) spool_->Release(durable_);
}

void IngestSender::GiveUpAt(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  give_up_at_ = std::min(give_up_at_, deadline);
  cv_.NotifyAll();
}

FlushResult IngestSender::ResultLocked(uint64_t sequence) const {
  FlushResult r;
  const uint64_t made = made_.load(std::memory_order_relaxed);
  r.acked = acked_ >= sequence && error_.empty() && unsent_ == 0;
  r.unacked_messages = made - std::min(acked_, made) + unsent_;
  r.error = error_;
  if (r.error.empty() && unsent_ > 0) {
    r.error = std::to_string(unsent_) + " message(s) could not be queued before the deadline";
  }
  return r;
}

FlushResult IngestSender::WaitAcked(uint64_t sequence, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  cv_.WaitFor(mu_, timeout, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return acked_ >= sequence || !error_.empty();
  });
  FlushResult r = ResultLocked(sequence);
  if (!r.acked && r.error.empty()) r.error = "timed out";
  return r;
}

FlushResult IngestSender::Close(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  close_requested_ = true;
  cv_.NotifyAll();
  // Until the timeout or the give-up time, whichever comes first: a
  // GiveUpAt during the wait (an interrupted load) shortens it.
  while (!closed_ && error_.empty()) {
    const auto until = std::min(deadline, give_up_at_);
    if (std::chrono::steady_clock::now() >= until) break;
    cv_.WaitUntil(mu_, until);
  }
  FlushResult r = ResultLocked(made_.load(std::memory_order_relaxed));
  r.acked = closed_ && r.acked;
  if (!r.acked && r.error.empty()) r.error = "timed out";
  // Everything acknowledged and the stream closed: nothing to replay.
  if (r.acked && spool_ != nullptr) {
    if (absl::Status s = spool_->Reset(); !s.ok()) r.error = std::string(s.message());
  }
  return r;
}

void IngestSender::FillCounters(Counters* out) const {
  MutexLock lock(mu_);
  out->messages = made_.load(std::memory_order_relaxed);
  out->acked_sequence = acked_;
  out->durable_sequence = durable_;
  out->duplicates = duplicates_;
  out->reconnects = reconnects_;
  out->outbox_full_waits = full_waits_;
  out->run_id = run_id_;
  out->opened = opened_;
  out->run_created = run_created_;
  out->response_run = run_response_;
  out->acked_records = acked_records_;
  out->unsent_records = unsent_records_;
  out->last_stream_error = last_stream_error_;
  out->spool_replayed = spool_replayed_;
  out->spool_full_waits = spool_full_waits_;
}

void IngestSender::Run() {
  // However the stream ends (closed, a final error, stopped): say so.
  struct OnExit {
    const IngestSender* self;
    ~OnExit() { self->Progressed(); }
  } on_exit{this};
  std::chrono::milliseconds backoff(50);
  bool first = true;
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stop_ || closed_ || !error_.empty()) return;
      if (!first) ++reconnects_;
    }
    first = false;
    bool closed = false;
    bool opened = false;
    const grpc::Status status = Connect(&opened, &closed);
    MutexLock lock(mu_);
    if (closed) {
      closed_ = true;
      cv_.NotifyAll();
      return;
    }
    const std::string why =
        absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                     ": ", status.error_message());
    if (!status.ok()) last_stream_error_ = why;
    if (IsFinal(status.error_code())) {
      error_ = why;
      cv_.NotifyAll();
      return;
    }
    if (stop_) return;
    if (opened) backoff = std::chrono::milliseconds(50);  // it worked: start over
    cv_.WaitFor(mu_, backoff, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; });
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

std::string IngestSender::CheckOpenedLocked(const v1::IngestOpened& o) const {
  const v1::IngestOpen& open = open_.open();
  const std::string who =
      absl::StrCat("client '", open.client_id(), "' of run ", run_id_, " '", open.run_name(), "'");
  if (run_id_ != 0 && o.run_id() != run_id_) {
    return absl::StrCat("the daemon answered for run ", o.run_id(), ", not run ", run_id_,
                        ", which ", who, " was in: refusing to send into another run");
  }
  const uint64_t made = std::max(made_.load(std::memory_order_relaxed), held_through_);
  if (o.acked_sequence() > made) {
    return absl::StrCat(
        "the daemon has applied messages up to ", o.acked_sequence(), " of ", who,
        ", but this client made only up to ", made, ": messages ", made + 1, "..",
        o.acked_sequence(),
        " were sent by a process whose spool lost them (a batched spool after a machine "
        "crash?); refusing to reuse their sequence numbers");
  }
  if (o.acked_sequence() < durable_) {
    return absl::StrCat("the daemon holds messages up to ", o.acked_sequence(), " of ", who,
                        " but had reported up to ", durable_, " durable: messages ",
                        o.acked_sequence() + 1, "..", durable_,
                        " were lost on the daemon's side (its state directory was lost, "
                        "restored or cut by a power failure)");
  }
  return "";
}

grpc::Status IngestSender::Connect(bool* opened, bool* closed) {
  grpc::ClientContext context;
  {
    MutexLock lock(mu_);
    if (stop_) return grpc::Status::CANCELLED;
    live_ = &context;
  }
  struct Unpublish {
    IngestSender* self;
    ~Unpublish() {
      MutexLock lock(self->mu_);
      self->live_ = nullptr;
    }
  } unpublish{this};

  auto stream = stub_->Stream(&context);
  v1::IngestResponse response;
  {
    // A reconnect names the run it was in (the daemon answers for that run
    // only, never another of its name) and what it was told is durable (a
    // daemon holding less lost it, and says so).
    MutexLock lock(mu_);
    open_.mutable_open()->set_run_id(run_id_);
    open_.mutable_open()->set_durable_sequence(durable_);
  }
  if (!stream->Write(open_) || !stream->Read(&response) || !response.has_opened()) {
    stream->WritesDone();
    return stream->Finish();
  }
  *opened = true;
  uint64_t next_to_send = 0;
  bool first_open = false;
  {
    MutexLock lock(mu_);
    const v1::IngestOpened& o = response.opened();
    if (std::string why = CheckOpenedLocked(o); !why.empty()) {
      error_ = std::move(why);
      cv_.NotifyAll();
      context.TryCancel();
      (void)stream->Finish();
      return grpc::Status::OK;  // error_ is set: Run() stops
    }
    first_open = run_id_ == 0;
    run_id_ = o.run_id();
    if (!opened_) run_created_ = response.opened().created();
    run_response_ = o.run().response_run();
    opened_ = true;
    max_batch_length_.store(o.max_batch_length(), std::memory_order_relaxed);
    max_pairs_per_report_.store(o.max_pairs_per_report(), std::memory_order_relaxed);
    // What the daemon has applied now: after a daemon crash it resumed from
    // a checkpoint and may have applied less than it acknowledged before
    // (never less than what it declared durable: CheckOpenedLocked).
    acked_ = o.acked_sequence();
    next_to_send = std::max(acked_, durable_) + 1;
  }
  cv_.NotifyAll();
  Progressed();  // acked_ is the daemon's now: room may have changed
  if (first_open && spool_ != nullptr) {
    // A process restarted on this spool reconnects naming the run.
    open_.mutable_open()->set_run_id(response.opened().run_id());
    if (absl::Status s = spool_->SetMeta(open_.open().SerializeAsString()); !s.ok()) {
      MutexLock lock(mu_);
      error_ = std::string(s.message());
      cv_.NotifyAll();
      context.TryCancel();
      (void)stream->Finish();
      return grpc::Status::OK;
    }
  }

  std::atomic<bool> broken{false};
  std::thread reader([&] {
    v1::IngestResponse r;
    while (stream->Read(&r)) {
      if (!r.has_ack()) continue;
      {
        MutexLock lock(mu_);
        acked_ = std::max(acked_, r.ack().acked_sequence());
        durable_ = std::max(durable_, r.ack().has_durable_sequence() ? r.ack().durable_sequence()
                                                                     : r.ack().acked_sequence());
        duplicates_ = r.ack().duplicates();
        ReleaseDurableLocked();
        cv_.NotifyAll();
      }
      Progressed();
    }
    MutexLock lock(mu_);
    broken.store(true, std::memory_order_relaxed);
    cv_.NotifyAll();
  });

  bool close_sent = false;
  for (;;) {
    Message next;
    uint64_t last = 0;
    {
      MutexLock lock(mu_);
      cv_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        const uint64_t made = made_.load(std::memory_order_relaxed);
        return stop_ || broken.load(std::memory_order_relaxed) || next_to_send <= made ||
               (close_requested_ && !close_sent);
      });
      if (stop_ || broken.load(std::memory_order_relaxed)) break;
      const uint64_t made = made_.load(std::memory_order_relaxed);
      if (next_to_send <= made) {
        // The outbox holds consecutive sequences from its front.
        if (!outbox_.empty() && next_to_send >= outbox_.front().first) {
          const uint64_t at = next_to_send - outbox_.front().first;
          if (at < outbox_.size()) next = outbox_[at].second;
        }
        if (next == nullptr) {  // released meanwhile (durable)
          next_to_send = std::max(next_to_send + 1, durable_ + 1);
          continue;
        }
      } else {
        last = made;
      }
    }
    if (next != nullptr) {
      // Never send what the spool does not hold: a batched spool may delay
      // the write and the send together, never the write alone.
      if (spool_ != nullptr) {
        if (absl::Status s = spool_->WriteThrough(next_to_send); !s.ok()) {
          MutexLock lock(mu_);
          if (error_.empty()) error_ = std::string(s.message());
          cv_.NotifyAll();
          break;
        }
      }
      if (!stream->Write(*next)) break;
      ++next_to_send;
      continue;
    }
    v1::IngestRequest close;
    close.mutable_close()->set_last_sequence(last);
    close_sent = true;
    if (!stream->Write(close)) break;
    stream->WritesDone();
    break;
  }
  if (!close_sent) context.TryCancel();
  reader.join();
  grpc::Status status = stream->Finish();
  if (close_sent && status.ok()) {
    MutexLock lock(mu_);
    *closed = acked_ >= made_.load(std::memory_order_relaxed);
  }
  return status;
}

}  // namespace perld::client
