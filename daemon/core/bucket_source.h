// BucketSource: an exact distribution read in order, one chunk at a time --
// what a streaming merge consumes when its inputs are too large to hold at
// once (a run's spilled total segments, read from the state store).
//
// Contract: successive chunks continue each other, strictly ascending by
// latency across chunk boundaries, every count >= 1; an empty chunk is the
// end. A chunk stays valid until the next call. Errors (a corrupt stored
// blob) end the read.
//
// Threads: single owner.
#pragma once

#include <span>
#include <utility>

#include "absl/status/statusor.h"
#include "daemon/core/latency_recorder.h"

namespace perld {

class BucketSource {
 public:
  virtual ~BucketSource() = default;
  [[nodiscard]] virtual absl::StatusOr<std::span<const LatencyBucket>> Next() = 0;
};

// A distribution already in memory: the whole span as one chunk.
class SpanBucketSource final : public BucketSource {
 public:
  explicit SpanBucketSource(std::span<const LatencyBucket> buckets) : buckets_(buckets) {}
  absl::StatusOr<std::span<const LatencyBucket>> Next() override {
    return std::exchange(buckets_, std::span<const LatencyBucket>());
  }

 private:
  std::span<const LatencyBucket> buckets_;
};

}  // namespace perld
