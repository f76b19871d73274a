#include "daemon/service/query_service.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/mutex.h"
#include "daemon/core/run_total.h"
#include "daemon/runs/range_percentiles.h"
#include "daemon/service/change_pump.h"
#include "daemon/service/clients_answer.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/request_limits.h"
#include "daemon/service/run_proto.h"

namespace perld::service {
namespace {

// A WatchRun refused before it started.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::WatchRunResponse> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

grpc::Status ShuttingDown() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "perld is shutting down");
}

// A bucketed run (RunSpec::bucketed_reason): not exact, why, and `bucketed`
// -- its percentiles (exact ones of the values it holds) stay in the
// answer. A total whose percentiles are withheld (outgrew its memory)
// stays bucketed false, its reason naming both.
// The run answering `kind` of `run`'s operations (RunRegistry::ResolveKind).
absl::StatusOr<runs::RunId> ResolveKind(const runs::RunRegistry& registry, const std::string& run,
                                        v1::LatencyKind kind) {
  absl::StatusOr<runs::LatencyKind> k = FromProto(kind);
  if (!k.ok()) return k.status();
  return registry.ResolveKind(run, *k);
}

void SayBucketed(const runs::RunInfo& info, v1::GetPercentilesResponse* response) {
  if (info.spec.bucketed_reason.empty()) return;
  response->set_bucketed(response->exact());
  response->set_exact(false);
  response->set_inexact_reason(
      response->inexact_reason().empty()
          ? info.spec.bucketed_reason
          : absl::StrCat(response->inexact_reason(), "; also ", info.spec.bucketed_reason));
}

}  // namespace

// One WatchRun call. Its pump (Pump) is a ChangePump: it runs at Start,
// on a registry change (through an alarm: the registry's writer must not run
// it), at a cancel or shutdown, and after each write. The pump state below
// is the pump owner's; a write in flight keeps the ownership until
// OnWriteDone, so no event is written twice and no change is lost.
//
// Lifetime: gRPC calls OnDone once Finish completed; the subscription is
// reset before delete (it waits for an OnChange in progress), and
// CancelWatches reaches a watch only under watches_mu_, which OnDone takes
// to remove it.
class QueryService::Watch final : public grpc::ServerWriteReactor<v1::WatchRunResponse> {
 public:
  Watch(QueryService& service, runs::RunId id, int64_t next)
      : service_(service), id_(id), next_(next) {}

  // Subscribes, then writes what the run has already. The handler's thread.
  void Start() {
    subscription_ = service_.registry_.Subscribe(id_, [this] { pump_.Kick(); });
    Pump();  // the creator owns the pump
  }

  // Finishes the watch UNAVAILABLE. REQUIRES: service_.watches_mu_ held.
  void Cancel() {
    shutdown_ = true;
    if (pump_.Claim()) Pump();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) cancelled_ = true;  // the call is gone
    Pump();                      // the write owned the pump
  }

  void OnCancel() override {
    cancelled_ = true;
    if (pump_.Claim()) Pump();
  }

  void OnDone() override {
    service_.Forget(this);
    subscription_.reset();
    delete this;
  }

 private:
  // REQUIRES: the caller owns the pump.
  void Pump() {
    for (;;) {
      pump_.BeginPass();
      if (cancelled_) {
        Finish(grpc::Status::CANCELLED);
        return;
      }
      if (shutdown_) {
        Finish(ShuttingDown());
        return;
      }
      if (pos_ == events_.size() && !ended_) {
        absl::StatusOr<runs::RunRegistry::WatchBatch> batch = service_.registry_.Events(id_, next_);
        if (!batch.ok()) {
          Finish(ToGrpcStatus(batch.status()));
          return;
        }
        events_ = std::move(batch->events);
        pos_ = 0;
        skipped_ = batch->skipped;
        next_ = batch->next;
        ended_ = batch->ended;
      }
      if (pos_ < events_.size()) {
        const runs::WindowRecord& w = events_[pos_++];
        const bool last = ended_ && pos_ == events_.size();
        out_.Clear();
        ToProto(w, last && w.kind == runs::WindowRecord::Kind::kTotal, out_.mutable_window());
        out_.set_skipped(skipped_);
        skipped_ = 0;
        StartWrite(&out_);
        return;
      }
      if (ended_) {
        Finish(grpc::Status::OK);
        return;
      }
      if (pump_.Release()) return;
    }
  }

  QueryService& service_;
  const runs::RunId id_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> shutdown_{false};
  ChangePump pump_{[this] { Pump(); }};
  runs::RunRegistry::Subscription subscription_;  // reset by OnDone before delete

  // Pump state: the pump owner's.
  int64_t next_;                            // the next event number to read
  std::vector<runs::WindowRecord> events_;  // read, not all written yet
  size_t pos_ = 0;                          // the next of events_ to write
  int64_t skipped_ = 0;
  bool ended_ = false;        // events_ ends with the run's total
  v1::WatchRunResponse out_;  // the write in flight
};

