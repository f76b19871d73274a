// StoredTotals: how a run total too large for memory is answered from the
// state store, as the streaming merge of its stored distributions
// (StateStore::MergeTotalSegments / MergeRunningTotal; the daemon wires them,
// tests may fake them).
//
//   final_total    a spilled final total (WindowRecord::spilled): the run's
//                  newest `segments` stored total segments;
//   running_total  a running run whose live total outgrew its memory
//                  budget: the total segments since its warm-up, then the
//                  periodic windows after the last of them (the segments
//                  partition the run's periodic windows, in order).
// Each fills `set`'s percentiles into `out`, which holds the total's counters
// (a merge that holds another count is DataLoss). Called on any thread,
// never under the registry's lock.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/runs/run_info.h"

namespace perld::runs {

// A running total's stored parts: total segments first_segment..last_segment
// (none when first_segment is 0) and periodic windows first_window..
// last_window (none when first_window > last_window).
struct RunningTotalParts {
  int64_t first_segment = 0;
  int64_t last_segment = 0;
  int64_t first_window = 1;
  int64_t last_window = 0;
  bool operator==(const RunningTotalParts&) const = default;
};

struct StoredTotals {
  std::function<absl::Status(RunId id, int64_t segments, const PercentileSet& set,
                             LatencySnapshot* out)>
      final_total;
  std::function<absl::Status(RunId id, const RunningTotalParts& parts, const PercentileSet& set,
                             LatencySnapshot* out)>
      running_total;
};

}  // namespace perld::runs
