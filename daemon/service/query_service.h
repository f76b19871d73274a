// QueryService: perld.v1.Query over the RunRegistry. Every call reads
// published snapshots; none touches the recorder.
//
// WatchRun holds one server thread per watcher while its run lives (at most
// limits.maxWatchers at once: RESOURCE_EXHAUSTED beyond), waking at least
// every kWatchPollMs to notice cancellation and shutdown.
//
// Threads: gRPC's sync server threads, concurrently.
#pragma once

#include <atomic>
#include <cstdint>

#include "daemon/ingest/run_table.h"
#include "daemon/runs/run_registry.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/current_config.h"
#include "perld/v1/perld.grpc.pb.h"

namespace perld::service {

class QueryService final : public v1::Query::Service {
 public:
  static constexpr int64_t kWatchPollMs = 200;

  // `ingest_runs` answers GetClients (null: UNIMPLEMENTED).
  // Every call needs Access::kRead from `auth`.
  QueryService(const runs::RunRegistry& registry, const CurrentConfig& config, const CallAuth& auth,
               const ingest::RunTable* ingest_runs = nullptr)
      : registry_(registry), config_(config), auth_(auth), ingest_runs_(ingest_runs) {}

  // Ends every open watch at its next wake-up (shutdown after the drain).
  void CancelWatches() { cancel_watches_.store(true, std::memory_order_relaxed); }
  int watchers() const { return watchers_.load(std::memory_order_relaxed); }

  grpc::Status ListRuns(grpc::ServerContext* context, const v1::ListRunsRequest* request,
                        v1::ListRunsResponse* response) override;
  grpc::Status GetRun(grpc::ServerContext* context, const v1::GetRunRequest* request,
                      v1::GetRunResponse* response) override;
  grpc::Status GetPercentiles(grpc::ServerContext* context,
                              const v1::GetPercentilesRequest* request,
                              v1::GetPercentilesResponse* response) override;
  grpc::Status GetWindowHistory(grpc::ServerContext* context,
                                const v1::GetWindowHistoryRequest* request,
                                v1::GetWindowHistoryResponse* response) override;
  grpc::Status GetClients(grpc::ServerContext* context, const v1::GetClientsRequest* request,
                          v1::GetClientsResponse* response) override;
  grpc::Status WatchRun(grpc::ServerContext* context, const v1::WatchRunRequest* request,
                        grpc::ServerWriter<v1::WatchRunResponse>* writer) override;

 private:
  const runs::RunRegistry& registry_;
  const CurrentConfig& config_;
  const CallAuth& auth_;
  const ingest::RunTable* const ingest_runs_;
  std::atomic<int> watchers_{0};
  std::atomic<bool> cancel_watches_{false};
};

}  // namespace perld::service