template <typename F>
grpc::ServerUnaryReactor* QueryService::Reply(grpc::CallbackServerContext* context, F answer) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status status = auth_.CheckCall(*context, Access::kRead);
  if (status.ok()) status = answer();
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::ServerUnaryReactor* QueryService::ListRuns(grpc::CallbackServerContext* context,
                                                 const v1::ListRunsRequest* request,
                                                 v1::ListRunsResponse* response) {
  return Reply(context, [&] { return DoListRuns(*request, response); });
}

grpc::ServerUnaryReactor* QueryService::GetRun(grpc::CallbackServerContext* context,
                                               const v1::GetRunRequest* request,
                                               v1::GetRunResponse* response) {
  return Reply(context, [&] { return DoGetRun(*request, response); });
}

grpc::ServerUnaryReactor* QueryService::GetPercentiles(grpc::CallbackServerContext* context,
                                                       const v1::GetPercentilesRequest* request,
                                                       v1::GetPercentilesResponse* response) {
  return Reply(context, [&] { return DoGetPercentiles(*request, response); });
}

grpc::ServerUnaryReactor* QueryService::GetWindowHistory(grpc::CallbackServerContext* context,
                                                         const v1::GetWindowHistoryRequest* request,
                                                         v1::GetWindowHistoryResponse* response) {
  return Reply(context, [&] { return DoGetWindowHistory(*request, response); });
}

grpc::ServerUnaryReactor* QueryService::GetDistribution(grpc::CallbackServerContext* context,
                                                        const v1::GetDistributionRequest* request,
                                                        v1::GetDistributionResponse* response) {
  return Reply(context, [&] { return DoGetDistribution(*request, response); });
}

grpc::ServerUnaryReactor* QueryService::GetClients(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return Reply(context, [&] { return DoGetClients(*request, response); });
}

grpc::ServerWriteReactor<v1::WatchRunResponse>* QueryService::WatchRun(
    grpc::CallbackServerContext* context, const v1::WatchRunRequest* request) {
  if (grpc::Status denied = auth_.CheckCall(*context, Access::kRead); !denied.ok()) {
    return new RefusedWatch(denied);
  }
  absl::StatusOr<runs::RunId> id = ResolveKind(registry_, request->run(), request->kind());
  if (!id.ok()) return new RefusedWatch(ToGrpcStatus(id.status()));
  // Start at the newest event (or replay the retained history).
  absl::StatusOr<runs::RunView> view = registry_.Get(*id);
  if (!view.ok()) return new RefusedWatch(ToGrpcStatus(view.status()));
  int64_t next = request->from_start() ? 0 : view->events;
  if (!request->from_start() && view->info.state != runs::RunState::kRunning && next > 0) {
    next -= 1;  // an ended run: deliver its final total
  }
  Watch* watch = nullptr;
  {
    MutexLock lock(watches_mu_);
    if (cancelled_) return new RefusedWatch(ShuttingDown());
    const int64_t max_watchers = config_.Get()->limits.max_watchers;
    if (static_cast<int64_t>(watches_.size()) >= max_watchers) {
      return new RefusedWatch(
          grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       absl::StrCat("limits.maxWatchers: ", max_watchers, " watchers already")));
    }
    watch = new Watch(*this, *id, next);
    watches_.insert(watch);
    watchers_.store(static_cast<int>(watches_.size()), std::memory_order_relaxed);
  }
  watch->Start();
  return watch;
}

