#include "daemon/service/control_service.h"

#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/run_proto.h"

namespace perld::service {

grpc::Status ControlService::StartBench(grpc::ServerContext* context,
                                        const v1::StartBenchRequest* request,
                                        v1::StartBenchResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kWrite); !denied.ok()) return denied;
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  if (absl::Status s = CheckStartBench(*request, config->limits); !s.ok()) {
    manager_.CountRefusal(runs::RunRefusal::kInputLimit);
    return ToGrpcStatus(s);
  }
  int64_t interval_ms = 0;
  absl::StatusOr<bench::BenchOptions> options =
      BenchOptionsFromProto(request->options(), *config, &interval_ms);
  if (!options.ok()) return ToGrpcStatus(options.status());
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
    // Remote runs (perld.v1.Ingest and SBK's SBP) are the RunTable's; benches are BenchJobs'.
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
