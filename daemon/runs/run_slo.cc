#include "daemon/runs/run_slo.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/slo.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/run_total.h"

namespace perld::runs {

absl::Status CheckRunSlo(const RunSpec& spec) {
  if (spec.slo.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(spec.slo);
  if (!terms.ok())
    return absl::InvalidArgumentError(absl::StrCat("slo: ", terms.status().message()));
  return absl::OkStatus();
}

std::vector<double> SloPercents(const RunSpec& spec) {
  std::vector<double> percents;
  if (spec.slo.empty()) return percents;
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(spec.slo);
  if (!terms.ok()) return percents;
  for (const SloTerm& t : *terms) {
    if (t.metric == SloTerm::Metric::kPercentile) percents.push_back(t.percent);
  }
  return percents;
}

RunSloVerdict EvaluateRunSlo(const RunSpec& spec, const LatencySnapshot& total, double rate_seconds,
                             bool exact, bool final, int64_t window) {
  RunSloVerdict out;
  absl::StatusOr<std::vector<SloTerm>> terms = ParseSlo(spec.slo);
  if (spec.slo.empty() || !terms.ok()) return out;  // CheckRunSlo refused a bad one
  const TimeUnit unit = spec.latency.time_unit;
  SloFacts facts;
  facts.unit_ns = NanosPerUnit(unit);
  facts.unit = TimeUnitSymbol(unit);
  facts.records = total.records;
  facts.valid = total.valid;
  facts.invalid = total.invalid;
  facts.min = total.min_latency;
  facts.max = total.max_latency;
  facts.avg = total.AvgLatency();
  facts.rate = rate_seconds > 0 ? static_cast<double>(total.records) / rate_seconds : 0;
  if (!exact || !total.percentiles_exact) {
    facts.no_percentiles = absl::StrCat("not exact: ", kInexactTotalReason);
  } else if (total.valid == 0) {
    facts.no_percentiles = "the run has no latency yet";
  } else {
    for (size_t i = 0; i < total.percents.size() && i < total.values.size(); ++i) {
      facts.percentiles[total.percents[i]] = total.values[i];
    }
  }
  const std::vector<SloVerdict> verdicts = EvaluateSlo(*terms, facts);
  bool held = true;
  for (const SloVerdict& v : verdicts) {
    held = held && v.held;
    out.status.verdicts.push_back({v.term->text, v.held, v.line});
    if (out.failed_for_good.empty() && SloFailureIsFinal(v)) {
      out.failed_for_good = v.line.substr(5);  // without "FAIL "
    }
  }
  out.status.window = window;
  out.status.state = final  ? (held ? SloState::kPassed : SloState::kFailed)
                     : held ? SloState::kHolding
                            : SloState::kFailing;
  return out;
}

}  // namespace perld::runs