void QueryService::Forget(Watch* watch) {
  MutexLock lock(watches_mu_);
  watches_.erase(watch);
  watchers_.store(static_cast<int>(watches_.size()), std::memory_order_relaxed);
}

void QueryService::CancelWatches() {
  MutexLock lock(watches_mu_);
  cancelled_ = true;
  for (Watch* watch : watches_) watch->Cancel();
}

grpc::Status QueryService::DoListRuns(const v1::ListRunsRequest& request,
                                      v1::ListRunsResponse* response) {
  runs::RunFilter filter;
  filter.state = FromProto(request.state());
  if (!filter.state && request.state() != v1::RUN_STATE_UNSPECIFIED) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("state: unknown run state ", request.state()));
  }
  for (const auto& [k, v] : request.labels()) filter.labels[k] = v;
  absl::StatusOr<ListPage> page = ParseListPage(request.page_size(), request.page_token());
  if (!page.ok()) return ToGrpcStatus(page.status());
  runs::RunPage runs = registry_.List(filter, page->after, page->size);
  // A page also ends before it passes kMaxListPageBytes (one run at least).
  size_t bytes = 0;
  for (const runs::RunInfo& info : runs.runs) {
    v1::RunInfo run;
    ToProto(info, &run);
    bytes += run.ByteSizeLong() + 8;  // the field's tag and length
    v1::Window total;
    if (request.with_totals()) {
      // Listed a moment ago; a run forgotten since has an empty total.
      if (absl::StatusOr<runs::RunView> view = registry_.Get(info.id); view.ok()) {
        ToProto(view->total, view->total_final, &total);
      }
      bytes += total.ByteSizeLong() + 8;
    }
    if (response->runs_size() > 0 && bytes > kMaxListPageBytes) {
      runs.more = true;
      break;
    }
    *response->add_runs() = std::move(run);
    if (request.with_totals()) *response->add_totals() = std::move(total);
  }
  if (runs.more) {
    response->set_next_page_token(ListPageToken(response->runs().rbegin()->id()));
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::DoGetRun(const v1::GetRunRequest& request,
                                    v1::GetRunResponse* response) {
  absl::StatusOr<runs::RunId> id = ResolveKind(registry_, request.run(), request.kind());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<runs::RunView> view = registry_.Get(*id);
  if (!view.ok()) return ToGrpcStatus(view.status());
  ToProto(view->info, response->mutable_run());
  if (view->latest) ToProto(*view->latest, false, response->mutable_latest());
  ToProto(view->total, view->total_final, response->mutable_total());
  if (store_ != nullptr) {
    // Best effort: the run itself was answered; a read error leaves it unsaid.
    if (absl::StatusOr<state::StateStore::MissingDistributions> missing =
            store_->WindowsWithoutDistribution(*id);
        missing.ok()) {
      response->set_windows_without_distribution(missing->windows);
      response->set_first_window_without_distribution(missing->first_seq);
    }
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::DoGetPercentiles(const v1::GetPercentilesRequest& request,
                                            v1::GetPercentilesResponse* response) {
  absl::StatusOr<runs::RunId> id = ResolveKind(registry_, request.run(), request.kind());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<runs::RunInfo> info = registry_.Info(*id);
  if (!info.ok()) return ToGrpcStatus(info.status());
  std::vector<double> percents(request.percentiles().begin(), request.percentiles().end());
  if (percents.empty()) percents = info->spec.latency.percentiles;
  if (absl::Status s = CheckPercentileCount("percentiles", static_cast<int64_t>(percents.size()),
                                            config_.Get()->limits);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (!v1::GetPercentilesRequest::Scope_IsValid(request.scope())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("scope: unknown scope ", request.scope(),
                                     " (SCOPE_TOTAL = 0, SCOPE_LATEST = 1)"));
  }
  PercentileMethod method = PercentileMethod::kSbk;
  switch (request.method()) {
    case v1::PERCENTILE_METHOD_SBK:
      break;
    case v1::PERCENTILE_METHOD_NEAREST_RANK:
      method = PercentileMethod::kNearestRank;
      break;
    case v1::PERCENTILE_METHOD_HDR:
      method = PercentileMethod::kHdr;
      break;
    default:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("method: unknown percentile method ", request.method(),
                                       " (PERCENTILE_METHOD_SBK = 0, NEAREST_RANK = 1, HDR = 2)"));
  }
  response->set_method(request.method());
  response->set_kind(info->service_run != 0 ? v1::LATENCY_KIND_RESPONSE : v1::LATENCY_KIND_SERVICE);
  if (request.has_range()) {
    return DoRangePercentiles(*id, *info, request.range(), std::move(percents), method, response);
  }
  const runs::PercentileScope scope = request.scope() == v1::GetPercentilesRequest::SCOPE_LATEST
                                          ? runs::PercentileScope::kLatest
                                          : runs::PercentileScope::kTotal;
  // A running total past its memory budget is merged from the state store
  // here, where a user asked (not on every scrape, page refresh or SLO check).
  absl::StatusOr<runs::PercentileAnswer> answer =
      registry_.Percentiles(*id, scope, percents, /*merge_running=*/true, method);
  if (!answer.ok() && scope == runs::PercentileScope::kLatest &&
      answer.status().code() == absl::StatusCode::kFailedPrecondition && store_ != nullptr) {
    // The latest window of a run loaded from the history has no distribution
    // in memory; the state database has it (the range of that one window).
    absl::StatusOr<runs::RunView> view = registry_.Get(*id);
    if (view.ok() && view->latest) {
      v1::WindowRange latest;
      latest.set_first_window(view->latest->seq);
      latest.set_last_window(view->latest->seq);
      if (DoRangePercentiles(*id, *info, latest, percents, method, response).ok()) {
        response->clear_range();
        response->clear_last_window();
        response->clear_windows();
        response->set_final(false);  // a total's flag
        return grpc::Status::OK;
      }
    }
  }
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  const LatencySnapshot& s = answer->snapshot;
  response->set_run_id(*id);
  AddPercentiles(s, response->mutable_percentiles());
  response->set_valid_latency_records(s.valid);
  response->set_exact(answer->exact);
  response->set_final(answer->total_final);
  response->set_median_latency(s.median);
  response->set_time_unit(ToProto(info->spec.latency.time_unit));
  if (!s.percentiles_exact) response->set_inexact_reason(kInexactTotalReason);
  SayBucketed(*info, response);
  return grpc::Status::OK;
}

grpc::Status QueryService::AnswerRange(runs::RunId id, const v1::WindowRange& range,
                                       std::vector<double> percents, PercentileMethod method,
                                       runs::RangeAnswer* answer, v1::Window* window,
                                       std::vector<LatencyBucket>* merged) {
  const auto bad = [](const std::string& what) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "range: " + what);
  };
  if (range.first_window() < 0 || range.last_window() < 0 || range.from_unix_ms() < 0 ||
      range.to_unix_ms() < 0) {
    return bad("bounds must not be negative (0 leaves one open)");
  }
  if (range.last_window() > 0 && range.first_window() > range.last_window()) {
    return bad(absl::StrCat("first_window ", range.first_window(), " is after last_window ",
                            range.last_window()));
  }
  if (range.to_unix_ms() > 0 && range.from_unix_ms() > range.to_unix_ms()) {
    return bad("from_unix_ms is after to_unix_ms");
  }
  if (store_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "ranges are answered from the state directory, which this perld has not");
  }
  absl::StatusOr<PercentileSet> set = PercentileSet::Create(std::move(percents), method);
  if (!set.ok()) return ToGrpcStatus(set.status());
  state::StateStore::WindowRange asked;
  if (range.first_window() > 0) asked.first_seq = range.first_window();
  if (range.last_window() > 0) asked.last_seq = range.last_window();
  if (range.from_unix_ms() > 0) asked.from_unix_ms = range.from_unix_ms();
  if (range.to_unix_ms() > 0) asked.to_unix_ms = range.to_unix_ms();
  absl::StatusOr<std::vector<runs::WindowRecord>> windows = store_->ReadWindowRange(id, asked);
  if (!windows.ok()) return ToGrpcStatus(windows.status());
  absl::StatusOr<runs::RangeAnswer> answered =
      runs::RangePercentiles(id, *windows, range.first_window(), *set, merged);
  if (!answered.ok()) return ToGrpcStatus(answered.status());
  *answer = *std::move(answered);
  runs::WindowRecord w;
  w.run_id = id;
  w.kind = runs::WindowRecord::Kind::kPeriodic;
  w.seq = answer->first_window;
  w.start_unix_ms = answer->start_unix_ms;
  w.end_unix_ms = answer->end_unix_ms;
  w.seconds = answer->seconds;
  w.snapshot = answer->snapshot;
  ToProto(w, /*final_total=*/false, window);
  return grpc::Status::OK;
}

