#include "daemon/service/sbp_service.h"

#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/service/grpc_ingest_stream.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/ingest_codec.h"
#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

using Refusal = ingest::IngestStats::Refusal;

constexpr absl::string_view kPrefix = "/Service/";
constexpr const char* kStreamLatencies = "/Service/streamLatencies";
constexpr absl::string_view kClientPrefix = "sbp-";  // a client's id in its run

// SBK's EnumAction names, in its numbering (config::SbpAction has the same order).
const char* const kActionNames[] = {"Writing",           "Reading",      "Write_Reading",
                                    "Write_OnlyReading", "Read_Writing", "Read_OnlyWriting"};

::EnumTimeUnit ToSbp(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMs:
      return ::ms;
    case TimeUnit::kUs:
      return ::mcs;
    case TimeUnit::kNs:
      return ::ns;
  }
  return ::ms;
}

const char* ActionName(config::SbpAction action) { return kActionNames[static_cast<int>(action)]; }

std::string RunName(const config::DaemonConfig& c) {
  return absl::StrCat("sbp:", c.sbp.storage_name, ":", ActionName(c.sbp.action));
}

std::string ClientId(int64_t client) { return absl::StrCat(kClientPrefix, client); }

// The ingest open of SBP client `client` for the configured run.
ingest::OpenRequest OpenFor(const config::DaemonConfig& c, int64_t client,
                            const std::string& peer) {
  ingest::OpenRequest open;
  open.run_name = RunName(c);
  open.labels["class"] = c.sbp.storage_name;
  open.labels["action"] = ActionName(c.sbp.action);
  open.time_unit = c.latency.time_unit;
  open.client_id = ClientId(client);
  open.client_name = absl::StrCat("SBK client ", client, " (", peer, ")");
  open.mode = ingest::ClientMode::kWindows;
  return open;
}

// Who is calling: the connection and the authorization header it sent.
SbpSlots::Owner OwnerOf(const grpc::ServerContextBase& context) {
  std::string_view authorization;
  const auto& metadata = context.client_metadata();
  if (const auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  return SbpSlots::OwnerOf(context.peer(), authorization);
}

bool Parse(grpc::ByteBuffer* bytes, google::protobuf::MessageLite* message) {
  grpc::ProtoBufferReader reader(bytes);
  return message->ParseFromZeroCopyStream(&reader);
}

grpc::ByteBuffer Serialize(const google::protobuf::MessageLite& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// A call answered at once with `status` (unknown method, refused by auth).
class Refused final : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refused(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

absl::StatusOr<runs::RemoteWindow> SbpWindow(const ::MessageLatenciesRecord& r,
                                             const LatencyConfig& run, int64_t max_pairs) {
  const auto sequence = static_cast<uint64_t>(r.sequencenumber());
  if (r.latencyvalues_size() != r.latencycounts_size()) {
    return absl::InvalidArgumentError(absl::StrCat("latencyValues has ", r.latencyvalues_size(),
                                                   " entries, latencyCounts ",
                                                   r.latencycounts_size()));
  }
  if (absl::Status s = CheckPairs(sequence, r.latencyvalues_size(), max_pairs); !s.ok()) return s;
  runs::RemoteWindow w;
  std::vector<LatencyBucket>& buckets = w.buckets;
  buckets.reserve(static_cast<size_t>(r.latencyvalues_size()));
  for (int i = 0; i < r.latencyvalues_size(); ++i) {
    const uint64_t value = r.latencyvalues(i);
    const uint64_t count = r.latencycounts(i);
    if (count == 0) continue;
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("window ", sequence, ": latency ", value,
                                                     " or count ", count, " does not fit int64"));
    }
    buckets.push_back(LatencyBucket{static_cast<int64_t>(value), static_cast<int64_t>(count)});
  }
  std::sort(buckets.begin(), buckets.end(),
            [](const LatencyBucket& a, const LatencyBucket& b) { return a.latency < b.latency; });
  size_t kept = 0;  // a value listed twice: its counts add up
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (kept > 0 && buckets[kept - 1].latency == buckets[i].latency) {
      if (__builtin_add_overflow(buckets[kept - 1].count, buckets[i].count,
                                 &buckets[kept - 1].count)) {
        return absl::InvalidArgumentError(absl::StrCat("window ", sequence,
                                                       ": the counts of latency ",
                                                       buckets[i].latency, " overflow int64"));
      }
    } else {
      buckets[kept++] = buckets[i];
    }
  }
  buckets.resize(kept);
  LatencyCounters& c = w.counters;
  c.records = r.totalrecords();
  c.bytes = r.totalbytes();
  c.valid = r.validlatencyrecords();
  c.invalid = r.invalidlatencyrecords();
  c.lower_discard = r.lowerlatencydiscardrecords();
  c.higher_discard = r.higherlatencydiscardrecords();
  c.total_latency = r.totallatency();
  if (c.records > c.invalid) {  // a latency was seen
    c.min_latency = r.minlatency();
    c.max_latency = r.maxlatency();
  }
  if (absl::Status s = CheckWindow(sequence, w, run.min_latency, run.max_latency); !s.ok()) {
    return s;
  }
  return w;
}

