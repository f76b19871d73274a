#include "daemon/service/control_service.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/service/change_pump.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

grpc::ServerUnaryReactor* Finished(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

// StopRun{wait}: finishes once the run has ended (RunManager::WaitEnded),
// with the run as it ended. Its check runs as a ChangePump: at Start, on a
// registry change (through an alarm: the registry's writer must not run it)
// and at a cancel. gRPC calls OnDone after Finish; the subscription is reset
// before delete (it waits for an OnChange in progress).
class ControlService::StopWait final : public grpc::ServerUnaryReactor {
 public:
  StopWait(runs::RunManager& manager, runs::RunId id, v1::StopRunResponse* response)
      : manager_(manager), id_(id), response_(response) {}

  void Start() {
    subscription_ = manager_.registry().Subscribe(id_, [this] { pump_.Kick(); });
    Check();  // the creator owns the pump
  }

  void OnCancel() override {
    cancelled_ = true;
    if (pump_.Claim()) Check();
  }

  void OnDone() override {
    subscription_.reset();
    delete this;
  }

 private:
  // REQUIRES: the caller owns the pump.
  void Check() {
    for (;;) {
      pump_.BeginPass();
      // Finish last: OnDone may delete this as soon as it is called.
      if (cancelled_) {
        Finish(grpc::Status::CANCELLED);
        return;
      }
      if (manager_.WaitEnded(id_, absl::ZeroDuration())) {
        absl::StatusOr<runs::RunInfo> info = manager_.registry().Info(id_);
        if (!info.ok()) {
          Finish(ToGrpcStatus(info.status()));
          return;
        }
        ToProto(*info, response_->mutable_run());
        Finish(grpc::Status::OK);
        return;
      }
      if (pump_.Release()) return;
    }
  }

  runs::RunManager& manager_;
  const runs::RunId id_;
  v1::StopRunResponse* const response_;
  std::atomic<bool> cancelled_{false};
  ChangePump pump_{[this] { Check(); }};
  runs::RunRegistry::Subscription subscription_;  // reset by OnDone before delete
};

grpc::Status ControlService::DoStartBench(const v1::StartBenchRequest& request,
                                          v1::StartBenchResponse* response) {
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  if (absl::Status s = CheckStartBench(request, config->limits); !s.ok()) {
    manager_.CountRefusal(runs::RunRefusal::kInputLimit);
    return ToGrpcStatus(s);
  }
  int64_t interval_ms = 0;
  absl::StatusOr<bench::BenchOptions> options =
      BenchOptionsFromProto(request.options(), *config, &interval_ms);
  if (!options.ok()) return ToGrpcStatus(options.status());
  std::map<std::string, std::string> labels(request.labels().begin(), request.labels().end());
  absl::StatusOr<runs::RunInfo> info =
      jobs_.Start(*options, request.name(), std::move(labels), interval_ms,
                  request.slo().expression(), request.slo().abort_on_fail());
  if (!info.ok()) return ToGrpcStatus(info.status());
  response->set_run_id(info->id);
  ToProto(*info, response->mutable_run());
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* ControlService::StartBench(grpc::CallbackServerContext* context,
                                                     const v1::StartBenchRequest* request,
                                                     v1::StartBenchResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kWrite); !denied.ok()) {
    return Finished(context, denied);
  }
  return Finished(context, DoStartBench(*request, response));
}

grpc::ServerUnaryReactor* ControlService::StopRun(grpc::CallbackServerContext* context,
                                                  const v1::StopRunRequest* request,
                                                  v1::StopRunResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kWrite); !denied.ok()) {
    return Finished(context, denied);
  }
  absl::StatusOr<runs::RunId> id = manager_.registry().Resolve(request->run());
  if (!id.ok()) return Finished(context, ToGrpcStatus(id.status()));
  absl::StatusOr<runs::RunInfo> info = manager_.registry().Info(*id);
  if (!info.ok()) return Finished(context, ToGrpcStatus(info.status()));
  if (info->state == runs::RunState::kRunning) {
    // Remote runs (perld.v1.Ingest and SBK's SBP) are the RunTable's; benches are BenchJobs'.
    manager_.NoteStopRequested(*id);  // its end reason: stopped by request
    absl::Status s =
        info->spec.source == runs::RunSource::kBench ? jobs_.Stop(*id) : ingest_.Stop(*id);
    if (!s.ok()) return Finished(context, ToGrpcStatus(s));
    if (request->wait()) {
      auto* wait = new StopWait(manager_, *id, response);
      wait->Start();
      return wait;
    }
    info = manager_.registry().Info(*id);
    if (!info.ok()) return Finished(context, ToGrpcStatus(info.status()));
  }
  ToProto(*info, response->mutable_run());
  return Finished(context, grpc::Status::OK);
}

}  // namespace perld::service
