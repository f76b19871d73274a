#include "daemon/core/percentile_index.h"

#include <algorithm>
#include <utility>

#include "daemon/core/latency_window.h"
#include "daemon/core/run_total.h"

namespace perld {

void PercentileIndex::Assign(std::vector<LatencyBucket> ascending) {
  buckets_ = std::move(ascending);
  Rebuild();
}

void PercentileIndex::AssignMerged(const PercentileIndex& base,
                                   std::span<const LatencyBucket> ascending) {
  MergeAscendingInto(base.buckets_, ascending, &buckets_);
  cumulative_.reserve(buckets_.size());  // exactly: no doubling past the buckets
  Rebuild();
}

void PercentileIndex::Merge(std::span<const LatencyBucket> ascending) {
  MergeAscending(ascending, &buckets_);
  Rebuild();
}

void PercentileIndex::Rebuild() {
  cumulative_.resize(buckets_.size());
  int64_t sum = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    sum = internal::SatAdd(sum, buckets_[i].count);
    cumulative_[i] = sum;
  }
}

const LatencyBucket& PercentileIndex::At(int64_t index) const {
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), index);
  return buckets_[static_cast<size_t>(it - cumulative_.begin())];
}

void PercentileIndex::Fill(const PercentileSet& set, LatencySnapshot* out) const {
  const int64_t n = valid();
  out->percents = set.percents();
  out->fractions = set.fractions();
  out->values.assign(set.size(), 0);
  out->counts.assign(set.size(), 0);
  out->median = 0;
  if (n <= 0) return;
  for (size_t i = 0; i < set.size(); ++i) {
    const LatencyBucket& b = At(set.Index(i, n));
    out->values[i] = b.latency;
    out->counts[i] = b.count;
  }
  out->median = At(set.MedianIndex(n)).latency;
}

}  // namespace perld