// A unary `/Service/<name>` call: one request message, one answer.
class SbpService::UnaryCall final : public grpc::ServerGenericBidiReactor {
 public:
  UnaryCall(SbpService& service, grpc::GenericCallbackServerContext* context, const Unary& handler)
      : service_(service), context_(context), handler_(handler) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(context_->IsCancelled()
                 ? grpc::Status::CANCELLED
                 : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "a unary call ended without its request message"));
      return;
    }
    grpc::Status status = service_.CheckSize(request_, *service_.config_.Get());
    if (status.ok()) status = handler_(service_, context_, &request_, &response_);
    if (!status.ok()) {
      Finish(status);
      return;
    }
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  SbpService& service_;
  grpc::GenericCallbackServerContext* const context_;
  const Unary& handler_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

// streamLatencies: the client's records, one window each, into its run.
class SbpService::LatencyStream final : public grpc::ServerGenericBidiReactor {
 public:
  LatencyStream(SbpService& service, grpc::GenericCallbackServerContext* context)
      : service_(service),
        context_(context),
        config_(service.config_.Get()),
        owner_(OwnerOf(*context)) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      End(InputEnded());
      return;
    }
    bool parked = false;
    if (grpc::Status status = Apply(&parked); !status.ok()) {
      End(status);
      return;
    }
    if (parked) return;  // backpressure: Resumed reads on
    ++expected_;
    StartRead(&in_);
  }

  // A parked record was merged (or refused) at last: the domain's
  // RoomNotifier thread.
  void Resumed(const absl::StatusOr<ingest::Applied>& applied) {
    {
      MutexLock lock(mu_);
      parked_ = false;
      if (ended_) return;
    }
    if (!applied.ok()) {
      End(ToGrpcStatus(applied.status()));
      return;
    }
    ++expected_;
    StartRead(&in_);
  }

  // A parked record has no read pending to end the stream: end it here.
  void OnCancel() override {
    {
      MutexLock lock(mu_);
      if (!parked_) return;
    }
    End(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (session_) service_.runs_.Leave(*session_);  // End left already; kept for safety
    delete this;
  }

 private:
  // The record in `in_`; *parked when it waits for queue room.
  grpc::Status Apply(bool* parked) {
    if (grpc::Status s = service_.CheckSize(in_, *config_); !s.ok()) return s;
    if (!Parse(&in_, &record_)) {
      service_.stats_.Refused(Refusal::kMalformed);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("record ", expected_, " is not a MessageLatenciesRecord"));
    }
    if (!began_) {
      client_ = record_.clientid();
      absl::StatusOr<SbpSlots::Slot> slot = service_.slots_->BeginStream(client_, owner_);
      if (!slot.ok()) return ToGrpcStatus(slot.status());
      began_ = true;
      ingest::OpenRequest open = OpenFor(*config_, client_, context_->peer());
      open.must_exist = true;  // its registration joined the run: a stream never starts one
      absl::StatusOr<ingest::RunTable::Session> session =
          service_.runs_.Join(open, &stream_, runs::RunSource::kSbp);
      if (!session.ok()) return ToGrpcStatus(session.status());
      session_ = *std::move(session);
      run_id_ = session_->run_id;
    }
    if (record_.clientid() != client_) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("a stream carries one client: record ", expected_,
                                       " names client ", record_.clientid(), ", not ", client_));
    }
    if (record_.sequencenumber() != expected_) {
      return grpc::Status(
          grpc::StatusCode::DATA_LOSS,
          absl::StrCat("client ", client_, ": sequence number ", record_.sequencenumber(),
                       " where ", expected_, " was expected (records start at 1 and rise by 1)"));
    }
    absl::StatusOr<ingest::Offered> offered = service_.runs_.OfferWindow(
        *session_, static_cast<uint64_t>(record_.sequencenumber()),
        [&](const LatencyConfig& run, int64_t max_pairs) {
          return SbpWindow(record_, run, max_pairs);
        },
        [this](absl::StatusOr<ingest::Applied> applied) { Resumed(applied); });
    if (!offered.ok()) return ToGrpcStatus(offered.status());
    if (offered->parked) {
      MutexLock lock(mu_);
      parked_ = true;
      *parked = true;
    }
    return grpc::Status::OK;
  }

  // The client half-closed, or the call was cancelled.
  grpc::Status InputEnded() {
    if (context_->IsCancelled()) return grpc::Status::CANCELLED;
    if (!session_) return grpc::Status::OK;  // an empty stream: nothing to apply
    // The stream's end is the client's end in the run (SBK closes it next).
    absl::StatusOr<ingest::Applied> closed =
        service_.runs_.Close(*session_, static_cast<uint64_t>(expected_ - 1));
    if (!closed.ok()) return ToGrpcStatus(closed.status());
    closed_ = true;
    return grpc::Status::OK;
  }

  // Leaves the run before the client hears the stream's status. Once.
  void End(const grpc::Status& status) {
    {
      MutexLock lock(mu_);
      if (ended_) return;
      ended_ = true;
    }
    if (session_) {
      service_.runs_.Leave(*session_);
      session_.reset();
    }
    if (began_ && service_.slots_->EndStream(client_, closed_) && !closed_ && run_id_ != 0) {
      // closeClient came while the stream was open: its run need not wait.
      service_.runs_.Abandon(run_id_, ClientId(client_)).IgnoreError();
    }
    if (!status.ok()) {
      Finish(status);
      return;
    }
    out_ = Serialize(google::protobuf::Empty());
    StartWriteAndFinish(&out_, grpc::WriteOptions(), status);
  }

  SbpService& service_;
  grpc::GenericCallbackServerContext* const context_;
  GrpcIngestStream stream_{context_};                         // the call, for the RunTable
  const std::shared_ptr<const config::DaemonConfig> config_;  // one read per stream
  const SbpSlots::Owner owner_;
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
  ::MessageLatenciesRecord record_;
  int64_t client_ = 0;
  int64_t expected_ = 1;  // the next sequence number
  bool began_ = false;    // SbpSlots::BeginStream succeeded
  bool closed_ = false;   // the client closed its part of the run
  runs::RunId run_id_ = 0;
  std::optional<ingest::RunTable::Session> session_;
  Mutex mu_;                                  // parked_, ended_ (the reading path and the notifier)
  bool parked_ ABSL_GUARDED_BY(mu_) = false;  // a record waits for queue room: no read pending
  bool ended_ ABSL_GUARDED_BY(mu_) = false;   // End ran
};

