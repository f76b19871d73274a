#include "daemon/service/sbp_service.h"

#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "daemon/log/log.h"
#include "daemon/service/grpc_ingest_stream.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/ingest_codec.h"
#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

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

// The ingest open of SBP client `client` for the configured run.
v1::IngestOpen OpenFor(const config::DaemonConfig& c, int64_t client, const std::string& peer) {
  v1::IngestOpen open;
  open.set_run_name(RunName(c));
  (*open.mutable_labels())["class"] = c.sbp.storage_name;
  (*open.mutable_labels())["action"] = ActionName(c.sbp.action);
  open.set_time_unit(ToProto(c.latency.time_unit));
  open.set_client_id(absl::StrCat("sbp-", client));
  open.set_client_name(absl::StrCat("SBK client ", client, " (", peer, ")"));
  open.set_mode(v1::IngestOpen::MODE_WINDOWS);
  return open;
}

// Leaves the run when the stream handler returns, however it returns.
class Joined {
 public:
  Joined(IngestRuns& runs, IngestRuns::Session session)
      : runs_(runs), session_(std::move(session)) {}
  ~Joined() { runs_.Leave(session_); }
  Joined(const Joined&) = delete;
  Joined& operator=(const Joined&) = delete;
  IngestRuns::Session& session() { return session_; }

 private:
  IngestRuns& runs_;
  IngestRuns::Session session_;
};

}  // namespace

namespace {

// A unary method `/Service/<name>` served by `handler`.
template <typename Request, typename Response>
grpc::internal::RpcServiceMethod* Unary(const char* name, SbpService* service,
                                        grpc::Status (SbpService::*handler)(grpc::ServerContext*,
                                                                            const Request*,
                                                                            Response*)) {
  return new grpc::internal::RpcServiceMethod(
      name, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<
          SbpService, Request, Response, grpc::protobuf::MessageLite, grpc::protobuf::MessageLite>(
          [handler](SbpService* s, grpc::ServerContext* context, const Request* request,
                    Response* response) { return (s->*handler)(context, request, response); },
          service));
}

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

SbpService::SbpService(IngestRuns& runs, const CurrentConfig& config, const CallAuth& auth)
    : runs_(runs), config_(config), auth_(auth) {
  // The order and names of SBK's sbp.proto; the paths gRPC routes by.
  AddMethod(Unary("/Service/getVersion", this, &SbpService::getVersion));
  AddMethod(Unary("/Service/isVersionSupported", this, &SbpService::isVersionSupported));
  AddMethod(Unary("/Service/getConfig", this, &SbpService::getConfig));
  AddMethod(Unary("/Service/registerClient", this, &SbpService::registerClient));
  AddMethod(new grpc::internal::RpcServiceMethod(
      "/Service/streamLatencies", grpc::internal::RpcMethod::CLIENT_STREAMING,
      new grpc::internal::ClientStreamingHandler<SbpService, ::MessageLatenciesRecord,
                                                 google::protobuf::Empty>(
          [](SbpService* s, grpc::ServerContext* context,
             grpc::ServerReader<::MessageLatenciesRecord>* reader,
             google::protobuf::Empty* response) {
            return s->streamLatencies(context, reader, response);
          },
          this)));
  AddMethod(Unary("/Service/reportClientFailure", this, &SbpService::reportClientFailure));
  AddMethod(Unary("/Service/closeClient", this, &SbpService::closeClient));
}

grpc::Status SbpService::getVersion(grpc::ServerContext* context, const google::protobuf::Empty*,
                                    ::Version* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) return denied;
  response->set_major(kMajor);
  response->set_minor(kMinor);
  return grpc::Status::OK;
}

grpc::Status SbpService::isVersionSupported(grpc::ServerContext* context, const ::Version* request,
                                            google::protobuf::BoolValue* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) return denied;
  response->set_value(request->major() == kMajor);
  return grpc::Status::OK;
}

grpc::Status SbpService::getConfig(grpc::ServerContext* context, const google::protobuf::Empty*,
                                   ::Config* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) return denied;
  const std::shared_ptr<const config::DaemonConfig> c = config_.Get();
  response->set_storagename(c->sbp.storage_name);
  response->set_action(static_cast<::EnumAction>(c->sbp.action));
  response->set_timeunit(ToSbp(c->latency.time_unit));
  response->set_minlatency(c->latency.min_latency);
  response->set_maxlatency(c->latency.max_latency);
  response->set_iswriterequests(true);
  response->set_isreadrequests(true);
  response->set_maxrecordsizebytes(c->sbp.max_record_size_mb << 20);
  return grpc::Status::OK;
}

