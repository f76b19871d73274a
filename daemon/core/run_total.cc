#include "daemon/core/run_total.h"

#include <algorithm>

namespace perld {

LatencyCounters CountersOf(const LatencySnapshot& s) {
  LatencyCounters c;
  c.records = s.records;
  c.bytes = s.bytes;
  c.total_latency = s.total_latency;
  const bool any_latency = s.valid + s.lower_discard + s.higher_discard > 0;
  c.min_latency = any_latency ? s.min_latency : kNoMinLatency;
  c.max_latency = s.max_latency;
  c.invalid = s.invalid;
  c.lower_discard = s.lower_discard;
  c.higher_discard = s.higher_discard;
  c.valid = s.valid;
  c.rejected = s.rejected;
  return c;
}

void FillPercentiles(const PercentileSet& set, std::span<const LatencyBucket> ascending,
                     LatencySnapshot* out) {
  int64_t valid = 0;
  for (const LatencyBucket& b : ascending) valid += b.count;
  PercentileWalker walker(set, valid, out);
  for (const LatencyBucket& b : ascending) walker.Add(b.latency, b.count);
}

void MergeAscending(std::span<const LatencyBucket> add, std::vector<LatencyBucket>* into) {
  if (add.empty()) return;
  if (into->empty() || into->back().latency < add.front().latency) {
    into->insert(into->end(), add.begin(), add.end());
    return;
  }
  std::vector<LatencyBucket> merged;
  MergeAscendingInto(*into, add, &merged);
  into->swap(merged);
}

void MergeAscendingInto(std::span<const LatencyBucket> x, std::span<const LatencyBucket> y,
                        std::vector<LatencyBucket>* out) {
  std::vector<LatencyBucket>& merged = *out;
  merged.clear();
  merged.reserve(x.size() + y.size());
  auto a = x.begin();
  auto b = y.begin();
  while (a != x.end() && b != y.end()) {
    if (a->latency < b->latency) {
      merged.push_back(*a++);
    } else if (b->latency < a->latency) {
      merged.push_back(*b++);
    } else {
      merged.push_back(LatencyBucket{a->latency, internal::SatAdd(a->count, b->count)});
      ++a;
      ++b;
    }
  }
  merged.insert(merged.end(), a, x.end());
  merged.insert(merged.end(), b, y.end());
}

void RunTotal::Add(const LatencyCounters& counters, std::span<const LatencyBucket> ascending) {
  counters_.Merge(counters);
  ++windows_;
  if (!exact_) return;
  index_.Merge(ascending);
  if (index_.buckets().size() * sizeof(LatencyBucket) > budget_bytes_ && windows_ > 1) {
    // The distribution no longer fits: dropped, so no percentile is ever
    // computed from part of the run.
    exact_ = false;
    index_.Assign({});
  }
}

void RunTotal::Snapshot(const PercentileSet& set, int64_t start_time, int64_t end_time,
                        LatencySnapshot* out) const {
  const LatencyCounters& c = counters_;
  out->start_time = start_time;
  out->end_time = end_time;
  out->records = c.records;
  out->bytes = c.bytes;
  out->total_latency = c.total_latency;
  out->min_latency = c.min_latency == kNoMinLatency ? 0 : c.min_latency;
  out->max_latency = c.max_latency;
  out->invalid = c.invalid;
  out->lower_discard = c.lower_discard;
  out->higher_discard = c.higher_discard;
  out->valid = c.valid;
  out->rejected = c.rejected;
  out->overflow = c.total_latency > LatencyWindow::kTotalLatencyMax ||
                  c.bytes > LatencyWindow::kTotalBytesMax ||
                  c.records > LatencyWindow::kTotalRecordsMax;
  out->closed_full = false;
  out->full_closes = 0;
  FillPercentiles(set, out);
}

void RunTotal::FillPercentiles(const PercentileSet& set, LatencySnapshot* out) const {
  if (exact_) {
    index_.Fill(set, out);
  } else {
    ClearPercentiles(out);
  }
}

bool PickStoredPercentiles(const LatencySnapshot& stored, const PercentileSet& set,
                           LatencySnapshot* out, double* missing) {
  if (set.method() != PercentileMethod::kSbk && set.size() > 0) {
    *missing = set.percents().front();
    return false;
  }
  std::vector<int64_t> values;
  std::vector<int64_t> counts;
  values.reserve(set.size());
  counts.reserve(set.size());
  for (double p : set.percents()) {
    auto it = std::find(stored.percents.begin(), stored.percents.end(), p);
    if (it == stored.percents.end()) {
      *missing = p;
      return false;
    }
    const auto i = static_cast<size_t>(it - stored.percents.begin());
    values.push_back(stored.values[i]);
    counts.push_back(stored.counts[i]);
  }
  out->percents = set.percents();
  out->fractions = set.fractions();
  out->values = std::move(values);
  out->counts = std::move(counts);
  return true;
}

void ClearPercentiles(LatencySnapshot* out) {
  out->percents.clear();
  out->fractions.clear();
  out->values.clear();
  out->counts.clear();
  out->median = 0;
  out->percentiles_exact = false;
}

}  // namespace perld