template <typename Request, typename Response>
SbpService::Unary SbpService::Handler(grpc::Status (SbpService::*method)(
    grpc::GenericCallbackServerContext*, const Request&, Response*)) {
  return [method](SbpService& service, grpc::GenericCallbackServerContext* context,
                  grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes) {
    Request request;
    if (!Parse(request_bytes, &request)) {
      service.stats_.Refused(Refusal::kMalformed);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("the request is not a ", request.GetTypeName()));
    }
    Response response;
    grpc::Status status = (service.*method)(context, request, &response);
    if (status.ok()) *response_bytes = Serialize(response);
    return status;
  };
}

SbpService::SbpService(ingest::RunTable& runs, ingest::IngestStats& stats,
                       const config::CurrentConfig& config, const CallAuth& auth)
    : runs_(runs),
      stats_(stats),
      config_(config),
      auth_(auth),
      // The names of SBK's sbp.proto: the paths gRPC routes by.
      unary_({
          {"/Service/getVersion", Handler(&SbpService::GetVersion)},
          {"/Service/isVersionSupported", Handler(&SbpService::IsVersionSupported)},
          {"/Service/getConfig", Handler(&SbpService::GetConfig)},
          {"/Service/registerClient", Handler(&SbpService::RegisterClient)},
          {"/Service/reportClientFailure", Handler(&SbpService::ReportClientFailure)},
          {"/Service/closeClient", Handler(&SbpService::CloseClient)},
      }) {}

