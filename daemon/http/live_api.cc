#include "daemon/http/live_api.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/json_writer.h"
#include "daemon/core/run_total.h"

namespace perld::http {
namespace {

using json::JsonWriter;

constexpr double kBytesPerMebibyte = 1024.0 * 1024.0;

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

HttpResponse Error(int status, const std::string& message) {
  JsonWriter j;
  j.BeginObject().Key("error").String(message).EndObject();
  return HttpResponse{status, j.str() + "\n", kJsonContentType};
}

void WriteRun(const runs::RunView& view, JsonWriter& j) {
  const runs::RunInfo& info = view.info;
  j.BeginObject()
      .Key("id")
      .Uint(info.id)
      .Key("name")
      .String(info.spec.name)
      .Key("source")
      .String(runs::RunSourceName(info.spec.source))
      .Key("state")
      .String(runs::RunStateName(info.state))
      .Key("endReason")
      .String(runs::EndReasonName(info.end_reason))
      .Key("failureReason")
      .String(info.failure_reason)
      .Key("unit")
      .String(TimeUnitSymbol(info.spec.latency.time_unit))
      .Key("startUnixMs")
      .Int(info.start_unix_ms)
      .Key("endUnixMs")
      .Int(info.end_unix_ms)
      .Key("records")
      .Int(view.total.snapshot.records)
      .Key("seconds")
      .Double(view.total.seconds)
      // An ended run's own rate (its total); a running one's latest window.
      .Key("recordsPerSecond")
      .Double(view.total_final
                  ? Rate(static_cast<double>(view.total.snapshot.records), view.total.seconds)
              : view.latest ? Rate(static_cast<double>(view.latest->snapshot.records),
                                   view.latest->RateSeconds())
                            : 0.0)
      .Key("windows")
      .Int(view.latest ? view.latest->seq : 0)
      .Key("parameters")
      .String(info.spec.parameters)
      .Key("labels")
      .BeginObject();
  for (const auto& [k, v] : info.spec.labels) j.Key(k).String(v);
  j.EndObject().EndObject();
}

// The figures every window and the total share.
// `rate_seconds`: what the rates divide by (WindowRecord::RateSeconds).
void WriteFigures(const LatencySnapshot& s, double seconds, double rate_seconds, JsonWriter& j) {
  j.Key("records")
      .Int(s.records)
      .Key("seconds")
      .Double(seconds)
      .Key("rateSeconds")
      .Double(rate_seconds)
      .Key("recordsPerSecond")
      .Double(Rate(static_cast<double>(s.records), rate_seconds))
      .Key("mbPerSecond")
      .Double(Rate(static_cast<double>(s.bytes) / kBytesPerMebibyte, rate_seconds))
      .Key("avg")
      .Double(s.AvgLatency())
      .Key("min")
      .Int(s.min_latency)
      .Key("max")
      .Int(s.max_latency)
      .Key("values");
  if (!s.percentiles_exact) {  // a total without exact percentiles: none
    j.Null();
    return;
  }
  j.BeginArray();
  for (int64_t v : s.values) j.Int(v);
  j.EndArray();
}

}  // namespace

HttpResponse RunsJson(const runs::RunRegistry& registry, const DaemonFacts& facts) {
  std::vector<runs::RunInfo> infos = registry.List({});
  std::sort(infos.begin(), infos.end(),
            [](const runs::RunInfo& a, const runs::RunInfo& b) { return a.id > b.id; });
  JsonWriter j;
  j.BeginObject()
      .Key("version")
      .String(facts.version)
      .Key("uptimeSeconds")
      .Double(facts.uptime_seconds)
      .Key("nowUnixMs")
      .Int(facts.now_unix_ms)
      .Key("runs")
      .BeginArray();
  for (const runs::RunInfo& info : infos) {
    absl::StatusOr<runs::RunView> view = registry.Get(info.id);
    if (view.ok()) WriteRun(*view, j);
  }
  j.EndArray().EndObject();
  return HttpResponse{200, j.str() + "\n", kJsonContentType};
}

HttpResponse RunJson(const runs::RunRegistry& registry, const HttpRequest& request) {
  runs::RunId id = 0;
  if (auto run = request.params.find("run"); run != request.params.end()) {
    // A name or an id, as perlctl takes it (RunRegistry::Resolve).
    absl::StatusOr<runs::RunId> resolved = registry.Resolve(run->second);
    if (!resolved.ok()) return Error(404, std::string(resolved.status().message()));
    id = *resolved;
  } else if (auto id_param = request.params.find("id");
             id_param == request.params.end() || !absl::SimpleAtoi(id_param->second, &id)) {
    return Error(400,
                 "id: a run id (a positive integer) is required, e.g. /api/run?id=7, or "
                 "run: a run's name or id, e.g. /api/run?run=nightly");
  }
  int64_t max_windows = kDefaultLiveWindows;
  if (auto w = request.params.find("windows"); w != request.params.end()) {
    if (!absl::SimpleAtoi(w->second, &max_windows) || max_windows < 0) {
      return Error(400, "windows: a count >= 0 is required");
    }
  }
  absl::StatusOr<runs::RunView> view = registry.Get(id);
  if (!view.ok()) return Error(404, std::string(view.status().message()));
  absl::StatusOr<std::vector<runs::WindowRecord>> history = registry.History(id);
  std::vector<runs::WindowRecord> windows;
  if (history.ok()) {
    for (runs::WindowRecord& w : *history) {
      if (w.kind == runs::WindowRecord::Kind::kPeriodic) windows.push_back(std::move(w));
    }
  }
  if (static_cast<int64_t>(windows.size()) > max_windows) {
    windows.erase(windows.begin(), windows.end() - max_windows);
  }
  const std::vector<double>& percents = view->info.spec.latency.percentiles;

  JsonWriter j;
  j.BeginObject().Key("run");
  WriteRun(*view, j);
  j.Key("percents").BeginArray();
  for (double p : percents) j.Double(p);
  j.EndArray().Key("windows").BeginArray();
  for (const runs::WindowRecord& w : windows) {
    j.BeginObject().Key("seq").Int(w.seq).Key("endUnixMs").Int(w.end_unix_ms);
    j.Key("warmup").Bool(w.warmup);
    WriteFigures(w.snapshot, w.seconds, w.RateSeconds(), j);
    j.EndObject();
  }
  j.EndArray().Key("total").BeginObject();
  absl::StatusOr<runs::PercentileAnswer> total =
      registry.Percentiles(id, runs::PercentileScope::kTotal, percents);
  const LatencySnapshot& snapshot = total.ok() ? total->snapshot : view->total.snapshot;
  j.Key("final").Bool(view->total_final).Key("exact").Bool(total.ok() && total->exact);
  WriteFigures(snapshot, view->total.seconds, view->total.RateSeconds(), j);
  j.Key("counts");
  if (snapshot.percentiles_exact) {
    j.BeginArray();
    for (int64_t c : snapshot.counts) j.Int(c);
    j.EndArray();
  } else {
    j.Null().Key("inexactReason").String(kInexactTotalReason);
  }
  j.EndObject().EndObject();
  return HttpResponse{200, j.str() + "\n", kJsonContentType};
}

}  // namespace perld::http
