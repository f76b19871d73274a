#include "daemon/core/hash_map_latency_recorder.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace perld {

absl::StatusOr<std::unique_ptr<HashMapLatencyRecorder>> HashMapLatencyRecorder::Create(
    int64_t min_latency, int64_t max_latency, int64_t max_map_size_mb) {
  if (absl::Status s = ValidateMapRecorderArgs(min_latency, max_latency, max_map_size_mb);
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<HashMapLatencyRecorder>(
      new HashMapLatencyRecorder(min_latency, max_latency, max_map_size_mb << 20));
}

HashMapLatencyRecorder::HashMapLatencyRecorder(int64_t min_latency, int64_t max_latency,
                                               int64_t max_map_bytes)
    : LatencyRecorder(RecorderKind::kHashMap, min_latency, max_latency),
      max_map_bytes_(max_map_bytes) {}

size_t HashMapLatencyRecorder::RetainedBytes() const {
  // Bucket array of pointers plus one node (next pointer, key, count, cached
  // hash) per entry: an estimate, the allocator adds its own overhead.
  return map_.bucket_count() * sizeof(void*) + map_.size() * (sizeof(void*) + 3 * sizeof(int64_t));
}

void HashMapLatencyRecorder::RecordBatch(const TimeStamp* ts, size_t n) {
  RecordBatchWith(ts, n, [this](int64_t latency, int64_t count) { Add(latency, count); });
}

void HashMapLatencyRecorder::ReportLatency(int64_t latency, int64_t count) {
  CheckUnchecked(latency, count);
  Add(latency, count);
}

void HashMapLatencyRecorder::ReportBuckets(const LatencyBucket* buckets, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    ReportLatency(buckets[i].latency, buckets[i].count);
  }
}

void HashMapLatencyRecorder::ExtractAscending(internal::ExtractionVisitor& visitor) {
  std::vector<LatencyBucket> sorted;
  sorted.reserve(map_.size());
  for (const auto& [latency, count] : map_) {
    sorted.push_back(LatencyBucket{latency, count});
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const LatencyBucket& a, const LatencyBucket& b) { return a.latency < b.latency; });
  for (const LatencyBucket& b : sorted) {
    visitor.Add(b.latency, b.count);
  }
  map_.clear();
  map_bytes_ = 0;
}

void HashMapLatencyRecorder::ForEachBucket(internal::BucketForwarder& out) const {
  for (const auto& [latency, count] : map_) {
    out.Add(latency, count);
  }
}

void HashMapLatencyRecorder::ClearDistribution() {
  map_.clear();
  map_bytes_ = 0;
}

}  // namespace perld