grpc::Status QueryService::DoRangePercentiles(runs::RunId id, const runs::RunInfo& info,
                                              const v1::WindowRange& range,
                                              std::vector<double> percents, PercentileMethod method,
                                              v1::GetPercentilesResponse* response) {
  runs::RangeAnswer answer;
  if (grpc::Status s = AnswerRange(id, range, std::move(percents), method, &answer,
                                   response->mutable_range(), nullptr);
      !s.ok()) {
    return s;
  }
  const LatencySnapshot& s = answer.snapshot;
  response->set_run_id(id);
  AddPercentiles(s, response->mutable_percentiles());
  response->set_valid_latency_records(s.valid);
  response->set_exact(true);
  response->set_final(info.state != runs::RunState::kRunning);
  response->set_median_latency(s.median);
  response->set_time_unit(ToProto(info.spec.latency.time_unit));
  response->set_last_window(answer.last_window);
  response->set_windows(answer.windows);
  SayBucketed(info, response);
  return grpc::Status::OK;
}

grpc::Status QueryService::DoGetDistribution(const v1::GetDistributionRequest& request,
                                             v1::GetDistributionResponse* response) {
  constexpr int32_t kDefaultPage = 100'000;
  constexpr int32_t kMaxPage = 1'000'000;
  if (request.page_size() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "page_size: must be >= 0");
  }
  const int32_t size =
      request.page_size() == 0 ? kDefaultPage : std::min(request.page_size(), kMaxPage);
  std::optional<int64_t> after;
  if (!request.page_token().empty()) {
    int64_t last = 0;
    if (!absl::SimpleAtoi(request.page_token(), &last)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "page_token: not a token this call returned");
    }
    after = last;
  }
  absl::StatusOr<runs::RunId> id = ResolveKind(registry_, request.run(), request.kind());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<runs::RunInfo> info = registry_.Info(*id);
  if (!info.ok()) return ToGrpcStatus(info.status());
  if (request.has_range()) {
    runs::RangeAnswer answer;
    std::vector<LatencyBucket> merged;
    if (grpc::Status s =
            AnswerRange(*id, request.range(), info->spec.latency.percentiles,
                        PercentileMethod::kSbk, &answer, response->mutable_total(), &merged);
        !s.ok()) {
      return s;
    }
    response->set_run_id(*id);
    response->set_time_unit(ToProto(info->spec.latency.time_unit));
    response->set_last_window(answer.last_window);
    auto from = merged.begin();
    if (after) {
      from = std::upper_bound(merged.begin(), merged.end(), *after,
                              [](int64_t v, const LatencyBucket& b) { return v < b.latency; });
    }
    const auto to = merged.end() - from > size ? from + size : merged.end();
    for (auto b = from; b != to; ++b) {
      response->add_latency(b->latency);
      response->add_count(b->count);
    }
    if (to != merged.end()) response->set_next_page_token(absl::StrCat((to - 1)->latency));
    return grpc::Status::OK;
  }
  absl::StatusOr<runs::RunRegistry::DistributionPage> page =
      registry_.Distribution(*id, after, static_cast<size_t>(size));
  if (!page.ok()) return ToGrpcStatus(page.status());
  response->set_run_id(*id);
  response->set_time_unit(ToProto(info->spec.latency.time_unit));
  ToProto(page->total, true, response->mutable_total());
  response->mutable_latency()->Reserve(static_cast<int>(page->buckets.size()));
  response->mutable_count()->Reserve(static_cast<int>(page->buckets.size()));
  for (const LatencyBucket& b : page->buckets) {
    response->add_latency(b.latency);
    response->add_count(b.count);
  }
  if (page->more) response->set_next_page_token(absl::StrCat(page->buckets.back().latency));
  return grpc::Status::OK;
}

