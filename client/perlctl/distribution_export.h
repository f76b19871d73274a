// `perlctl export RUN --format json|csv|hgrm`: an ended run's exact total
// distribution for other tools, every value exact.
//
//   json  {"runId", "runName", "timeUnit", a range's "firstWindow" and
//         "lastWindow", the total's (range's) counters, "latencies":
//         [[latency, count], ...]} -- the shape of `perlctl load
//         --distribution-out`
//   csv   latency_<unit>,count rows, ascending
//   hgrm  HdrHistogram's percentile-distribution text (Value, Percentile,
//         TotalCount, 1/(1-Percentile), then the #[Mean/Max/Buckets]
//         footer), one row per distinct latency: the percentile is the exact
//         fraction of records at or below it (no bucketing; "Buckets" counts
//         the distinct latencies)
//   hgrm with --method M: HdrHistogram's own percentile ladder instead
//         (outputPercentileDistribution with 5 ticks per half distance:
//         levels 0, 10, ..., 50, 55, ..., 75, 77.5, ...; one row per level
//         up to the first in the maximum's bucket, then the 100% row), each
//         level's value the exact record picked by rule M
//         (latency_percentiles.h) and TotalCount the records at or below it
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/core/latency_percentiles.h"
#include "perld/v1/perld.pb.h"

namespace perld::perlctl {

struct ExportedDistribution {
  uint64_t run_id = 0;
  std::string run_name;
  const char* unit = "ns";
  v1::Window total;  // the run's final total, or the range's counters
  // A range's first and last window (0: the run's total).
  int64_t first_window = 0;
  int64_t last_window = 0;
  std::vector<std::pair<int64_t, int64_t>> buckets;  // ascending latency -> count
};

std::string DistributionJson(const ExportedDistribution& d);
std::string DistributionCsv(const ExportedDistribution& d);
std::string DistributionHgrm(const ExportedDistribution& d);
std::string DistributionHgrmLadder(const ExportedDistribution& d, PercentileMethod method);

}  // namespace perld::perlctl
