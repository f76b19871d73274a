// HashMapLatencyRecorder: the reference exact distribution in a node-based
// std::unordered_map<int64_t, int64_t> (SBK's boxed HashMapLatencyRecorder).
//
// For equivalence tests and benchmarks only; the builder never selects it.
// It is deliberately simple: one node allocation per new distinct latency,
// extraction copies the entries into a fresh vector, sorts it and clears the
// map (freeing every node). Same budget policy as the primitive map: 16
// logical bytes per distinct latency against max_map_size_mb.
//
// Threads: single owner (see LatencyRecorder).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "daemon/core/latency_recorder.h"

namespace perld {

class HashMapLatencyRecorder final : public LatencyRecorder {
 public:
  static constexpr int64_t kBytesPerDistinct = 16;

  // InvalidArgument unless 0 <= min_latency <= max_latency and
  // max_map_size_mb >= 1.
  static absl::StatusOr<std::unique_ptr<HashMapLatencyRecorder>> Create(int64_t min_latency,
                                                                        int64_t max_latency,
                                                                        int64_t max_map_size_mb);

  void RecordBatch(const TimeStamp* ts, size_t n) override;
  bool IsFull() const override { return map_bytes_ > max_map_bytes_ || window().IsOverflow(); }
  size_t RetainedBytes() const override;
  size_t BudgetBytes() const override { return static_cast<size_t>(max_map_bytes_); }

  size_t distinct() const { return map_.size(); }
  int64_t map_bytes() const { return map_bytes_; }

 private:
  HashMapLatencyRecorder(int64_t min_latency, int64_t max_latency, int64_t max_map_bytes);

  void Add(int64_t latency, int64_t count) {
    auto [it, inserted] = map_.try_emplace(latency, count);
    if (inserted) {
      map_bytes_ += kBytesPerDistinct;
    } else {
      it->second += count;
    }
  }

  void ReportLatency(int64_t latency, int64_t count) override;
  void ReportBuckets(const LatencyBucket* buckets, size_t n) override;
  void ExtractAscending(internal::ExtractionVisitor& visitor) override;
  void ForEachBucket(internal::BucketForwarder& out) const override;
  void ClearDistribution() override;

  std::unordered_map<int64_t, int64_t> map_;
  int64_t map_bytes_ = 0;
  const int64_t max_map_bytes_;
};

}  // namespace perld