int64_t SbpService::MaxMessageBytes(const config::DaemonConfig& config) {
  return std::min<int64_t>(config.limits.max_message_bytes, config.sbp.max_record_size_mb << 20);
}

grpc::Status SbpService::CheckSize(const grpc::ByteBuffer& message,
                                   const config::DaemonConfig& config) {
  const int64_t max = MaxMessageBytes(config);
  const auto size = static_cast<int64_t>(message.Length());
  if (size <= max) return grpc::Status::OK;
  stats_.Refused(Refusal::kMessageSize);
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("limits.maxMessageBytes / sbp.maxRecordSizeMB: a message of ", size,
                   " bytes, the limit is ", max, " (getConfig's maxRecordSizeBytes)"));
}

grpc::ServerGenericBidiReactor* SbpService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  const std::string& method = context->method();
  const auto unary = unary_.find(method);
  const bool stream = method == kStreamLatencies;
  if (!stream && unary == unary_.end()) {
    return new Refused(grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        absl::StartsWith(method, kPrefix) ? "SBP 4.0 has no such method" : "unknown service"));
  }
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) {
    return new Refused(denied);
  }
  if (stream) return new LatencyStream(*this, context);
  return new UnaryCall(*this, context, unary->second);
}

ingest::RunTable::DepartureHook SbpService::DepartureHook() const {
  return [slots = slots_](const ingest::RunTable::Departure& d) {
    if (d.client_id.empty()) {
      slots->RunEnded(d.run_id);
      return;
    }
    int64_t id = 0;
    if (absl::StartsWith(d.client_id, kClientPrefix) &&
        absl::SimpleAtoi(absl::string_view(d.client_id).substr(kClientPrefix.size()), &id)) {
      slots->Gone(d.run_id, id);
    }
  };
}

grpc::Status SbpService::GetVersion(grpc::GenericCallbackServerContext*,
                                    const google::protobuf::Empty&, ::Version* response) {
  response->set_major(kMajor);
  response->set_minor(kMinor);
  return grpc::Status::OK;
}

grpc::Status SbpService::IsVersionSupported(grpc::GenericCallbackServerContext*,
                                            const ::Version& request,
                                            google::protobuf::BoolValue* response) {
  response->set_value(request.major() == kMajor);
  return grpc::Status::OK;
}

