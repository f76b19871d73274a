#include "daemon/core/array_latency_recorder.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace perld {

absl::StatusOr<std::unique_ptr<ArrayLatencyRecorder>> ArrayLatencyRecorder::Create(
    int64_t min_latency, int64_t max_latency) {
  if (min_latency < 0 || max_latency < min_latency) {
    return absl::InvalidArgumentError(
        absl::StrCat("array recorder bounds [", min_latency, ", ", max_latency, "] are invalid"));
  }
  if (max_latency - min_latency >= kMaxSlots) {
    return absl::InvalidArgumentError(absl::StrCat("array recorder range [", min_latency, ", ",
                                                   max_latency, "] exceeds ", kMaxSlots, " slots"));
  }
  const int64_t slots = max_latency - min_latency + 1;
  // calloc: zeroed pages are mapped lazily, so untouched latencies cost no RSS.
  auto* raw = static_cast<int64_t*>(  // NOLINT(cppcoreguidelines-no-malloc)
      std::calloc(static_cast<size_t>(slots), sizeof(int64_t)));
  if (raw == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", slots, " latency counters"));
  }
  return std::unique_ptr<ArrayLatencyRecorder>(
      new ArrayLatencyRecorder(min_latency, max_latency, Counters(raw), slots));
}

ArrayLatencyRecorder::ArrayLatencyRecorder(int64_t min_latency, int64_t max_latency,
                                           Counters counts, int64_t slots)
    : LatencyRecorder(RecorderKind::kArray, min_latency, max_latency),
      counts_(std::move(counts)),
      slots_(slots),
      lowest_(slots),
      highest_(-1) {}

void ArrayLatencyRecorder::RecordBatch(const TimeStamp* ts, size_t n) {
  int64_t* const counts = counts_.get();
  const int64_t base = min_latency();
  int64_t lowest = lowest_;
  int64_t highest = highest_;
  // The occupied span IS the valid min/max: skip tracking it twice.
  RecordBatchWith<false>(ts, n, [&](int64_t latency, int64_t count) {
    const int64_t slot = latency - base;
    counts[slot] += count;
    lowest = std::min(lowest, slot);
    highest = std::max(highest, slot);
  });
  lowest_ = lowest;
  highest_ = highest;
  FoldValidMinMax(lowest + base, highest + base);
}

void ArrayLatencyRecorder::ReportLatency(int64_t latency, int64_t count) {
  CheckUnchecked(latency, count);
  const int64_t slot = latency - min_latency();
  counts_[slot] += count;
  lowest_ = std::min(lowest_, slot);
  highest_ = std::max(highest_, slot);
}

void ArrayLatencyRecorder::ReportBuckets(const LatencyBucket* buckets, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    ReportLatency(buckets[i].latency, buckets[i].count);
  }
}

void ArrayLatencyRecorder::ExtractAscending(internal::ExtractionVisitor& visitor) {
  int64_t* const counts = counts_.get();
  const int64_t base = min_latency();
  for (int64_t slot = lowest_; slot <= highest_; ++slot) {
    const int64_t count = counts[slot];
    if (count != 0) {
      visitor.Add(slot + base, count);
      counts[slot] = 0;
    }
  }
  lowest_ = slots_;
  highest_ = -1;
}

void ArrayLatencyRecorder::ForEachBucket(internal::BucketForwarder& out) const {
  const int64_t* const counts = counts_.get();
  const int64_t base = min_latency();
  for (int64_t slot = lowest_; slot <= highest_; ++slot) {
    if (counts[slot] != 0) {
      out.Add(slot + base, counts[slot]);
    }
  }
}

void ArrayLatencyRecorder::ClearDistribution() {
  if (highest_ >= lowest_) {
    std::memset(counts_.get() + lowest_, 0,
                static_cast<size_t>(highest_ - lowest_ + 1) * sizeof(int64_t));
  }
  lowest_ = slots_;
  highest_ = -1;
}

}  // namespace perld
