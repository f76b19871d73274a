// The daemon's per-run Prometheus families: which runs are exported
// (bounded cardinality) and each run's RunMetrics, built from the registry's
// published snapshots (RunRegistry::List/Get: a scrape never touches the
// recorder thread), rendered by run_metrics.h.
//
// Selection: running runs, and ended runs within prometheus.finishedRunSeconds
// of their end; of those, the prometheus.maxRuns most recent (highest ids),
// exported most recent first. The others are left out and counted in
// `omitted`. Identity labels: run_id, run (the name), source.
//
// Pure apart from the registry read; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"
#include "daemon/http/run_metrics.h"
#include "daemon/runs/run_manager.h"
#include "daemon/runs/run_registry.h"

namespace perld::http {

struct RunsExpositionInput {
  config::PrometheusConfig prometheus;
  int64_t now_unix_ms = 0;
  std::map<runs::RunId, runs::ChannelCounters> channels;  // RunManager::ChannelCounts
  // Remote clients per run: {connected now, ever joined}.
  std::map<runs::RunId, std::pair<int, int>> connections;
};

// The RunMetrics of the selected runs, most recent first; `omitted` gets the
// number of runs over prometheus.maxRuns.
std::vector<RunMetrics> SelectRunMetrics(const runs::RunRegistry& registry,
                                         const RunsExpositionInput& input, int64_t* omitted);

}  // namespace perld::http
