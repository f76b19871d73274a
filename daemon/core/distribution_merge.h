// Distribution merges: the exact distribution of several windows together --
// a k-way merge of their ascending distributions (a binary heap of cursors;
// equal latencies sum their counts).
//
// One mechanism for every answer that covers more than one window:
//   * StreamMerge reads its inputs chunk by chunk (BucketSource) and hands
//     the merged buckets to a sink in chunks: memory O(k) cursors plus one
//     output chunk, never a copy of the inputs or of the output. A run total
//     whose segments were spilled to the state store is walked this way
//     (MergedPercentiles), in memory proportional to the number of segments,
//     not to the distinct latencies;
//   * MergeDistributions collects the same merge into a vector: a range of a
//     run's periodic windows (Query.GetPercentiles with a range), whose
//     merged distribution the caller keeps.
// Time O(N log k) for N input buckets. Measured on 996 stored windows of a
// 20-writer ns bench (250,000 buckets, 14,979 distinct): a tree of two-way
// merges was 1.3-1.8x slower (it copies every round), so the heap stays. The
// output is ascending with every count >= 1, so percentiles taken from it
// equal those over the concatenated raw data of the inputs.
//
// Pure functions, any thread. Counts that would overflow int64 saturate.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "daemon/core/bucket_source.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"

namespace perld {

// Merges `sources` into `sink`, ascending, in chunks. Returns the first
// source error (the sink then saw part of the merge only), or
// InvalidArgument when a source breaks the BucketSource contract (not
// ascending, count < 1).
[[nodiscard]] absl::Status StreamMerge(std::span<BucketSource* const> sources,
                                       LatencyBucketSink* sink);

// `set`'s percentiles (values, counts, median) of the merge of `sources`
// into `out`, whose `valid` must already be the inputs' record count: a
// merge that holds a different count is DataLoss (a stored segment does not
// match its counters), and `out`'s percentiles are then cleared.
[[nodiscard]] absl::Status MergedPercentiles(std::span<BucketSource* const> sources,
                                             const PercentileSet& set, LatencySnapshot* out);

// REQUIRES: each input ascending by latency with counts >= 1.
std::vector<LatencyBucket> MergeDistributions(
    std::span<const std::span<const LatencyBucket>> inputs);

}  // namespace perld
