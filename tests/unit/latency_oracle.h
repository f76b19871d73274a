// Test oracle for exact latency windows: keeps every raw observation and
// computes the expected LatencySnapshot from scratch with a sorted vector,
// independently of the recorders' bucket walk.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_recorder.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/core/time_stamp.h"

namespace perld::testing {

struct Observation {
  int64_t latency = 0;
  int32_t records = 1;
  int32_t bytes = 0;
};

class SortedVectorOracle {
 public:
  SortedVectorOracle(int64_t min_bound, int64_t max_bound) : lo_(min_bound), hi_(max_bound) {}

  void Add(const Observation& o) { raw_.push_back(o); }
  void Add(const std::vector<Observation>& obs) { raw_.insert(raw_.end(), obs.begin(), obs.end()); }
  void Clear() { raw_.clear(); }

  // Expected snapshot (times excluded: the caller sets them).
  LatencySnapshot Expect(const PercentileSet& set) const {
    LatencySnapshot s;
    int64_t min = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> values;  // one entry per valid record
    for (const Observation& o : raw_) {
      if (o.records < 1) {
        ++s.rejected;
        continue;
      }
      s.records += o.records;
      s.bytes += o.bytes;
      if (o.latency < 0) {
        s.invalid += o.records;
        continue;
      }
      min = std::min(min, o.latency);
      s.max_latency = std::max(s.max_latency, o.latency);
      s.total_latency += o.latency * o.records;
      if (o.latency < lo_) {
        s.lower_discard += o.records;
      } else if (o.latency > hi_) {
        s.higher_discard += o.records;
      } else {
        s.valid += o.records;
        values.insert(values.end(), static_cast<size_t>(o.records), o.latency);
      }
    }
    s.min_latency = min == std::numeric_limits<int64_t>::max() ? 0 : min;
    std::sort(values.begin(), values.end());
    const auto n = static_cast<int64_t>(values.size());
    s.percents = set.percents();
    s.fractions = set.fractions();
    s.values.assign(set.size(), 0);
    s.counts.assign(set.size(), 0);
    if (n > 0) {
      for (size_t i = 0; i < set.size(); ++i) {
        // SBK: (long)(total * (percent / 100.0)), clamped to the last record.
        auto idx = static_cast<int64_t>(static_cast<double>(n) * (set.percents()[i] / 100.0));
        idx = std::min(idx, n - 1);
        const int64_t v = values[static_cast<size_t>(idx)];
        s.values[i] = v;
        s.counts[i] = std::upper_bound(values.begin(), values.end(), v) -
                      std::lower_bound(values.begin(), values.end(), v);
      }
      s.median = values[static_cast<size_t>(n >> 1)];
    }
    return s;
  }

  // Expected ascending buckets.
  std::vector<LatencyBucket> Buckets() const {
    std::vector<LatencyBucket> out;
    std::vector<Observation> v;
    for (const Observation& o : raw_) {
      if (o.records >= 1 && o.latency >= lo_ && o.latency <= hi_) {
        v.push_back(o);
      }
    }
    std::sort(v.begin(), v.end(),
              [](const Observation& a, const Observation& b) { return a.latency < b.latency; });
    for (const Observation& o : v) {
      if (!out.empty() && out.back().latency == o.latency) {
        out.back().count += o.records;
      } else {
        out.push_back(LatencyBucket{o.latency, o.records});
      }
    }
    return out;
  }

 private:
  int64_t lo_;
  int64_t hi_;
  std::vector<Observation> raw_;
};

inline std::vector<TimeStamp> ToTimeStamps(const std::vector<Observation>& obs, int64_t t0 = 1000) {
  std::vector<TimeStamp> ts;
  ts.reserve(obs.size());
  int64_t t = t0;
  for (const Observation& o : obs) {
    ts.push_back(TimeStamp{t, t + o.latency, o.records, o.bytes});
    ++t;
  }
  return ts;
}

// Clustered lognormal stream: most values near a mode, a sparse long tail,
// clamped to [0, span) then shifted by `base`. Deterministic for a seed.
inline std::vector<Observation> ClusteredLognormal(size_t n, int64_t base, int64_t span,
                                                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double mu = std::log(static_cast<double>(span) / 64.0);
  std::lognormal_distribution<double> dist(mu, 0.8);
  std::vector<Observation> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto v = static_cast<int64_t>(dist(rng));
    v = std::min<int64_t>(v, span - 1);
    out.push_back(Observation{base + v, 1, 64});
  }
  return out;
}

// Collects buckets streamed through a LatencyBucketSink.
class CollectingSink : public LatencyBucketSink {
 public:
  void OnBuckets(std::span<const LatencyBucket> buckets) override {
    buckets_.insert(buckets_.end(), buckets.begin(), buckets.end());
  }
  std::vector<LatencyBucket>& buckets() { return buckets_; }

 private:
  std::vector<LatencyBucket> buckets_;
};

}  // namespace perld::testing
