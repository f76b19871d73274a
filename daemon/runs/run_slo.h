// RunSlo: the daemon's side of a run started with an SLO (RunSpec::slo,
// perlctl bench/load --slo). The run manager evaluates the SLO on the run's
// exact total so far after every closed periodic window (holding/failing)
// and on its final total when it ends (passed/failed); the verdict is the
// run's SloStatus (stored, shown by perlctl show, JSON and the live page).
// With abort_on_fail, a verdict whose failure no later record can undo
// (SloFailureIsFinal: invalid=0 with an invalid latency, max<=X exceeded)
// names the term that stops the run.
//
// The terms are slo.h's, the same perlctl check reads, so the daemon and
// `perlctl check` give one answer for one total. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/runs/run_info.h"

namespace perld::runs {

// OK for a spec without an SLO or with one that parses; InvalidArgument
// "slo: ..." (naming the term) otherwise.
absl::Status CheckRunSlo(const RunSpec& spec);

// The percents the SLO's pN terms ask for, in the expression's order (a
// spec whose SLO does not parse asks for none).
std::vector<double> SloPercents(const RunSpec& spec);

struct RunSloVerdict {
  SloStatus status;
  // A term that failed for good ("invalid=0: 3"); "" when none did.
  std::string failed_for_good;
};

// spec.slo on `total`: its counters and, when `exact`, the exact latencies
// at SloPercents(spec) (total.percents/values); `rate_seconds` the span its
// rate divides by; `window` the latest closed periodic window; `final` the
// run has ended. When not `exact`, percentile terms cannot be measured (and
// fail, saying why): never a value from part of the run.
RunSloVerdict EvaluateRunSlo(const RunSpec& spec, const LatencySnapshot& total, double rate_seconds,
                             bool exact, bool final, int64_t window);

}  // namespace perld::runs