grpc::Status SbpService::GetConfig(grpc::GenericCallbackServerContext*,
                                   const google::protobuf::Empty&, ::Config* response) {
  const std::shared_ptr<const config::DaemonConfig> c = config_.Get();
  response->set_storagename(c->sbp.storage_name);
  response->set_action(static_cast<::EnumAction>(c->sbp.action));
  response->set_timeunit(ToSbp(c->latency.time_unit));
  response->set_minlatency(c->latency.min_latency);
  response->set_maxlatency(c->latency.max_latency);
  response->set_iswriterequests(true);
  response->set_isreadrequests(true);
  response->set_maxrecordsizebytes(MaxMessageBytes(*c));
  return grpc::Status::OK;
}

grpc::Status SbpService::RegisterClient(grpc::GenericCallbackServerContext* context,
                                        const ::Config& request, ::ClientID* response) {
  const std::shared_ptr<const config::DaemonConfig> c = config_.Get();
  if (!runs_.accepting()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "perld is shutting down");
  }
  if (absl::AsciiStrToLower(request.storagename()) != absl::AsciiStrToLower(c->sbp.storage_name) ||
      request.action() != static_cast<::EnumAction>(c->sbp.action) ||
      request.timeunit() != ToSbp(c->latency.time_unit)) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("this perld aggregates storage '", c->sbp.storage_name, "', action ",
                     ActionName(c->sbp.action), ", time unit ",
                     TimeUnitSymbol(c->latency.time_unit),
                     " (sbp.storageName, sbp.action, timeUnit); the client sent '",
                     request.storagename(), "', ", ::EnumAction_Name(request.action()), ", ",
                     ::EnumTimeUnit_Name(request.timeunit())));
  }
  const std::string peer = context->peer();
  // The client joins the run now (and detaches until its stream comes), so
  // the run does not end between one client's close and the next one's
  // stream; a client that never streams counts as gone after
  // ingest.clientTimeoutMs, as a vanished ingest client.
  absl::StatusOr<int64_t> id =
      slots_->Register(c->sbp.max_connections, OwnerOf(*context),
                       [&](int64_t client) -> absl::StatusOr<runs::RunId> {
                         absl::StatusOr<ingest::RunTable::Session> joined =
                             runs_.Join(OpenFor(*c, client, peer), nullptr, runs::RunSource::kSbp);
                         if (!joined.ok()) return joined.status();
                         const runs::RunId run = joined->run_id;
                         runs_.Leave(*joined);
                         return run;
                       });
  if (!id.ok()) return ToGrpcStatus(id.status());
  response->set_id(*id);
  log::Info("sbp: client ", *id, " registered (", request.storagename(), ", ",
            ::EnumAction_Name(request.action()), ", ", peer, ")");
  return grpc::Status::OK;
}

grpc::Status SbpService::ReportClientFailure(grpc::GenericCallbackServerContext* context,
                                             const ::ClientFailure& request,
                                             google::protobuf::Empty*) {
  absl::StatusOr<SbpSlots::Slot> slot = slots_->Find(request.clientid(), OwnerOf(*context));
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  failures_.fetch_add(1, std::memory_order_relaxed);
  log::Warning("sbp: client ", request.clientid(), " reported a failure in ", request.component(),
               ": ", request.message());
  return grpc::Status::OK;
}

grpc::Status SbpService::CloseClient(grpc::GenericCallbackServerContext* context,
                                     const ::ClientID& request, google::protobuf::Empty*) {
  absl::StatusOr<SbpSlots::Slot> slot = slots_->Close(request.id(), OwnerOf(*context));
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (slot->stage == SbpSlots::Stage::kRegistered || slot->stage == SbpSlots::Stage::kFailed) {
    // No stream closed the client in its run: it gives its part up now
    // instead of the run waiting ingest.clientTimeoutMs for it.
    if (absl::Status s = runs_.Abandon(slot->run_id, ClientId(request.id())); !s.ok()) {
      log::Debug("sbp: client ", request.id(), ": ", s.message());
    }
  }
  return grpc::Status::OK;
}

}  // namespace perld::service