grpc::Status SbpService::registerClient(grpc::ServerContext* context, const ::Config* request,
                                        ::ClientID* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) return denied;
  const std::shared_ptr<const config::DaemonConfig> c = config_.Get();
  if (!runs_.accepting()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "perld is shutting down");
  }
  if (absl::AsciiStrToLower(request->storagename()) != absl::AsciiStrToLower(c->sbp.storage_name) ||
      request->action() != static_cast<::EnumAction>(c->sbp.action) ||
      request->timeunit() != ToSbp(c->latency.time_unit)) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("this perld aggregates storage '", c->sbp.storage_name, "', action ",
                     ActionName(c->sbp.action), ", time unit ", TimeUnitName(c->latency.time_unit),
                     " (sbp.storageName, sbp.action, timeUnit); the client sent '",
                     request->storagename(), "', ", ::EnumAction_Name(request->action()), ", ",
                     ::EnumTimeUnit_Name(request->timeunit())));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(registered_.size()) >= c->sbp.max_connections) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("sbp.maxConnections: ", c->sbp.max_connections,
                                     " SBP clients are connected already"));
  }
  const int64_t id = next_id_++;
  // The client joins the run now (and detaches until its stream comes), so
  // the run does not end between one client's close and the next one's
  // stream; a client that never streams counts as gone after
  // ingest.clientTimeoutMs, as a vanished ingest client.
  absl::StatusOr<IngestRuns::Session> joined =
      runs_.Join(OpenFor(*c, id, context->peer()), nullptr, runs::RunSource::kSbp);
  if (!joined.ok()) return ToGrpcStatus(joined.status());
  runs_.Leave(*joined);
  registered_[id] = false;
  response->set_id(id);
  log::Info("sbp: client ", id, " registered (", request->storagename(), ", ",
            ::EnumAction_Name(request->action()), ")");
  return grpc::Status::OK;
}

grpc::Status SbpService::streamLatencies(grpc::ServerContext* context,
                                         grpc::ServerReader<::MessageLatenciesRecord>* reader,
                                         google::protobuf::Empty*) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) return denied;
  const std::shared_ptr<const config::DaemonConfig> c = config_.Get();
  ::MessageLatenciesRecord record;
  if (!reader->Read(&record)) return grpc::Status::OK;  // an empty stream: nothing to apply
  const int64_t client = record.clientid();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = registered_.find(client);
    if (it == registered_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("client id ", client, " is not registered"));
    }
    if (it->second) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("client ", client, " has streamed already"));
    }
    it->second = true;
  }
  GrpcIngestStream stream(context);
  absl::StatusOr<IngestRuns::Session> session =
      runs_.Join(OpenFor(*c, client, context->peer()), &stream, runs::RunSource::kSbp);
  if (!session.ok()) return ToGrpcStatus(session.status());
  Joined joined(runs_, *std::move(session));

  int64_t expected = 1;
  do {
    if (record.clientid() != client) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("a stream carries one client: record ", expected,
                                       " names client ", record.clientid(), ", not ", client));
    }
    if (record.sequencenumber() != expected) {
      return grpc::Status(
          grpc::StatusCode::DATA_LOSS,
          absl::StrCat("client ", client, ": sequence number ", record.sequencenumber(), " where ",
                       expected, " was expected (records start at 1 and rise by 1)"));
    }
    absl::StatusOr<IngestRuns::Applied> applied = runs_.ApplyWindow(
        joined.session(), static_cast<uint64_t>(record.sequencenumber()),
        [&](const LatencyConfig& run, int64_t max_pairs) {
          return SbpWindow(record, run, max_pairs);
        },
        stream);
    if (!applied.ok()) return ToGrpcStatus(applied.status());
    ++expected;
  } while (reader->Read(&record));
  if (context->IsCancelled()) return grpc::Status::CANCELLED;
  // The stream's end is the client's end in the run (SBK closes it next).
  absl::StatusOr<IngestRuns::Applied> closed =
      runs_.Close(joined.session(), static_cast<uint64_t>(expected - 1));
  if (!closed.ok()) return ToGrpcStatus(closed.status());
  return grpc::Status::OK;
}

grpc::Status SbpService::reportClientFailure(grpc::ServerContext* context,
                                             const ::ClientFailure* request,
                                             google::protobuf::Empty*) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) return denied;
  failures_.fetch_add(1, std::memory_order_relaxed);
  log::Warning("sbp: client ", request->clientid(), " reported a failure in ", request->component(),
               ": ", request->message());
  return grpc::Status::OK;
}

grpc::Status SbpService::closeClient(grpc::ServerContext* context, const ::ClientID* request,
                                     google::protobuf::Empty*) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kSbp); !denied.ok()) return denied;
  std::lock_guard<std::mutex> lock(mu_);
  if (registered_.erase(request->id()) == 0) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("client id ", request->id(), " is not registered"));
  }
  return grpc::Status::OK;
}

}  // namespace perld::service
