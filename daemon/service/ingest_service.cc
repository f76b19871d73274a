#include "daemon/service/ingest_service.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/service/grpc_ingest_stream.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

using Refusal = IngestStats::Refusal;

// Counts the stream as open for its lifetime.
class OpenStream {
 public:
  explicit OpenStream(IngestStats& stats) : stats_(stats) {
    count_ = stats_.streams_open.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  ~OpenStream() { stats_.streams_open.fetch_sub(1, std::memory_order_relaxed); }
  OpenStream(const OpenStream&) = delete;
  OpenStream& operator=(const OpenStream&) = delete;
  int64_t count() const { return count_; }

 private:
  IngestStats& stats_;
  int64_t count_ = 0;
};

// Leaves the run when the handler returns, however it returns.
class Attached {
 public:
  Attached(IngestRuns& runs, IngestRuns::Session& session) : runs_(runs), session_(session) {}
  ~Attached() { runs_.Leave(session_); }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

 private:
  IngestRuns& runs_;
  IngestRuns::Session& session_;
};

// Writes the stream's acks from its own thread: they follow the client's
// progress (applied, and durable as checkpoints commit), so durability
// reaches a client that is waiting without sending. The only writer after
// IngestOpened; stopped and joined before the handler returns.
class AckWriter {
 public:
  AckWriter(const IngestRuns& runs, const IngestRuns::Session& session,
            grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream)
      : runs_(runs), session_(session), stream_(stream), thread_([this] { Loop(); }) {}
  ~AckWriter() { Stop(); }
  AckWriter(const AckWriter&) = delete;
  AckWriter& operator=(const AckWriter&) = delete;

  // Writes what is left to acknowledge, then ends; false when a write failed.
  bool Stop() {
    if (thread_.joinable()) {
      stop_.store(true, std::memory_order_relaxed);
      runs_.WakeProgress(session_);
      thread_.join();
    }
    return !failed_;
  }

 private:
  void Loop() {
    // IngestOpened told the client where it stands: report changes only.
    IngestRuns::Progress sent = runs_.CurrentProgress(session_);
    v1::IngestResponse response;
    for (;;) {
      const IngestRuns::Progress now =
          runs_.WaitProgress(session_, sent, stop_, std::chrono::milliseconds(500));
      if (now != sent) {
        response.Clear();
        v1::IngestAck* ack = response.mutable_ack();
        ack->set_acked_sequence(now.applied);
        ack->set_duplicates(now.duplicates);
        ack->set_durable_sequence(now.durable);
        if (!stream_->Write(response)) {
          failed_ = true;
          return;
        }
        sent = now;
      }
      if (stop_.load(std::memory_order_relaxed)) return;
    }
  }

  const IngestRuns& runs_;
  const IngestRuns::Session& session_;
  grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* const stream_;
  std::atomic<bool> stop_{false};
  bool failed_ = false;  // the writer thread's until joined
  std::thread thread_;   // last: starts after every member above exists
};

grpc::Status Refused(IngestStats& stats, Refusal r, grpc::StatusCode code,
                     const std::string& message) {
  stats.Refused(r);
  return grpc::Status(code, message);
}

}  // namespace

