#include "daemon/http/runs_exposition.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/http/metrics_exposition.h"

namespace perld::http {

std::string RenderRunsExposition(const runs::RunRegistry& registry) {
  std::vector<ExpositionInput> inputs;
  for (const runs::RunInfo& info : registry.List({})) {
    absl::StatusOr<runs::RunView> view = registry.Get(info.id);
    if (!view.ok()) continue;  // evicted between List and Get
    ExpositionInput in;
    in.labels.sbk = false;
    in.labels.extra = {{"run_id", absl::StrCat(info.id)},
                       {"run", info.spec.name},
                       {"source", runs::RunSourceName(info.spec.source)}};
    in.unit = info.spec.latency.time_unit;
    if (view->latest) in.interval = ExpositionWindow{view->latest->snapshot, view->latest->seconds};
    if (view->latest || view->total_final) {
      in.total = ExpositionWindow{view->total.snapshot, view->total.seconds};
    }
    inputs.push_back(std::move(in));
  }
  return RenderExposition(inputs);
}

}  // namespace perld::http
