#include "daemon/core/long_hash_map_latency_recorder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/core/latency_bucket_sort.h"

namespace perld {

template <typename Map>
absl::StatusOr<std::unique_ptr<BasicLongHashMapLatencyRecorder<Map>>>
BasicLongHashMapLatencyRecorder<Map>::Create(int64_t min_latency, int64_t max_latency,
                                             int64_t max_map_size_mb) {
  if (absl::Status s = ValidateMapRecorderArgs(min_latency, max_latency, max_map_size_mb);
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<BasicLongHashMapLatencyRecorder>(
      new BasicLongHashMapLatencyRecorder(min_latency, max_latency, max_map_size_mb << 20));
}

template <typename Map>
BasicLongHashMapLatencyRecorder<Map>::BasicLongHashMapLatencyRecorder(int64_t min_latency,
                                                                      int64_t max_latency,
                                                                      int64_t max_map_bytes)
    : LatencyRecorder(RecorderKind::kLongHashMap, min_latency, max_latency),
      lowest_(max_latency),
      highest_(min_latency),
      max_map_bytes_(max_map_bytes) {}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::RecordBatch(const TimeStamp* ts, size_t n) {
  // Runs of one latency (a fast closed-loop bench: most records share a
  // value) are summed in registers and added to the map once per run; the
  // map's counts are the same, the per-record probe is gone.
  int64_t run_latency = -1;  // below every valid latency
  int64_t run_count = 0;
  RecordBatchWith(ts, n, [&](int64_t latency, int64_t count) {
    if (latency == run_latency) {
      run_count += count;
      return;
    }
    if (run_count > 0) Add(run_latency, run_count);
    run_latency = latency;
    run_count = count;
  });
  if (run_count > 0) Add(run_latency, run_count);
}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::ReportLatency(int64_t latency, int64_t count) {
  CheckUnchecked(latency, count);
  Add(latency, count);
}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::ReportBuckets(const LatencyBucket* buckets, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    ReportLatency(buckets[i].latency, buckets[i].count);
  }
}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::ExtractAscending(internal::ExtractionVisitor& visitor) {
  const size_t size = map_.size();
  if (size != 0) {
    const auto span = static_cast<uint64_t>(highest_) - static_cast<uint64_t>(lowest_) + 1;
    if (span <= 2 * static_cast<uint64_t>(size)) {
      ExtractDense(visitor, static_cast<size_t>(span));
    } else {
      ExtractSparse(visitor, size);
    }
  }
  map_bytes_ = 0;
  lowest_ = max_latency();
  highest_ = min_latency();
}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::ExtractDense(internal::ExtractionVisitor& visitor,
                                                        size_t span) {
  // Direct addressing over the observed span: the drain scatters each count
  // to (latency - lowest), the walk reads them back in order. No sort.
  if (dense_.size() < span) {
    dense_.resize(span);
  }
  int64_t* const counts = dense_.data();
  std::fill_n(counts, span, 0);
  const int64_t base = lowest_;
  map_.Drain([&](int64_t latency, int64_t count) { counts[latency - base] = count; });
  for (size_t i = 0; i < span; ++i) {
    if (counts[i] != 0) {
      visitor.Add(base + static_cast<int64_t>(i), counts[i]);
    }
  }
}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::ExtractSparse(internal::ExtractionVisitor& visitor,
                                                         size_t size) {
  if (sorted_.size() < size) {
    sorted_.resize(size);
    scratch_.resize(size);
  }
  LatencyBucket* out = sorted_.data();
  map_.Drain([&out](int64_t latency, int64_t count) { *out++ = LatencyBucket{latency, count}; });
  const LatencyBucket* sorted =
      SortBucketsByLatency(sorted_.data(), scratch_.data(), size, lowest_, highest_, &histogram_);
  for (size_t i = 0; i < size; ++i) {
    visitor.Add(sorted[i].latency, sorted[i].count);
  }
}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::ForEachBucket(internal::BucketForwarder& out) const {
  map_.ForEach([&out](int64_t latency, int64_t count) { out.Add(latency, count); });
}

template <typename Map>
void BasicLongHashMapLatencyRecorder<Map>::ClearDistribution() {
  if (!map_.empty()) {
    map_.Clear();
  }
  map_bytes_ = 0;
  lowest_ = max_latency();
  highest_ = min_latency();
}

template class BasicLongHashMapLatencyRecorder<InterleavedLongMap>;
template class BasicLongHashMapLatencyRecorder<AbslLongMap>;

}  // namespace perld
