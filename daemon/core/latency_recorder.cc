#include "daemon/core/latency_recorder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace perld {

const char* RecorderKindName(RecorderKind kind) {
  switch (kind) {
    case RecorderKind::kArray:
      return "Array";
    case RecorderKind::kLongHashMap:
      return "LongHashMap";
    case RecorderKind::kHashMap:
      return "HashMap";
    case RecorderKind::kHybridPaged:
      return "HybridPaged";
  }
  return "Unknown";
}

absl::Status ValidateMapRecorderArgs(int64_t min_latency, int64_t max_latency,
                                     int64_t max_map_size_mb) {
  if (min_latency < 0 || max_latency < min_latency) {
    return absl::InvalidArgumentError(
        absl::StrCat("map recorder bounds [", min_latency, ", ", max_latency, "] are invalid"));
  }
  if (max_map_size_mb < 1 || max_map_size_mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("map recorder budget ", max_map_size_mb, " MB is invalid"));
  }
  return absl::OkStatus();
}

namespace internal {

void BucketForwarder::Flush() {
  if (size_ == 0) {
    return;
  }
  if (target_ != nullptr) {
    target_->ReportBuckets(buffer_.data(), size_);
  }
  if (sink_ != nullptr) {
    sink_->OnBuckets(std::span<const LatencyBucket>(buffer_.data(), size_));
  }
  size_ = 0;
}

}  // namespace internal

namespace {

absl::Status BoundsMismatch(const LatencyRecorder& a, const LatencyRecorder& b) {
  return absl::FailedPreconditionError(absl::StrCat("latency bounds differ: [", a.min_latency(),
                                                    ", ", a.max_latency(), "] vs [",
                                                    b.min_latency(), ", ", b.max_latency(), "]"));
}

}  // namespace

absl::Status LatencyRecorder::CopyPercentiles(const PercentileSet& percentiles,
                                              LatencySnapshot* out, LatencyRecorder* copy_to,
                                              LatencyBucketSink* sink) {
  if (copy_to == this) {
    return absl::InvalidArgumentError("copy_to must be another recorder");
  }
  if (copy_to != nullptr && !copy_to->window_.SameBounds(window_)) {
    return BoundsMismatch(*this, *copy_to);
  }
  const LatencyCounters& c = window_.counters();
  out->start_time = window_.start_time();
  out->end_time = window_.end_time();
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
  out->overflow = window_.IsOverflow();
  out->closed_full = false;
  out->full_closes = 0;
  if (copy_to != nullptr) {
    copy_to->window_.mutable_counters().Merge(c);
  }

  internal::ExtractionVisitor visitor(percentiles, c.valid, out, copy_to, sink);
  ExtractAscending(visitor);
  visitor.Finish();
  PERLD_CONTRACT(visitor.cumulative() == c.valid, "distribution total differs from valid count");

  window_.Reset(window_.end_time());
  AfterReport();
  return absl::OkStatus();
}

void LatencyRecorder::Reset(int64_t start_time) {
  ClearDistribution();
  window_.Reset(start_time);
}

absl::Status LatencyRecorder::MergeFrom(const LatencyRecorder& other) {
  if (&other == this) {
    return absl::InvalidArgumentError("cannot merge a recorder into itself");
  }
  if (!other.window_.SameBounds(window_)) {
    return BoundsMismatch(*this, other);
  }
  window_.mutable_counters().Merge(other.counters());
  internal::BucketForwarder forwarder(this, nullptr);
  other.ForEachBucket(forwarder);
  forwarder.Flush();
  return absl::OkStatus();
}

absl::Status LatencyRecorder::CheckBuckets(const LatencyCounters& counters,
                                           std::span<const LatencyBucket> buckets,
                                           int64_t min_bound, int64_t max_bound) {
  if (!counters.IsConsistent()) {
    return absl::InvalidArgumentError("window counters are negative or do not add up");
  }
  int64_t sum = 0;
  int64_t lowest = kNoMinLatency;
  int64_t highest = 0;
  for (const LatencyBucket& b : buckets) {
    if (b.latency < min_bound || b.latency > max_bound) {
      return absl::InvalidArgumentError(absl::StrCat("bucket latency ", b.latency,
                                                     " outside the recorder bounds [", min_bound,
                                                     ", ", max_bound, "]"));
    }
    if (b.count < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket count ", b.count, " at latency ", b.latency, " is < 1"));
    }
    if (__builtin_add_overflow(sum, b.count, &sum)) {
      return absl::InvalidArgumentError("bucket counts overflow");
    }
    lowest = std::min(lowest, b.latency);
    highest = std::max(highest, b.latency);
  }
  if (sum != counters.valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket counts sum to ", sum, " but the window has ", counters.valid, " valid records"));
  }
  // min/max cover discarded latencies too, so they may lie outside the
  // buckets, but never inside the valid span.
  if (!buckets.empty() && (counters.min_latency > lowest || counters.max_latency < highest)) {
    return absl::InvalidArgumentError("window min/max latency contradict its buckets");
  }
  return absl::OkStatus();
}

absl::Status LatencyRecorder::MergeBuckets(const LatencyCounters& counters,
                                           std::span<const LatencyBucket> buckets,
                                           CheckedBounds checked) {
  const bool checked_here =
      checked.min_bound == window_.min_bound() && checked.max_bound == window_.max_bound();
  if (!checked_here) {
    absl::Status s = CheckBuckets(counters, buckets, window_.min_bound(), window_.max_bound());
    if (!s.ok()) return s;
  }
  window_.mutable_counters().Merge(counters);
  ReportBuckets(buckets.data(), buckets.size());
  return absl::OkStatus();
}

void LatencyRecorder::VisitBuckets(LatencyBucketSink* sink) const {
  internal::BucketForwarder forwarder(nullptr, sink);
  ForEachBucket(forwarder);
  forwarder.Flush();
}

}  // namespace perld
