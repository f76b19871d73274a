#include "daemon/service/query_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/run_proto.h"

namespace perld::service {

grpc::Status QueryService::ListRuns(grpc::ServerContext* context,
                                    const v1::ListRunsRequest* request,
                                    v1::ListRunsResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kRead); !denied.ok()) return denied;
  runs::RunFilter filter;
  filter.state = FromProto(request->state());
  if (!filter.state && request->state() != v1::RUN_STATE_UNSPECIFIED) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("state: unknown run state ", request->state()));
  }
  for (const auto& [k, v] : request->labels()) filter.labels[k] = v;
  absl::StatusOr<ListPage> page = ParseListPage(request->page_size(), request->page_token());
  if (!page.ok()) return ToGrpcStatus(page.status());
  runs::RunPage runs = registry_.List(filter, page->after, page->size);
  // A page also ends before it passes kMaxListPageBytes (one run at least).
  size_t bytes = 0;
  for (const runs::RunInfo& info : runs.runs) {
    v1::RunInfo run;
    ToProto(info, &run);
    bytes += run.ByteSizeLong() + 8;  // the field's tag and length
    if (response->runs_size() > 0 && bytes > kMaxListPageBytes) {
      runs.more = true;
      break;
    }
    *response->add_runs() = std::move(run);
  }
  if (runs.more) {
    response->set_next_page_token(ListPageToken(response->runs().rbegin()->id()));
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::GetRun(grpc::ServerContext* context, const v1::GetRunRequest* request,
                                  v1::GetRunResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kRead); !denied.ok()) return denied;
  absl::StatusOr<runs::RunId> id = registry_.Resolve(request->run());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<runs::RunView> view = registry_.Get(*id);
  if (!view.ok()) return ToGrpcStatus(view.status());
  ToProto(view->info, response->mutable_run());
  if (view->latest) ToProto(*view->latest, false, response->mutable_latest());
  ToProto(view->total, view->total_final, response->mutable_total());
  return grpc::Status::OK;
}

grpc::Status QueryService::GetPercentiles(grpc::ServerContext* context,
                                          const v1::GetPercentilesRequest* request,
                                          v1::GetPercentilesResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kRead); !denied.ok()) return denied;
  absl::StatusOr<runs::RunId> id = registry_.Resolve(request->run());
  if (!id.ok()) return ToGrpcStatus(id.status());
  std::vector<double> percents(request->percentiles().begin(), request->percentiles().end());
  if (percents.empty()) {
    absl::StatusOr<runs::RunInfo> info = registry_.Info(*id);
    if (!info.ok()) return ToGrpcStatus(info.status());
    percents = info->spec.latency.percentiles;
  }
  if (absl::Status s = CheckPercentileCount("percentiles", static_cast<int64_t>(percents.size()),
                                            config_.Get()->limits);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (!v1::GetPercentilesRequest::Scope_IsValid(request->scope())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("scope: unknown scope ", request->scope(),
                                     " (SCOPE_TOTAL = 0, SCOPE_LATEST = 1)"));
  }
  const runs::PercentileScope scope = request->scope() == v1::GetPercentilesRequest::SCOPE_LATEST
                                          ? runs::PercentileScope::kLatest
                                          : runs::PercentileScope::kTotal;
  absl::StatusOr<runs::PercentileAnswer> answer =
      registry_.Percentiles(*id, scope, std::move(percents));
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  const LatencySnapshot& s = answer->snapshot;
  response->set_run_id(*id);
  AddPercentiles(s, response->mutable_percentiles());
  response->set_valid_latency_records(s.valid);
  response->set_exact(answer->exact);
  response->set_final(answer->total_final);
  response->set_median_latency(s.median);
  return grpc::Status::OK;
}

