// MergeDistributions: the exact distribution of several windows together --
// a streaming k-way merge of their ascending distributions (equal latencies
// sum their counts).
//
// Used wherever an answer covers more than one stored window: a range of a
// run's periodic windows (Query.GetPercentiles with a range). Memory is the
// output plus O(k) for the heap of cursors, never a copy of the inputs;
// time O(N log k) for N input buckets. The output is ascending with every
// count >= 1, so FillPercentiles answers exactly as over the concatenated
// raw data of those windows.
//
// Pure function, any thread.
#pragma once

#include <span>
#include <vector>

#include "daemon/core/latency_recorder.h"

namespace perld {

// REQUIRES: each input ascending by latency with counts >= 1. Counts that
// would overflow int64 saturate (as MergeAscending).
std::vector<LatencyBucket> MergeDistributions(
    std::span<const std::span<const LatencyBucket>> inputs);

}  // namespace perld
