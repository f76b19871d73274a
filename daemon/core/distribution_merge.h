// MergeDistributions: the exact distribution of several windows together --
// a k-way merge of their ascending distributions (a binary heap of cursors;
// equal latencies sum their counts).
//
// Used wherever an answer covers more than one stored window: a range of a
// run's periodic windows (Query.GetPercentiles with a range). Memory is the
// output plus O(k) for the heap, never a copy of the inputs; time O(N log k)
// for N input buckets. Measured on 996 stored windows of a 20-writer ns
// bench (250,000 buckets, 14,979 distinct): a tree of two-way merges was
// 1.3-1.8x slower (it copies every round), so the heap stays. The output is
// ascending with every count >= 1, so FillPercentiles answers exactly as
// over the concatenated raw data of those windows.
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
