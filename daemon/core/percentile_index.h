// PercentileIndex: an exact distribution (ascending buckets) with its
// cumulative counts, so any set of percentiles is answered by binary search:
// O(P log D) for P percentiles over D distinct latencies, instead of a walk
// over every bucket. Queries against a live run's total ask this many times
// per interval while the distribution changes once per interval.
//
// Results are exactly those of FillPercentiles / PercentileWalker (SBK's
// index rule, latency_percentiles.h).
//
// Threads: none; the owner synchronizes (the run registry's lock).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"

namespace perld {

class PercentileIndex {
 public:
  PercentileIndex() = default;
  // REQUIRES: strictly ascending latencies, counts >= 1.
  explicit PercentileIndex(std::vector<LatencyBucket> ascending) { Assign(std::move(ascending)); }

  void Assign(std::vector<LatencyBucket> ascending);
  // Adds an ascending distribution (equal latencies sum). O(D + d).
  void Merge(std::span<const LatencyBucket> ascending);
  // Becomes `base` with `ascending` merged in, reusing this index's memory
  // (`base` is only read). O(D + d). REQUIRES: &base != this.
  void AssignMerged(const PercentileIndex& base, std::span<const LatencyBucket> ascending);
  void Clear() {  // and frees the memory
    std::vector<LatencyBucket>().swap(buckets_);
    std::vector<int64_t>().swap(cumulative_);
  }

  // Fills `out`'s percents, fractions, values, counts and median for `set`.
  void Fill(const PercentileSet& set, LatencySnapshot* out) const;

  int64_t valid() const { return cumulative_.empty() ? 0 : cumulative_.back(); }
  const std::vector<LatencyBucket>& buckets() const { return buckets_; }
  bool empty() const { return buckets_.empty(); }
  size_t RetainedBytes() const {
    return buckets_.capacity() * sizeof(LatencyBucket) + cumulative_.capacity() * sizeof(int64_t);
  }

 private:
  // The bucket holding record number `index` (0-based). REQUIRES: index < valid().
  const LatencyBucket& At(int64_t index) const;
  void Rebuild();

  std::vector<LatencyBucket> buckets_;
  std::vector<int64_t> cumulative_;  // cumulative_[i]: records in buckets_[0..i]
};

}  // namespace perld
