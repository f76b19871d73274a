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
// Other tools rank differently, so the same data gives them other p99s. A
// PercentileSet carries one of three rules (PercentileMethod), each exact on
// the exact distribution; with r the 1-based rank of the record reported:
//   kSbk          the rule above: r = floor(V * f) + 1, at most V; the
//                 median is the record at index V >> 1 (SBK medianIndex)
//   kNearestRank  HdrHistogram Java (getValueAtPercentile, and its
//                 percentile-distribution output): r = max(1, ceil(V * f')),
//                 f' = nextDown(percent) / 100, at most V -- the smallest
//                 value with at least f of the records at or below it
//   kHdr          HdrHistogram C (hdr_value_at_percentile): r = max(1,
//                 (int64)(f * V + 0.5)), at most V -- rank rounded to nearest
// Example, V = 10 records 1..10 (sbk, nearest-rank, hdr): p50 is 6, 5, 5;
// p30 is 4, 3, 3; p12 is 2, 2, 1; p95 is 10, 10, 10. With the
// non-SBK rules the median is the method's p50.
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
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/latency_snapshot.h"

namespace perld {

enum class PercentileMethod { kSbk, kNearestRank, kHdr };

// "sbk", "nearest-rank", "hdr" (the names of perlctl's --method).
const char* PercentileMethodName(PercentileMethod method);
// The method named `name` (PercentileMethodName), or InvalidArgument.
absl::StatusOr<PercentileMethod> ParsePercentileMethod(std::string_view name);

// OK, or InvalidArgument naming the key "percentiles": every value finite,
// in [0, 100], no duplicates. Any order. 0 is the minimum (index 0) and
// 100 the maximum (index valid - 1) of the distribution; the config key
// `percentiles` keeps SBK's (0, 100].
[[nodiscard]] absl::Status ValidatePercentiles(std::span<const double> percents);

class PercentileSet {
 public:
  // Sorts `percents` ascending and validates them (ValidatePercentiles).
  static absl::StatusOr<PercentileSet> Create(std::vector<double> percents,
                                              PercentileMethod method = PercentileMethod::kSbk);
  // SBK's default set (DefaultPercentiles()).
  static PercentileSet Default();

  const std::vector<double>& percents() const { return percents_; }
  const std::vector<double>& fractions() const { return fractions_; }
  size_t size() const { return percents_.size(); }
  PercentileMethod method() const { return method_; }

  // The 0-based record index for percents()[i] in a window of `valid`
  // records, by method() (header comment); ascending in i. REQUIRES:
  // valid >= 1.
  int64_t Index(size_t i, int64_t valid) const;
  // The 0-based record index of the median. REQUIRES: valid >= 1.
  int64_t MedianIndex(int64_t valid) const;

 private:
  PercentileSet(std::vector<double> sorted_percents, PercentileMethod method);
  int64_t IndexOf(double percent, double fraction, int64_t valid) const;
  std::vector<double> percents_;
  std::vector<double> fractions_;
  PercentileMethod method_ = PercentileMethod::kSbk;
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
