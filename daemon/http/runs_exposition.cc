#include "daemon/http/runs_exposition.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace perld::http {
namespace {

// SBK's action of a run: its "action" label when it names one, else from
// its writer/reader counts.
std::string ActionOf(const runs::RunInfo& info) {
  auto it = info.spec.labels.find("action");
  if (it != info.spec.labels.end() && !it->second.empty()) return it->second;
  return SbkAction(info.spec.writers, info.spec.readers);
}

std::string ClassOf(const runs::RunInfo& info) {
  auto it = info.spec.labels.find("class");
  if (it != info.spec.labels.end() && !it->second.empty()) return it->second;
  return info.spec.source == runs::RunSource::kBench ? "PerlBench" : "perld";
}

// A rate-controlled run's two views (issue 30) are one run with a `kind`
// label: both carry the service run's id and name, kind="service" or
// kind="response". Closed-loop runs (service time only) have no kind label:
// their series are as before.
RunMetrics Describe(const runs::RunInfo& info, const runs::RunView& view,
                    const RunsExpositionInput& input, const runs::RunInfo* service) {
  RunMetrics m;
  m.id = info.id;
  m.events = view.events;
  const runs::RunInfo& named = service != nullptr ? *service : info;
  m.identity.Add("run_id", absl::StrCat(named.id))
      .Add("run", named.spec.name)
      .Add("source", runs::RunSourceName(info.spec.source));
  if (info.service_run != 0 || info.response_run != 0) {
    m.identity.Add("kind", runs::LatencyKindOf(info));
  }
  m.state = runs::RunStateName(info.state);
  m.unit = info.spec.latency.time_unit;
  m.action = ActionOf(info);
  m.sbk_class = ClassOf(info);
  m.component = info.spec.source == runs::RunSource::kBench ? "sbk" : "sbm";
  m.writers = m.max_writers = info.spec.writers;
  m.readers = m.max_readers = info.spec.readers;
  if (auto it = input.connections.find(info.id); it != input.connections.end()) {
    m.connections = it->second.first;
    m.max_connections = it->second.second;
  }
  m.start_unix_seconds = static_cast<double>(info.start_unix_ms) / 1e3;
  if (view.latest) {
    m.latest =
        ExpositionWindow{view.latest->snapshot, view.latest->seconds, view.latest->RateSeconds()};
    m.recorder_bytes = view.latest->recorder_bytes;
    m.window_clients = view.latest->remote.clients;
  }
  m.cache_releases = view.total.cache_releases;
  m.remote_reports = view.total.remote.reports;
  m.late_reports = view.total.remote.late;
  m.total = ExpositionWindow{view.total.snapshot, view.total.seconds};
  m.total_final = view.total_final;
  if (auto it = input.channels.find(info.id); it != input.channels.end()) {
    m.dropped = it->second.dropped;
    m.blocked = it->second.blocked;
  }
  m.total_exact = view.total.exact_total;
  m.total_window_releases = view.released_segments;
  return m;
}

}  // namespace

std::vector<RunMetrics> SelectRunMetrics(const runs::RunRegistry& registry,
                                         const RunsExpositionInput& input, int64_t* omitted) {
  std::vector<runs::RunInfo> infos = registry.List({});
  const int64_t keep_ms = input.prometheus.finished_run_seconds * 1000;
  std::erase_if(infos, [&](const runs::RunInfo& info) {
    return info.state != runs::RunState::kRunning && info.end_unix_ms + keep_ms < input.now_unix_ms;
  });
  // Response views go with their runs: prometheus.maxRuns counts runs.
  std::erase_if(infos, [](const runs::RunInfo& info) { return info.service_run != 0; });
  std::sort(infos.begin(), infos.end(),
            [](const runs::RunInfo& a, const runs::RunInfo& b) { return a.id > b.id; });
  const size_t cap = static_cast<size_t>(std::max<int64_t>(input.prometheus.max_runs, 0));
  *omitted = infos.size() > cap ? static_cast<int64_t>(infos.size() - cap) : 0;
  if (infos.size() > cap) infos.resize(cap);
  std::vector<RunMetrics> out;
  out.reserve(infos.size());
  for (const runs::RunInfo& info : infos) {
    absl::StatusOr<runs::RunView> view = registry.Get(info.id);
    if (!view.ok()) continue;  // evicted between List and Get
    out.push_back(Describe(view->info, *view, input, nullptr));
    if (info.response_run == 0) continue;
    absl::StatusOr<runs::RunView> response = registry.Get(info.response_run);
    if (response.ok()) out.push_back(Describe(response->info, *response, input, &info));
  }
  return out;
}

}  // namespace perld::http