grpc::Status QueryService::GetWindowHistory(grpc::ServerContext* context,
                                            const v1::GetWindowHistoryRequest* request,
                                            v1::GetWindowHistoryResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kRead); !denied.ok()) return denied;
  absl::StatusOr<runs::RunId> id = registry_.Resolve(request->run());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<std::vector<runs::WindowRecord>> history = registry_.History(*id);
  if (!history.ok()) return ToGrpcStatus(history.status());
  absl::StatusOr<runs::RunInfo> info = registry_.Info(*id);
  const bool ended = info.ok() && info->state != runs::RunState::kRunning;
  response->set_run_id(*id);
  for (const runs::WindowRecord& w : *history) {
    ToProto(w, ended && w.kind == runs::WindowRecord::Kind::kTotal, response->add_windows());
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::GetClients(grpc::ServerContext* context,
                                      const v1::GetClientsRequest* request,
                                      v1::GetClientsResponse* response) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kRead); !denied.ok()) return denied;
  if (ingest_runs_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no remote runs in this server");
  }
  absl::StatusOr<runs::RunId> id = registry_.Resolve(request->run());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<runs::RunInfo> info = registry_.Info(*id);
  if (!info.ok()) return ToGrpcStatus(info.status());
  if (info->spec.source == runs::RunSource::kBench) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("run ", *id, " is a bench run: it has no remote clients"));
  }
  if (absl::Status s =
          CheckPercentileCount("percentiles", request->percentiles_size(), config_.Get()->limits);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  std::vector<double> percents(request->percentiles().begin(), request->percentiles().end());
  if (percents.empty()) percents = info->spec.latency.percentiles;
  absl::StatusOr<PercentileSet> set = PercentileSet::Create(percents);
  if (!set.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("percentiles: ", set.status().message()));
  }
  absl::StatusOr<std::vector<ingest::ClientView>> clients = ingest_runs_->Clients(*id, *set);
  if (!clients.ok()) return ToGrpcStatus(clients.status());
  for (const ingest::ClientView& c : *clients) ToProto(c, response->add_clients());
  response->set_run_id(*id);
  response->set_breakdown_bytes(ingest_runs_->breakdown_budget().used());
  response->set_breakdown_limit_bytes(ingest_runs_->breakdown_budget().limit());
  return grpc::Status::OK;
}

grpc::Status QueryService::WatchRun(grpc::ServerContext* context,
                                    const v1::WatchRunRequest* request,
                                    grpc::ServerWriter<v1::WatchRunResponse>* writer) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kRead); !denied.ok()) return denied;
  absl::StatusOr<runs::RunId> id = registry_.Resolve(request->run());
  if (!id.ok()) return ToGrpcStatus(id.status());
  const int64_t max_watchers = config_.Get()->limits.max_watchers;
  if (watchers_.fetch_add(1, std::memory_order_relaxed) >= max_watchers) {
    watchers_.fetch_sub(1, std::memory_order_relaxed);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("limits.maxWatchers: ", max_watchers, " watchers already"));
  }
  struct Release {
    std::atomic<int>& n;
    ~Release() { n.fetch_sub(1, std::memory_order_relaxed); }
  } release{watchers_};

  // Start at the newest event (or replay the retained history).
  absl::StatusOr<runs::RunView> view = registry_.Get(*id);
  if (!view.ok()) return ToGrpcStatus(view.status());
  int64_t next = request->from_start() ? 0 : view->events;
  if (!request->from_start() && view->info.state != runs::RunState::kRunning && next > 0) {
    next -= 1;  // an ended run: deliver its final total
  }
  for (;;) {
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    if (cancel_watches_.load(std::memory_order_relaxed)) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "perld is shutting down");
    }
    absl::StatusOr<runs::RunRegistry::WatchBatch> batch =
        registry_.WaitForEvents(*id, next, absl::Now() + absl::Milliseconds(kWatchPollMs));
    if (!batch.ok()) return ToGrpcStatus(batch.status());
    int64_t skipped = batch->skipped;
    for (size_t i = 0; i < batch->events.size(); ++i) {
      const runs::WindowRecord& w = batch->events[i];
      v1::WatchRunResponse out;
      const bool last = batch->ended && i + 1 == batch->events.size();
      ToProto(w, last && w.kind == runs::WindowRecord::Kind::kTotal, out.mutable_window());
      out.set_skipped(skipped);
      skipped = 0;
      if (!writer->Write(out)) return grpc::Status::CANCELLED;
    }
    next = batch->next;
    if (batch->ended) return grpc::Status::OK;
  }
}

}  // namespace perld::service
