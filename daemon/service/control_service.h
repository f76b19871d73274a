// ControlService: perld.v1.Control on gRPC's callback API -- start an
// in-process PerlBench run, stop a run of any source (a bench through
// BenchJobs; an ingest or SBP run through the ingest RunTable, which cancels
// its streams). Validation happens here (the request's caps: request_limits.h,
// counted as perld_runs_refused_total{reason="input_limit"}) and in
// BenchJobs; a run is never created half-configured.
//
// StartBench and StopRun answer on the gRPC thread that delivered the
// request. StopRun{wait} does not hold it while the run drains: a reactor
// (StopWait) subscribes to the run in the registry and finishes once
// RunManager::WaitEnded holds (the manager notifies the run's subscribers
// then), with the run as it ended; a cancelled call finishes CANCELLED.
//
// Threads: gRPC's callback threads run the handlers and reactions;
// registry notifications arrive on the run manager's dispatcher thread
// (they only arm a gRPC alarm).
#pragma once

#include "daemon/config/current_config.h"
#include "daemon/ingest/run_table.h"
#include "daemon/jobs/bench_jobs.h"
#include "daemon/runs/run_manager.h"
#include "daemon/runs/run_registry.h"
#include "daemon/service/call_auth.h"
#include "perld/v1/perld.grpc.pb.h"

namespace perld::service {

class ControlService final : public v1::Control::CallbackService {
 public:
  // Every call needs Access::kWrite from `auth`. REQUIRES: everything
  // passed outlives every call (the gRPC server's Shutdown waits for them).
  ControlService(runs::RunManager& manager, jobs::BenchJobs& jobs, ingest::RunTable& ingest,
                 const config::CurrentConfig& config, const CallAuth& auth)
      : manager_(manager), jobs_(jobs), ingest_(ingest), config_(config), auth_(auth) {}

  grpc::ServerUnaryReactor* StartBench(grpc::CallbackServerContext* context,
                                       const v1::StartBenchRequest* request,
                                       v1::StartBenchResponse* response) override;
  grpc::ServerUnaryReactor* StopRun(grpc::CallbackServerContext* context,
                                    const v1::StopRunRequest* request,
                                    v1::StopRunResponse* response) override;

 private:
  class StopWait;

  grpc::Status DoStartBench(const v1::StartBenchRequest& request, v1::StartBenchResponse* response);

  runs::RunManager& manager_;
  jobs::BenchJobs& jobs_;
  ingest::RunTable& ingest_;
  const config::CurrentConfig& config_;
  const CallAuth& auth_;
};

}  // namespace perld::service
