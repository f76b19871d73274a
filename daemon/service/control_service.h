// ControlService: perld.v1.Control -- start an in-process PerlBench run,
// stop a run of any source (a bench through BenchJobs; an ingest or SBP run
// through the ingest RunTable, which cancels its streams). Validation happens here
// (the request's caps: request_limits.h, counted as
// perld_runs_refused_total{reason="input_limit"}) and in BenchJobs; a run is
// never created half-configured.
//
// Threads: gRPC's sync server threads, concurrently.
#pragma once

#include "daemon/ingest/run_table.h"
#include "daemon/runs/run_registry.h"
#include "daemon/service/bench_jobs.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/current_config.h"
#include "perld/v1/perld.grpc.pb.h"

namespace perld::service {

class ControlService final : public v1::Control::Service {
 public:
  // Every call needs Access::kWrite from `auth`.
  ControlService(runs::RunManager& manager, BenchJobs& jobs, ingest::RunTable& ingest,
                 const CurrentConfig& config, const CallAuth& auth)
      : manager_(manager), jobs_(jobs), ingest_(ingest), config_(config), auth_(auth) {}

  grpc::Status StartBench(grpc::ServerContext* context, const v1::StartBenchRequest* request,
                          v1::StartBenchResponse* response) override;
  grpc::Status StopRun(grpc::ServerContext* context, const v1::StopRunRequest* request,
                       v1::StopRunResponse* response) override;

 private:
  runs::RunManager& manager_;
  BenchJobs& jobs_;
  ingest::RunTable& ingest_;
  const CurrentConfig& config_;
  const CallAuth& auth_;
};

}  // namespace perld::service
