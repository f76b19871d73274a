// The daemon's /metrics: every run in the registry, in the Prometheus text
// format of metrics_exposition.h, labelled by run id, run name and source.
// Reads published snapshots only (RunRegistry::List/Get): a scrape never
// touches the recorder. Pure apart from the registry read; any thread.
#pragma once

#include <string>

#include "daemon/runs/run_registry.h"

namespace perld::http {

std::string RenderRunsExposition(const runs::RunRegistry& registry);

}  // namespace perld::http
