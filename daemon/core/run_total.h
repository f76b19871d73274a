// RunTotal: a run's whole-run result assembled from closed windows -- every
// counter summed exactly, and the exact distribution merged, within a memory
// budget.
//
// Two owners use it:
//   * PeriodicAndTotalWindows, on the recorder thread, adds each segment of
//     its total window (a total window that closes early on its own limit
//     starts a new segment), so a run's final total counts every record of
//     the run however many segments it had;
//   * the daemon's snapshot store adds each closed periodic window, which
//     gives the running total of a live run without touching the recorder.
// Distribution: the merge of the ascending distributions of every window
// added, as a sorted bucket vector (16 bytes per distinct latency). When a
// merge of a second or later window would exceed `budget_bytes` the
// distribution is dropped for good: exact() turns false, the snapshot has
// no percentiles (LatencySnapshot::percentiles_exact) -- never an answer from
// part of the run -- and only the counters go on (they stay exact).
//
// Threads: single owner. Cost: Add is O(D + d) (D carried, d added distinct
// latencies), Snapshot O(D); both allocation-bounded by the budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/core/latency_window.h"
#include "daemon/core/percentile_index.h"

namespace perld {

// The counters a snapshot was built from (inverse of the copy in
// LatencyRecorder::CopyPercentiles, including its "min 0 when none" rule).
LatencyCounters CountersOf(const LatencySnapshot& snapshot);

// Fills `out`'s percentile fields (percents, fractions, values, counts,
// median) for `set` from an ascending distribution by SBK's index rule.
void FillPercentiles(const PercentileSet& set, std::span<const LatencyBucket> ascending,
                     LatencySnapshot* out);

// Why a run total has no percentiles (LatencySnapshot::percentiles_exact
// false), as every output says it.
inline constexpr char kInexactTotalReason[] =
    "not exact: the run's distinct latencies outgrew the run total's memory budget "
    "(exactTotalLatencyMaxMemoryMB / totalMaxHashMapSizeMB), so no percentile is given (one "
    "computed from part of the run would be wrong); the counters are exact. A run that ends "
    "gets exact percentiles from its spilled total segments unless they could not be kept "
    "(retention.maxTotalSegmentBytesPerRun; perld's log says why)";

// Marks `out` as a total without a distribution: no percentile, no median
// (LatencySnapshot::percentiles_exact false).
void ClearPercentiles(LatencySnapshot* out);

// `set`'s percentiles taken from those `stored` already holds (a window or
// total kept without its distribution) into `out`'s percents, fractions,
// values and counts. False, `out` untouched, when one is not among them
// (`*missing`: the first such percent), or when `set` ranks by another rule
// than SBK's (stored percentiles are SBK's; `*missing`: the first percent).
bool PickStoredPercentiles(const LatencySnapshot& stored, const PercentileSet& set,
                           LatencySnapshot* out, double* missing);

// Merges `add` into the ascending distribution `into` (equal latencies sum).
void MergeAscending(std::span<const LatencyBucket> add, std::vector<LatencyBucket>* into);
// Replaces `*out` with the ascending distributions `a` and `b` merged, in
// the capacity `*out` has (it grows only when that is short). REQUIRES:
// neither span points into `*out`.
void MergeAscendingInto(std::span<const LatencyBucket> a, std::span<const LatencyBucket> b,
                        std::vector<LatencyBucket>* out);

class RunTotal {
 public:
  explicit RunTotal(size_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Adds one closed window. REQUIRES: `ascending` strictly ascending, counts
  // >= 1, summing to counters.valid.
  void Add(const LatencyCounters& counters, std::span<const LatencyBucket> ascending);

  // The run total: summed counters, and `set`'s percentiles over the carried
  // distribution. start/end times are the caller's; closed_full and
  // full_closes are left 0.
  void Snapshot(const PercentileSet& set, int64_t start_time, int64_t end_time,
                LatencySnapshot* out) const;
  // `set`'s percentiles into `out` -- none when not exact() (ClearPercentiles).
  void FillPercentiles(const PercentileSet& set, LatencySnapshot* out) const;

  const LatencyCounters& counters() const { return counters_; }
  const std::vector<LatencyBucket>& distribution() const { return index_.buckets(); }
  // The distribution with its cumulative counts: any percentile set in
  // O(P log D).
  const PercentileIndex& index() const { return index_; }
  int64_t windows() const { return windows_; }  // windows added
  bool exact() const { return exact_; }         // distribution covers every window
  size_t RetainedBytes() const { return index_.RetainedBytes(); }

 private:
  size_t budget_bytes_;
  LatencyCounters counters_;
  PercentileIndex index_;
  int64_t windows_ = 0;
  bool exact_ = true;
};

}  // namespace perld