grpc::Status IngestService::Stream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kWrite); !denied.ok()) return denied;
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  OpenStream open_stream(stats_);
  if (open_stream.count() > config->ingest.max_streams) {
    return Refused(stats_, Refusal::kStreams, grpc::StatusCode::RESOURCE_EXHAUSTED,
                   absl::StrCat("ingest.maxStreams: ", config->ingest.max_streams,
                                " ingest streams are open already"));
  }
  if (!runs_.accepting()) {
    return Refused(stats_, Refusal::kShutdown, grpc::StatusCode::UNAVAILABLE,
                   "perld is shutting down: no new ingest streams");
  }
  const size_t max_bytes = static_cast<size_t>(config->limits.max_message_bytes);
  v1::IngestRequest request;
  if (!stream->Read(&request)) {
    return Refused(stats_, Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                   "the stream ended before its IngestOpen");
  }
  if (!request.has_open()) {
    return Refused(stats_, Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                   "the first message of an ingest stream must be `open`");
  }
  GrpcIngestStream ingest_stream(context);
  absl::StatusOr<IngestRuns::Session> joined = runs_.Join(request.open(), &ingest_stream);
  if (!joined.ok()) return ToGrpcStatus(joined.status());
  IngestRuns::Session session = *std::move(joined);
  Attached attached(runs_, session);

  v1::IngestResponse response;
  v1::IngestOpened* opened = response.mutable_opened();
  opened->set_run_id(session.run_id);
  if (absl::StatusOr<runs::RunInfo> info = runs_.Info(session); info.ok()) {
    ToProto(*info, opened->mutable_run());
  }
  opened->set_created(session.created);
  opened->set_acked_sequence(session.acked_sequence);
  opened->set_max_message_bytes(config->limits.max_message_bytes);
  opened->set_max_batch_length(config->ingest.max_batch_length);
  opened->set_max_pairs_per_report(config->ingest.max_pairs_per_report);
  if (!stream->Write(response)) return grpc::Status::CANCELLED;
  if (session.closed) return RepeatClose(session, stream, context);

  AckWriter acks(runs_, session, stream);
  while (stream->Read(&request)) {
    if (request.ByteSizeLong() > max_bytes) {
      return Refused(stats_, Refusal::kMessageSize, grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("limits.maxMessageBytes: a message of ", request.ByteSizeLong(),
                                  " bytes, the limit is ", max_bytes));
    }
    absl::StatusOr<IngestRuns::Applied> applied;
    bool closing = false;
    switch (request.body_case()) {
      case v1::IngestRequest::kBatch:
        applied = runs_.ApplyBatch(session, request.batch(), ingest_stream);
        break;
      case v1::IngestRequest::kWindow:
        applied = runs_.ApplyWindow(session, request.window(), ingest_stream);
        break;
      case v1::IngestRequest::kClose:
        applied = runs_.Close(session, request.close().last_sequence());
        closing = true;
        break;
      case v1::IngestRequest::kOpen:
        return Refused(stats_, Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                       "`open` may only be the first message of a stream");
      case v1::IngestRequest::BODY_NOT_SET:
        return Refused(stats_, Refusal::kMalformed, grpc::StatusCode::INVALID_ARGUMENT,
                       "an IngestRequest with no body");
    }
    if (!applied.ok()) return ToGrpcStatus(applied.status());
    if (closing) {
      // The close is acknowledged once it is durable (a checkpoint holds
      // the client closed): a daemon crash after it cannot wait for this
      // client again.
      IngestRuns::Progress seen;
      const std::atomic<bool> never{false};
      do {
        if (context->IsCancelled()) return grpc::Status::CANCELLED;
        seen = runs_.WaitProgress(session, seen, never, std::chrono::milliseconds(100));
      } while (!seen.close_durable);
      return acks.Stop() ? grpc::Status::OK : grpc::Status::CANCELLED;
    }
  }
  // The client stopped sending without a close, or the stream was cancelled.
  if (runs_.Superseded(session)) {
    return Refused(stats_, Refusal::kSuperseded, grpc::StatusCode::ABORTED,
                   "a newer stream of this client took over");
  }
  if (runs_.RunStopped(session)) {
    return grpc::Status(grpc::StatusCode::ABORTED, "the run was stopped");
  }
  if (!runs_.accepting()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "perld is shutting down");
  }
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "the stream ended without an IngestClose: the client counts as gone unless "
                      "it reconnects within ingest.clientTimeoutMs");
}

grpc::Status IngestService::RepeatClose(
    const IngestRuns::Session& session,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream,
    grpc::ServerContext* context) {
  const uint64_t last = session.acked_sequence;
  v1::IngestRequest request;
  if (!stream->Read(&request)) return grpc::Status::CANCELLED;
  if (!request.has_close() || request.close().last_sequence() != last) {
    return Refused(stats_, Refusal::kMismatch, grpc::StatusCode::FAILED_PRECONDITION,
                   absl::StrCat("this client already closed its part of run ", session.run_id,
                                " after message ", last, ": only that IngestClose may follow"));
  }
  while (!runs_.CloseDurable(session)) {
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  v1::IngestResponse response;
  v1::IngestAck* ack = response.mutable_ack();
  ack->set_acked_sequence(last);
  ack->set_durable_sequence(last);
  ack->set_duplicates(runs_.CurrentProgress(session).duplicates);
  return stream->Write(response) ? grpc::Status::OK : grpc::Status::CANCELLED;
}

}  // namespace perld::service
