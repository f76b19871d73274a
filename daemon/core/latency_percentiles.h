// Exact percentiles from an ascending walk over (latency, count) buckets.
//
// Index rule (SBK LatencyPercentiles): with V = the window's valid record
// count and f = percent / 100.0, the percentile is the latency of the bucket
// whose cumulative interval [start, start + count) holds
//     index(f) = floor(V * f)          (double product, truncated)
// The count reported with it is that bucket's own count (the number of
// records with exactly that latency), as SBK's latenciesCount. The median is
// the latency at index V >> 1. One departure from SBK: index(f) is clamped to
// V - 1, so 100 reports the largest valid latency (SBK leaves it 0) and a
// rounding-up double product can never miss. An empty window (V = 0) reports
// 0 for every value and count.
//
// PercentileSet is immutable once built; share it across threads.
// PercentileWalker is a per-extraction cursor owned by the recorder thread;
// Add() is inline, O(1) amortized, allocation-free: all requested
// percentiles come from ONE pass over the buckets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/latency_snapshot.h"

namespace perld {

// OK, or InvalidArgument naming the key "percentiles": every value finite,
// in [0, 100], no duplicates. Any order. 0 is the minimum (index 0) and
// 100 the maximum (index valid - 1) of the distribution; the config key
// `percentiles` keeps SBK's (0, 100].
[[nodiscard]] absl::Status ValidatePercentiles(std::span<const double> percents);

class PercentileSet {
 public:
  // Sorts `percents` ascending and validates them (ValidatePercentiles).
  static absl::StatusOr<PercentileSet> Create(std::vector<double> percents);
  // SBK's default set (DefaultPercentiles()).
  static PercentileSet Default();

  const std::vector<double>& percents() const { return percents_; }
  const std::vector<double>& fractions() const { return fractions_; }
  size_t size() const { return percents_.size(); }

  // The bucket index for fractions()[i] in a window of `valid` records, as
  // in the header comment. REQUIRES: valid >= 1.
  int64_t Index(size_t i, int64_t valid) const;

 private:
  explicit PercentileSet(std::vector<double> sorted_percents);
  std::vector<double> percents_;
  std::vector<double> fractions_;
};

class PercentileWalker {
 public:
  // Prepares `out`'s percentile vectors (reusing their capacity) for a window
  // of `valid` records. `set` and `out` must outlive the walk.
  PercentileWalker(const PercentileSet& set, int64_t valid, LatencySnapshot* out);

  // Feeds the next bucket. REQUIRES: latencies strictly ascending across
  // calls, count >= 1.
  void Add(int64_t latency, int64_t count) {
    const int64_t next = cumulative_ + count;
    if (median_index_ >= cumulative_ && median_index_ < next) {
      out_->median = latency;
    }
    while (next_index_ < next) {
      out_->values[next_] = latency;
      out_->counts[next_] = count;
      Advance();
    }
    cumulative_ = next;
  }

  // Sum of the counts fed so far (equals `valid` after a complete walk).
  int64_t cumulative() const { return cumulative_; }

 private:
  static constexpr int64_t kDone = std::numeric_limits<int64_t>::max();
  void Advance();

  const PercentileSet& set_;
  LatencySnapshot* out_;
  int64_t valid_;
  int64_t median_index_;
  size_t next_ = 0;  // next percentile to locate
  int64_t next_index_ = kDone;
  int64_t cumulative_ = 0;
};

}  // namespace perld