grpc::Status QueryService::DoGetWindowHistory(const v1::GetWindowHistoryRequest& request,
                                              v1::GetWindowHistoryResponse* response) {
  absl::StatusOr<runs::RunId> id = ResolveKind(registry_, request.run(), request.kind());
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

grpc::Status QueryService::DoGetClients(const grpc::ByteBuffer& request_bytes,
                                        grpc::ByteBuffer* response) {
  if (ingest_runs_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no remote runs in this server");
  }
  v1::GetClientsRequest request;
  if (grpc::Slice bytes; !request_bytes.DumpToSingleSlice(&bytes).ok() ||
                         !request.ParseFromArray(bytes.begin(), static_cast<int>(bytes.size()))) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "GetClientsRequest: not a valid perld.v1.GetClientsRequest message");
  }
  absl::StatusOr<runs::RunId> id = registry_.Resolve(request.run());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<runs::RunInfo> info = registry_.Info(*id);
  if (!info.ok()) return ToGrpcStatus(info.status());
  if (info->spec.source == runs::RunSource::kBench) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("run ", *id, " is a bench run: it has no remote clients"));
  }
  if (absl::Status s =
          CheckPercentileCount("percentiles", request.percentiles_size(), config_.Get()->limits);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  std::vector<double> percents(request.percentiles().begin(), request.percentiles().end());
  if (percents.empty()) percents = info->spec.latency.percentiles;
  absl::StatusOr<PercentileSet> set = PercentileSet::Create(percents);
  if (!set.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("percentiles: ", set.status().message()));
  }
  absl::StatusOr<std::vector<ingest::ClientView>> clients = ingest_runs_->Clients(*id, *set);
  if (!clients.ok()) return ToGrpcStatus(clients.status());
  // The answer's bytes go to gRPC as they are: the slice frees them.
  auto wire = std::make_unique<std::string>();
  SerializeClientsAnswer(*id, *clients, ingest_runs_->breakdown_budget().used(),
                         ingest_runs_->breakdown_budget().limit(), wire.get());
  std::string* bytes = wire.release();  // the slice's from here on: it deletes them
  grpc::Slice slice(
      bytes->data(), bytes->size(), [](void* owner) { delete static_cast<std::string*>(owner); },
      bytes);
  *response = grpc::ByteBuffer(&slice, 1);
  return grpc::Status::OK;
}

}  // namespace perld::service
