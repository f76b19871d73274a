#include "daemon/service/control_service.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/run_proto.h"

namespace perld::service {

grpc::Status ControlService::StartBench(grpc::ServerContext* context,
                                        const v1::StartBenchRequest* request,
                                        v1::StartBenchResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kWrite); !denied.ok()) return denied;
  int64_t interval_ms = 0;
  absl::StatusOr<bench::BenchOptions> options =
      BenchOptionsFromProto(request->options(), *config_.Get(), &interval_ms);
  if (!options.ok()) return ToGrpcStatus(options.status());
  if (request->name().size() > 256) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name: at most 256 bytes");
  }
  std::map<std::string, std::string> labels(request->labels().begin(), request->labels().end());
  absl::StatusOr<runs::RunInfo> info =
      jobs_.Start(*options, request->name(), std::move(labels), interval_ms);
  if (!info.ok()) return ToGrpcStatus(info.status());
  response->set_run_id(info->id);
  ToProto(*info, response->mutable_run());
  return grpc::Status::OK;
}

grpc::Status ControlService::StopRun(grpc::ServerContext* context,
                                     const v1::StopRunRequest* request,
                                     v1::StopRunResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kWrite); !denied.ok()) return denied;
  absl::StatusOr<runs::RunId> id = manager_.registry().Resolve(request->run());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<runs::RunInfo> info = manager_.registry().Info(*id);
  if (!info.ok()) return ToGrpcStatus(info.status());
  if (info->state == runs::RunState::kRunning) {
    // Remote runs (perld.v1.Ingest and SBK's SBP) are IngestRuns'; benches are BenchJobs'.
    absl::Status s =
        info->spec.source == runs::RunSource::kBench ? jobs_.Stop(*id) : ingest_.Stop(*id);
    if (!s.ok()) return ToGrpcStatus(s);
    if (request->wait()) {
      while (!manager_.WaitEnded(*id, absl::Milliseconds(200))) {
        if (context->IsCancelled()) return grpc::Status::CANCELLED;
      }
    }
    info = manager_.registry().Info(*id);
    if (!info.ok()) return ToGrpcStatus(info.status());
  }
  ToProto(*info, response->mutable_run());
  return grpc::Status::OK;
}

}  // namespace perld::service
