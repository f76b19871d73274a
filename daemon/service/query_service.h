// QueryService: perld.v1.Query over the RunRegistry, on gRPC's callback API.
// Every call reads published snapshots; none touches the recorder.
//
// The unary methods answer on the gRPC thread that delivered the request
// (context->DefaultReactor()). GetClients is a raw method: its request is
// parsed here and its answer serialized by SerializeClientsAnswer, not built as
// protobuf objects (thousands of sub-messages for a large run). WatchRun is a reactor (Watch), not
// a thread: it subscribes to its run in the registry (RunRegistry::Subscribe) and writes one event
// at a time -- the next once the previous write completed and the registry has it -- then the run's
// final total, and finishes OK when the run has ended. No thread waits for a watcher and nothing
// polls: a registry change (published on the run manager's dispatcher thread) only arms a gRPC
// alarm when the watcher is idle; the alarm's callback (a gRPC thread) reads the events and starts
// the write. At most limits.maxWatchers watches at once (RESOURCE_EXHAUSTED beyond); a cancelled
// watch finishes CANCELLED, an evicted run NOT_FOUND, and CancelWatches() finishes every open watch
// UNAVAILABLE and refuses new ones.
//
// Threads: gRPC's callback threads run the handlers and reactions;
// registry notifications arrive on the registry writer's thread;
// CancelWatches from any thread. Each watch has its own mutex; the set of
// open watches another.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>

#include "absl/base/thread_annotations.h"
#include "daemon/common/mutex.h"
#include "daemon/config/current_config.h"
#include "daemon/ingest/run_table.h"
#include "daemon/runs/range_percentiles.h"
#include "daemon/runs/run_registry.h"
#include "daemon/service/call_auth.h"
#include "daemon/state/state_store.h"
#include "perld/v1/perld.grpc.pb.h"

namespace perld::service {

class QueryService final
    : public v1::Query::WithRawCallbackMethod_GetClients<v1::Query::CallbackService> {
 public:
  // `ingest_runs` answers GetClients (null: UNIMPLEMENTED).
  // Every call needs Access::kRead from `auth`. REQUIRES: the registry
  // outlives every call (the gRPC server's Shutdown waits for them).
  // `store` (may be null: no ranges) holds the runs' window distributions
  // that range queries merge.
  QueryService(const runs::RunRegistry& registry, const config::CurrentConfig& config,
               const CallAuth& auth, const ingest::RunTable* ingest_runs = nullptr,
               const state::StateStore* store = nullptr)
      : registry_(registry),
        config_(config),
        auth_(auth),
        ingest_runs_(ingest_runs),
        store_(store) {}

  // Finishes every open watch UNAVAILABLE ("perld is shutting down") and
  // refuses new ones from now on (shutdown after the drain).
  void CancelWatches();
  // Watches open now (a watch counts until gRPC is done with it).
  int watchers() const { return watchers_.load(std::memory_order_relaxed); }

  grpc::ServerUnaryReactor* ListRuns(grpc::CallbackServerContext* context,
                                     const v1::ListRunsRequest* request,
                                     v1::ListRunsResponse* response) override;
  grpc::ServerUnaryReactor* GetRun(grpc::CallbackServerContext* context,
                                   const v1::GetRunRequest* request,
                                   v1::GetRunResponse* response) override;
  grpc::ServerUnaryReactor* GetPercentiles(grpc::CallbackServerContext* context,
                                           const v1::GetPercentilesRequest* request,
                                           v1::GetPercentilesResponse* response) override;
  grpc::ServerUnaryReactor* GetWindowHistory(grpc::CallbackServerContext* context,
                                             const v1::GetWindowHistoryRequest* request,
                                             v1::GetWindowHistoryResponse* response) override;
  grpc::ServerUnaryReactor* GetDistribution(grpc::CallbackServerContext* context,
                                            const v1::GetDistributionRequest* request,
                                            v1::GetDistributionResponse* response) override;
  // Raw: a serialized GetClientsRequest in, a serialized GetClientsResponse out.
  grpc::ServerUnaryReactor* GetClients(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<v1::WatchRunResponse>* WatchRun(
      grpc::CallbackServerContext* context, const v1::WatchRunRequest* request) override;

 private:
  class Watch;

  grpc::Status DoListRuns(const v1::ListRunsRequest& request, v1::ListRunsResponse* response);
  grpc::Status DoGetRun(const v1::GetRunRequest& request, v1::GetRunResponse* response);
  // The exact answer over a range of the run's stored windows: `answer`,
  // its counters and percentiles as `window`, its distribution in `merged`
  // (may be null). INVALID_ARGUMENT for a malformed range; RangePercentiles'
  // refusals.
  grpc::Status AnswerRange(runs::RunId id, const v1::WindowRange& range,
                           std::vector<double> percents, PercentileMethod method,
                           runs::RangeAnswer* answer, v1::Window* window,
                           std::vector<LatencyBucket>* merged);
  grpc::Status DoRangePercentiles(runs::RunId id, const runs::RunInfo& info,
                                  const v1::WindowRange& range, std::vector<double> percents,
                                  PercentileMethod method, v1::GetPercentilesResponse* response);
  grpc::Status DoGetPercentiles(const v1::GetPercentilesRequest& request,
                                v1::GetPercentilesResponse* response);
  grpc::Status DoGetWindowHistory(const v1::GetWindowHistoryRequest& request,
                                  v1::GetWindowHistoryResponse* response);
  grpc::Status DoGetClients(const grpc::ByteBuffer& request, grpc::ByteBuffer* response);
  grpc::Status DoGetDistribution(const v1::GetDistributionRequest& request,
                                 v1::GetDistributionResponse* response);
  // The call's reactor, finished with auth's verdict, else with what
  // `answer()` returns (it fills the response).
  template <typename F>
  grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, F answer);
  void Forget(Watch* watch);  // from Watch::OnDone

  const runs::RunRegistry& registry_;
  const config::CurrentConfig& config_;
  const CallAuth& auth_;
  const ingest::RunTable* const ingest_runs_;
  const state::StateStore* const store_;
  std::atomic<int> watchers_{0};  // watches_.size(), readable without watches_mu_
  Mutex watches_mu_;
  std::set<Watch*> watches_ ABSL_GUARDED_BY(watches_mu_);  // open, until their OnDone
  bool cancelled_ ABSL_GUARDED_BY(watches_mu_) = false;    // CancelWatches was called
};

}  // namespace perld::service
