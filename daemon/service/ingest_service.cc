#include "daemon/service/ingest_service.h"

#include <grpcpp/support/byte_buffer.h>

#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/mutex.h"
#include "daemon/ingest/refusals.h"
#include "daemon/service/grpc_ingest_stream.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/ingest_codec.h"
#include "daemon/service/run_proto.h"

namespace perld::service {

using Refusal = ingest::IngestStats::Refusal;

// One client's stream. Reading runs ahead of handling: a read completes
// into the stream's inbox (OnReadDone, gRPC's callback thread: only the
// size is checked), and while a worker of the service's IngestWorkers
// handles one message the next ones are read (RoomAheadLocked bounds the
// inbox in messages and bytes). One drain at a time handles the inbox in order --
// parse, offer, or park for room and go on once Resumed -- so a stream's
// messages are handled in order and never concurrently, and a busy stream's
// worker takes its next message without sleeping or waiting for a read
// (reading only after each message was handled cost ~5 thread switches a
// message: tests/bench/INGEST.md, "Reading ahead"). Writes: one in flight;
// the Opened answer first, then acknowledgements built from the client's
// progress when it changed (one for everything a drain handled while more
// messages waited behind it), then Finish once nothing is left to write.
//
// Lifetime: gRPC calls OnDone (which deletes the reactor) once Finish was
// called and no read or write is pending (a pending read completes with
// ok=false after Finish) -- it knows nothing of a message on a worker or
// parked for room. So a drain holds the reactor from its start until it
// has nothing left to handle: Finish waits for that hold (holds_),
// whichever path decided to end. A parked message is resumed at once when
// the call is cancelled (RunTable::CancelParked), so a hold never outlives
// a vanished client.
class IngestService::Reactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Reactor(IngestService& service, grpc::CallbackServerContext* context)
      : service_(service),
        stream_(context),
        config_(service.config_.Get()),
        max_bytes_(static_cast<size_t>(config_->limits.max_message_bytes)) {
    open_streams_ = service_.stats_.streams_open.fetch_add(1, std::memory_order_relaxed) + 1;
    if (grpc::Status denied = service_.auth_.CheckCall(*context, Access::kWrite); !denied.ok()) {
      Finish(denied);  // nothing else started: no write, no read
      return;
    }
    if (open_streams_ > config_->ingest.max_streams) {
      service_.stats_.Refused(Refusal::kStreams);
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("ingest.maxStreams: ", config_->ingest.max_streams,
                                       " ingest streams are open already")));
      return;
    }
    if (!service_.runs_.accepting()) {
      service_.stats_.Refused(Refusal::kShutdown);
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "perld is shutting down: no new ingest streams"));
      return;
    }
    {
      MutexLock lock(mu_);
      reading_ = true;
    }
    StartRead(&in_bytes_);
  }

  void OnReadDone(bool ok) override {
    if (ok && in_bytes_.Length() > max_bytes_) {
      // A running drain stops before its next message.
      End(Refused(Refusal::kMessageSize, grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("limits.maxMessageBytes: a message of ", in_bytes_.Length(),
                               " bytes, the limit is ", max_bytes_)));
      return;
    }
    bool drain = false;
    bool read = false;
    {
      MutexLock lock(mu_);
      reading_ = false;
      // The call is over, or the read path stopped (a close, an error): a
      // message after it is not handled.
      if (finished_ || StoppedLocked()) return;
      if (!ok) {
        if (draining_) {
          input_ended_ = true;  // the drain ends the stream after the inbox
          return;
        }
      } else {
        inbox_bytes_ += in_bytes_.Length();
        inbox_.emplace_back().Swap(&in_bytes_);
        if (!draining_) {
          draining_ = true;
          ++holds_;  // until the drain has nothing left: Finish waits for it
          drain = true;
        }
        read = RoomAheadLocked();
        reading_ = read;
      }
    }
    if (!ok) {
      End(InputEnded());
      return;
    }
    if (read) StartRead(&in_bytes_);
    // Parsed and handled on a worker; the callback thread is free again.
    if (drain) service_.workers_.Post([this] { Drain(); });
  }

  // Handles the inbox in order (a worker; one drain at a time per stream)
  // until it is empty, the stream stops reading, or a message parks (then
  // Resumed drains on).
  void Drain() {
    for (;;) {
      bool took = false;
      bool read = false;
      bool end_input = false;
      {
        MutexLock lock(mu_);
        if (inbox_.empty() || StoppedLocked()) {
          inbox_.clear();  // after a close or an error: not handled
          inbox_bytes_ = 0;
          draining_ = false;
          end_input = input_ended_ && !StoppedLocked();
        } else {
          work_.Swap(&inbox_.front());
          inbox_.pop_front();
          inbox_bytes_ -= work_.Length();
          took = true;
          // The next read goes on while this message is handled.
          read = !reading_ && !input_ended_ && RoomAheadLocked();
          reading_ = reading_ || read;
        }
      }
      if (!took) {
        if (end_input) End(InputEnded());
        Write(/*release_hold=*/true);  // the last touch: Finish may follow
        return;
      }
      if (read) StartRead(&in_bytes_);
      const Next next = Process();
      // Parked: Resumed drains on. Nothing here touches the reactor after
      // that: a resume may have ended the call already. A kStop left the
      // stream ending or closing (StoppedLocked): the loop's next turn ends.
      if (next == Next::kParked) return;
    }
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(mu_);
      writing_ = false;
      if (!ok) {  // the client is gone: nothing more can be written
        broken_ = true;
        if (!final_) final_ = grpc::Status::CANCELLED;
      }
    }
    Write();
  }

  // The call was cancelled (the client went away, a newer stream took
  // over, the run was stopped). A pending read ends the stream itself; a
  // parked message has none, so the stream ends here.
  void OnCancel() override {
    {
      MutexLock lock(mu_);
      if (phase_ == Phase::kOpening) return;  // no session, nothing parked
    }
    service_.runs_.CancelParked(session_);  // Resumed ends the stream
  }

  void OnDone() override {
    if (listener_ != 0) service_.runs_.RemoveProgressListener(session_, listener_);
    service_.runs_.Leave(session_);  // drops a parked message; no Resume after this
    service_.stats_.streams_open.fetch_sub(1, std::memory_order_relaxed);
    delete this;
  }

 private:
  enum class Phase { kOpening, kStreaming, kRepeatClose, kClosing };
  // What the drain does after a message: go on with the next, stop
  // (closing, or ending), or wait for a parked message's Resumed.
  enum class Next { kRead, kStop, kParked };

  // The message in work_, parsed and handled.
  Next Process() {
    if (grpc::Status parsed =
            grpc::SerializationTraits<v1::IngestRequest>::Deserialize(&work_, &in_);
        !parsed.ok()) {
      End(Refused(Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("a message that is not a perld.v1.IngestRequest: ",
                               parsed.error_message())));
      return Next::kStop;
    }
    switch (phase_) {
      case Phase::kOpening:
        return Open();
      case Phase::kStreaming:
        return Message();
      case Phase::kRepeatClose:
        return RepeatClose();
      case Phase::kClosing:
        return Next::kStop;  // no read is started after a close
    }
    return Next::kStop;
  }

  grpc::Status Refused(Refusal r, grpc::StatusCode code, const std::string& message) {
    service_.stats_.Refused(r);
    return grpc::Status(code, message);
  }

  // The first message: the open.
  Next Open() {
    if (!in_.has_open()) {
      End(Refused(Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                  "the first message of an ingest stream must be `open`"));
      return Next::kStop;
    }
    absl::StatusOr<ingest::OpenRequest> open = DecodeOpen(in_.open());
    if (!open.ok()) {
      service_.stats_.Refused(Refusal::kMalformed);
      End(ToGrpcStatus(open.status()));
      return Next::kStop;
    }
    absl::StatusOr<ingest::RunTable::Session> joined = service_.runs_.Join(*open, &stream_);
    if (!joined.ok()) {
      End(ToGrpcStatus(joined.status()));
      return Next::kStop;
    }
    session_ = *std::move(joined);
    v1::IngestResponse response;
    v1::IngestOpened* opened = response.mutable_opened();
    opened->set_run_id(session_.run_id);
    if (absl::StatusOr<runs::RunInfo> info = service_.runs_.Info(session_); info.ok()) {
      ToProto(*info, opened->mutable_run());
    }
    opened->set_created(session_.created);
    opened->set_acked_sequence(session_.acked_sequence);
    opened->set_max_message_bytes(config_->limits.max_message_bytes);
    opened->set_max_batch_length(config_->ingest.max_batch_length);
    opened->set_max_pairs_per_report(config_->ingest.max_pairs_per_report);
    {
      MutexLock lock(mu_);
      queue_.push_back(std::move(response));
      // IngestOpened told the client where it stands: acknowledge changes.
      sent_ = service_.runs_.CurrentProgress(session_);
      phase_ = session_.closed ? Phase::kRepeatClose : Phase::kStreaming;
    }
    listener_ = service_.runs_.AddProgressListener(session_, [this] { ProgressChanged(); });
    Write();
    return Next::kRead;
  }

  // A batch, window or close of a streaming client.
  Next Message() {
    absl::StatusOr<ingest::Offered> offered;
    const auto resume = [this](const absl::StatusOr<ingest::Applied>& applied) {
      Resumed(applied);
    };
    switch (in_.body_case()) {
      case v1::IngestRequest::kBatch: {
        const v1::TimestampBatch& batch = in_.batch();
        offered = service_.runs_.OfferBatch(
            session_, batch.sequence(),
            [&](int64_t max_length, runs::RemoteWindow* out) {
              return DecodeBatch(batch, max_length, out);
            },
            resume);
        break;
      }
      case v1::IngestRequest::kWindow: {
        const v1::WindowReport& report = in_.window();
        offered = service_.runs_.OfferWindow(
            session_, report.sequence(),
            [&](const LatencyConfig& run, int64_t max_pairs) {
              absl::StatusOr<runs::RemoteWindow> w =
                  DecodeWindow(report, max_pairs, run.min_latency, run.max_latency);
              if (w.ok()) w->paced_client = session_.paced_client;
              return w;
            },
            resume);
        break;
      }
      case v1::IngestRequest::kClose: {
        absl::StatusOr<ingest::Applied> closed =
            service_.runs_.Close(session_, in_.close().last_sequence());
        if (!closed.ok()) {
          End(ToGrpcStatus(closed.status()));
          return Next::kStop;
        }
        // Acknowledged once durable (a checkpoint holds the client closed):
        // a daemon crash after it cannot wait for this client again.
        {
          MutexLock lock(mu_);
          phase_ = Phase::kClosing;
        }
        ProgressChanged();
        return Next::kStop;
      }
      case v1::IngestRequest::kOpen:
        End(Refused(Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                    "`open` may only be the first message of a stream"));
        return Next::kStop;
      case v1::IngestRequest::BODY_NOT_SET:
        End(Refused(Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                    "an IngestRequest with no body"));
        return Next::kStop;
    }
    if (!offered.ok()) {
      End(ToGrpcStatus(offered.status()));
      return Next::kStop;
    }
    if (offered->parked) {
      // Backpressure: Resumed reads on. A cancel that came before the
      // message parked found nothing to resume: resume it here. Either
      // way the reactor may be gone once this returns.
      if (stream_.IsCancelled()) service_.runs_.CancelParked(session_);
      return Next::kParked;
    }
    return Next::kRead;
  }

  // A parked message's outcome (the RoomNotifier's thread, or a cancel's).
  void Resumed(const absl::StatusOr<ingest::Applied>& applied) {
    if (!applied.ok()) End(ToGrpcStatus(applied.status()));  // the drain then stops
    service_.workers_.Post([this] { Drain(); });             // the inbox, on a worker
  }

  // A client that closed its part already reconnected (its close's
  // acknowledgement was lost): it may only repeat that close, acknowledged
  // once durable.
  Next RepeatClose() {
    const uint64_t last = session_.acked_sequence;
    if (!in_.has_close() || in_.close().last_sequence() != last) {
      End(Refused(Refusal::kMismatch, grpc::StatusCode::FAILED_PRECONDITION,
                  absl::StrCat("this client already closed its part of run ", session_.run_id,
                               " after message ", last, ": only that IngestClose may follow")));
      return Next::kStop;
    }
    {
      MutexLock lock(mu_);
      phase_ = Phase::kClosing;
      repeat_ = true;
    }
    ProgressChanged();
    return Next::kStop;
  }

  // The client's progress changed (any thread), or a close waits for it.
  void ProgressChanged() {
    MutexLock lock(mu_);
    if (final_) return;
    dirty_ = true;
    // More messages wait behind this one: the drain acknowledges them all
    // at once when its inbox runs empty (Write at its end).
    if (draining_ && !inbox_.empty() && phase_ == Phase::kStreaming) return;
    if (phase_ == Phase::kClosing && service_.runs_.CloseDurable(session_)) {
      final_ = grpc::Status::OK;  // after the last acknowledgement
      if (repeat_) {
        v1::IngestResponse response;
        v1::IngestAck* ack = response.mutable_ack();
        ack->set_acked_sequence(session_.acked_sequence);
        ack->set_durable_sequence(session_.acked_sequence);
        ack->set_duplicates(service_.runs_.CurrentProgress(session_).duplicates);
        queue_.push_back(std::move(response));
        dirty_ = false;
      }
    }
    lock.Unlock();
    Write();
  }

  // Starts the next write (or the Finish) when none is in flight; with
  // release_hold, a drain that is done lets go of its hold first.
  void Write(bool release_hold = false) {
    std::optional<grpc::Status> finish;
    {
      MutexLock lock(mu_);
      if (release_hold) --holds_;
      if (writing_ || finished_) return;
      if (!broken_ && NextWriteLocked()) {
        bool own_buffer = false;
        if (grpc::Status s = grpc::SerializationTraits<v1::IngestResponse>::Serialize(
                out_, &out_bytes_, &own_buffer);
            !s.ok()) {
          finished_ = true;  // cannot happen for a message this process built
          finish = s;
        } else {
          writing_ = true;
        }
      } else if (final_ && holds_ == 0) {
        finished_ = true;
        finish = *final_;
      } else {
        return;
      }
    }
    if (finish) {
      Finish(*finish);
    } else {
      StartWrite(&out_bytes_);  // this write's alone until OnWriteDone
    }
  }

  // Fills out_ with what to write next: a queued answer, else an
  // acknowledgement if the progress changed. False: nothing.
  bool NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!queue_.empty()) {
      out_ = std::move(queue_.front());
      queue_.pop_front();
      return true;
    }
    if (!dirty_ || phase_ == Phase::kOpening || repeat_) return false;
    dirty_ = false;
    const ingest::Progress now = service_.runs_.CurrentProgress(session_);
    if (now == sent_) return false;
    out_.Clear();
    v1::IngestAck* ack = out_.mutable_ack();
    ack->set_acked_sequence(now.applied);
    ack->set_duplicates(now.duplicates);
    ack->set_durable_sequence(now.durable);
    sent_ = now;
    return true;
  }

  // The client stopped sending, or the stream was cancelled.
  grpc::Status InputEnded() {
    if (phase_ == Phase::kOpening) {
      return Refused(Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                     "the stream ended before its IngestOpen");
    }
    if (phase_ == Phase::kRepeatClose) return grpc::Status::CANCELLED;
    if (service_.runs_.Superseded(session_)) {
      return Refused(Refusal::kSuperseded, grpc::StatusCode::ABORTED,
                     "a newer stream of this client took over");
    }
    if (service_.runs_.RunStopped(session_)) {
      return grpc::Status(grpc::StatusCode::ABORTED, "the run was stopped");
    }
    if (!service_.runs_.accepting()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "perld is shutting down");
    }
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the stream ended without an IngestClose: the client counts as gone "
                        "unless it reconnects within ingest.clientTimeoutMs");
  }

  // Ends the stream with `status` once what is queued is written.
  void End(const grpc::Status& status) {
    {
      MutexLock lock(mu_);
      if (final_) return;
      final_ = status;
      queue_.clear();  // an error ends the stream now
      dirty_ = false;
    }
    Write();
  }

  IngestService& service_;
  GrpcIngestStream stream_;  // the call, for the domain (takeover, StopRun)
  const std::shared_ptr<const config::DaemonConfig> config_;  // one read per stream
  const size_t max_bytes_;
  int64_t open_streams_ = 0;
  // Read ahead while the inbox holds fewer messages and bytes than these:
  // a stream holds at most the message it handles, kReadAheadBytes and one
  // more message (each within limits.maxMessageBytes) beyond what it used
  // to. Batches and windows are typically 10-20 KB: several of them.
  static constexpr size_t kReadAheadMessages = 4;
  static constexpr size_t kReadAheadBytes = 256 << 10;
  bool RoomAheadLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return inbox_.size() < kReadAheadMessages && inbox_bytes_ < kReadAheadBytes;
  }
  // The stream is ending (an error, or the last answer) or its client
  // closed: nothing more is read or handled.
  bool StoppedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return final_.has_value() || phase_ == Phase::kClosing;
  }

  grpc::ByteBuffer in_bytes_;  // the read target (one read at a time)
  grpc::ByteBuffer work_;      // the message the drain handles (only the drain)
  v1::IngestRequest in_;       // work_ parsed, on a worker
  ingest::RunTable::Session session_;
  uint64_t listener_ = 0;

  Mutex mu_;  // the writing state below
  // Not ABSL_GUARDED_BY: only a drain (one at a time) writes it, under mu_,
  // and reads it without; the writing path and OnReadDone read it under mu_.
  Phase phase_ = Phase::kOpening;
  std::deque<v1::IngestResponse> queue_ ABSL_GUARDED_BY(mu_);  // answers to write before any ack
  v1::IngestResponse out_ ABSL_GUARDED_BY(mu_);                // the write in flight
  ingest::Progress sent_ ABSL_GUARDED_BY(mu_);                 // what the acknowledgements said
  std::optional<grpc::Status> final_
      ABSL_GUARDED_BY(mu_);                  // set: finish once nothing is left to write
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;  // the progress may have changed
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called
  bool broken_ ABSL_GUARDED_BY(mu_) = false;    // a write failed
  bool repeat_ ABSL_GUARDED_BY(mu_) = false;    // a closed client repeating its close
  int holds_ ABSL_GUARDED_BY(mu_) = 0;          // drains not done (on a worker, parked): no Finish
  std::deque<grpc::ByteBuffer> inbox_ ABSL_GUARDED_BY(mu_);  // read, not handled yet
  size_t inbox_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;      // a read is pending
  bool draining_ ABSL_GUARDED_BY(mu_) = false;     // a drain runs or waits for its parked message
  bool input_ended_ ABSL_GUARDED_BY(mu_) = false;  // the last read failed: end after the inbox
  // The write in flight, serialized under mu_ and then owned by that write
  // (writing_) until OnWriteDone: not guarded.
  grpc::ByteBuffer out_bytes_;
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* IngestService::Stream(
    grpc::CallbackServerContext* context) {
  return new Reactor(*this, context);
}

}  // namespace perld::service
