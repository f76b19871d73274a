// `perlctl compare A B`: two runs' exact totals side by side -- records,
// rate, invalid, min, avg, the percentiles, max -- with B's absolute and
// relative change from A, and a regression gate:
//
//   --fail-if TERM[,TERM]...   TERM := METRIC (> | <) CHANGE
//   METRIC := pN | min | max | avg | invalid | records | rate  (as in slo.h)
//   CHANGE := a signed number with % (relative to A) or, for a latency, a
//             unit (ns, us, mcs, ms, s; bare: the compared unit)
//
// e.g. 'p99>+5%,p99.9>+10%,max>+2ms,rate<-10%': the gate fails when B's
// change from A passes a term's limit in its direction. Runs of different
// units are compared in the finer one (latencies scale exactly).
//
// Pure functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/slo.h"

namespace perld::perlctl {

struct RegressionTerm {
  std::string text;  // as written, spaces removed
  SloTerm::Metric metric = SloTerm::Metric::kPercentile;
  double percent = 0;         // kPercentile
  bool above = true;          // '>': fails when the change is above the limit; '<': below
  double limit = 0;           // signed
  bool relative = false;      // % of A
  int64_t limit_unit_ns = 0;  // an absolute latency's unit as written; 0: the compared unit
};

// InvalidArgument naming the term and what is wrong with it.
absl::StatusOr<std::vector<RegressionTerm>> ParseFailIf(const std::string& expression);

// Both runs' facts in one unit (the finer): latencies multiplied exactly.
void ToCommonUnit(SloFacts* a, SloFacts* b);

struct CompareRow {
  std::string metric;  // "records", "rate", "invalid", "min", "avg", "p99", "max"
  bool latency = false;
  std::optional<double> a, b;  // none: not measured (no latency, a total that is not exact)
  std::optional<double> delta() const;
  std::optional<double> relative() const;  // percent; none when A is 0
};

// The rows for `percents` (in order), with the counts and min/avg/max.
std::vector<CompareRow> CompareRows(const SloFacts& a, const SloFacts& b,
                                    const std::vector<double>& percents);

struct RegressionVerdict {
  const RegressionTerm* term = nullptr;
  bool failed = false;
  std::string line;  // "FAIL p99>+5%: 1830 -> 2011 ns (+9.9%)"
};

std::vector<RegressionVerdict> EvaluateFailIf(const std::vector<RegressionTerm>& terms,
                                              const SloFacts& a, const SloFacts& b);

// The human table: one row per metric, A, B, B-A and the relative change.
std::string CompareTable(const std::vector<CompareRow>& rows, const char* unit);

}  // namespace perld::perlctl
