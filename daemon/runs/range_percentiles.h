// RangePercentiles: the exact answer over a range of a run's periodic
// windows -- counters summed, the stored window distributions merged
// (MergeDistributions) and percentiles taken by SBK's index rule, so the
// answer equals that over the concatenated raw data of those windows.
//
// The range is what the caller asked (window numbers and/or wall-clock
// bounds; StateStore::ReadWindowRange selects the stored windows in it).
// Never an answer from part of the range:
//   OutOfRange          no stored periodic window lies in the range;
//   FailedPrecondition  the range starts before the oldest stored window
//                       (retention.maxWindowsPerRun removed it), a window
//                       in the middle is missing (not stored), or a window
//                       with valid latencies has no stored distribution
//                       (retention.maxWindowDistributionBytesPerRun, or it
//                       was stored before perld kept window distributions).
//
// Pure function, any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/window_record.h"

namespace perld::runs {

struct RangeAnswer {
  LatencySnapshot snapshot;  // the range's counters and the requested percentiles
  int64_t first_window = 0;  // seq of the first and last window merged
  int64_t last_window = 0;
  int64_t windows = 0;
  int64_t start_unix_ms = 0;  // the first window's start, the last one's end
  int64_t end_unix_ms = 0;
  double seconds = 0;  // the windows' lengths summed
};

// `windows`: the stored periodic windows in the range, ascending seq, with
// their distributions. `first_asked`: the first window number asked (0: the
// range starts at a time, or at the run's start). `merged` (may be null)
// receives the range's exact distribution.
absl::StatusOr<RangeAnswer> RangePercentiles(RunId run, std::span<const WindowRecord> windows,
                                             int64_t first_asked, const PercentileSet& set,
                                             std::vector<LatencyBucket>* merged = nullptr);

}  // namespace perld::runs
