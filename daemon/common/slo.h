// SLO gates: parse a comma-separated list of terms, evaluate them against a
// run's exact total, render the verdicts for people, scripts (JSON) and CI
// systems (JUnit XML). `perlctl check RUN --slo EXPR` evaluates on demand;
// a run started with an SLO (perlctl bench/load --slo) is evaluated by the
// daemon at every closed window and at its end (daemon/runs/run_slo.h).
//
//   EXPR  := TERM [, TERM]...
//   TERM  := METRIC OP VALUE
//   METRIC:= pN (an exact percentile, N in [0, 100]; p0 the minimum, p100
//            the maximum) | min | max | avg   -- latencies
//          | invalid | records                -- counts
//          | rate                             -- records per second
//   OP    := <= | < | >= | > | = (or ==)
//   VALUE := a number; a latency may carry its unit (ns, us, mcs, ms, s),
//            a bare number is in the run's unit.
//
// e.g. 'p99<=2ms,p99.9<=5ms,invalid=0,records>=1000000,rate>=50000'.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld {

struct SloTerm {
  enum class Metric { kPercentile, kMin, kMax, kAvg, kInvalid, kRecords, kRate };
  enum class Op { kLe, kLt, kGe, kGt, kEq };
  std::string text;  // as written, spaces removed: "p99<=2ms"
  Metric metric = Metric::kPercentile;
  double percent = 0;  // kPercentile
  Op op = Op::kLe;
  double value = 0;
  int64_t value_unit_ns = 0;  // a latency's unit as written; 0: the run's unit

  bool latency() const { return IsLatency(metric); }
  // pN, min, max and avg are latencies (in a unit); the rest counts or rates.
  static bool IsLatency(Metric m) {
    return m == Metric::kPercentile || m == Metric::kMin || m == Metric::kMax || m == Metric::kAvg;
  }
};

// InvalidArgument naming the term and what is wrong with it ("'p99<=2x':
// unknown unit 'x' ..."); callers say where the expression came from.
absl::StatusOr<std::vector<SloTerm>> ParseSlo(const std::string& expression);
// A metric's name (any case): pN with N in [0, 100], min, max, avg,
// invalid, records or rate. False for anything else.
bool ParseSloMetric(const std::string& name, SloTerm::Metric* metric, double* percent);
// A number, optionally signed ("+5", "-2.5e3"), and what follows it ("%",
// "ms", ""). False when it does not start with a finite number.
bool SplitAmount(absl::string_view text, double* number, std::string* suffix);
// The metric's name as ParseSloMetric reads it ("p99.9", "max").
std::string SloMetricName(SloTerm::Metric metric, double percent);
// What the metric names accept, for error messages.
inline constexpr char kSloMetrics[] =
    "pN with N in [0, 100], min, max, avg, invalid, records, rate";

// A run's total as the terms read it; latencies in the run's unit.
struct SloFacts {
  int64_t unit_ns = 1;      // nanoseconds per unit of the run
  const char* unit = "ns";  // its symbol
  int64_t records = 0;
  int64_t valid = 0;  // records with a latency in range
  int64_t invalid = 0;
  int64_t min = 0, max = 0;  // meaningful when valid > 0
  double avg = 0;
  double rate = 0;                        // records per second
  std::map<double, int64_t> percentiles;  // exact, by percent
  std::string no_percentiles;             // why none are known ("" when they are)
};

struct SloVerdict {
  const SloTerm* term = nullptr;
  bool held = false;
  std::optional<double> measured;  // none: it could not be measured (why says so)
  double threshold = 0;            // in the run's unit for latencies
  std::string line;                // "PASS p99<=2ms: 1830423 ns (1.83 ms)"
};

// The metric's value in `facts`; none when not measured (then `why` says
// why, if given).
std::optional<double> SloValue(const SloFacts& facts, SloTerm::Metric metric, double percent,
                               std::string* why = nullptr);

std::vector<SloVerdict> EvaluateSlo(const std::vector<SloTerm>& terms, const SloFacts& facts);

// Whether a verdict that failed fails for the rest of the run, whatever the
// run records next: its metric only moves away from the limit as records
// are added. records, invalid and max (p100) only grow, so a failed upper
// bound (<=, <, or = already exceeded) on them is final; min (p0) only
// shrinks, so a failed lower bound (>=, >, or = already undercut) is.
// Percentiles, avg and rate can recover: never final. What a run's
// abortOnFail stops it on.
bool SloFailureIsFinal(const SloVerdict& verdict);

// JUnit XML: one testsuite named after the run, one testcase per term, a
// <failure> for each that did not hold.
std::string SloJunit(const std::string& run_name, const std::vector<SloVerdict>& verdicts);

// A latency in a unit fit for people: "830 ns", "1.83 ms", "2.5 s".
std::string HumanLatency(double value, int64_t unit_ns);
// Nanoseconds per unit of a latency suffix (ns, us, mcs, ms, s); 0 if unknown.
int64_t LatencyUnitNs(absl::string_view unit);

}  // namespace perld
