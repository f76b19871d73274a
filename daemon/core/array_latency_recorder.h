// ArrayLatencyRecorder: dense exact distribution, one int64 counter per
// latency in the inclusive range [min, max] (slot = latency - min).
//
// The production periodic window when the range fits maxArraySizeMB (see
// latency_recorder_builder.h). Memory: 8 * (max - min + 1) bytes, allocated
// once with calloc, so pages the workload never touches cost no RSS.
// Hot path: a subtraction, one counter increment and a min/max of the
// occupied index span; no hashing, no allocation ever.
// Extraction scans only the occupied span [lowest, highest], zeroing every
// visited non-empty slot in the same pass; Reset after extraction is O(1).
// (Unlike SBK, a Reset without extraction also clears the span, so the
// window can never leak counts into the next one, and the upper bound is
// inclusive: SBK's array holds max - min slots and silently drops max.)
//
// Threads: single owner (see LatencyRecorder).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/core/latency_recorder.h"

namespace perld {

class ArrayLatencyRecorder final : public LatencyRecorder {
 public:
  // SBK's indexability limit: fewer than 2^31 - 1 slots.
  static constexpr int64_t kMaxSlots = (int64_t{1} << 31) - 1;

  // InvalidArgument unless 0 <= min_latency <= max_latency and the slot count
  // is <= kMaxSlots; ResourceExhausted if the counters cannot be allocated.
  static absl::StatusOr<std::unique_ptr<ArrayLatencyRecorder>> Create(int64_t min_latency,
                                                                      int64_t max_latency);

  void RecordBatch(const TimeStamp* ts, size_t n) override;
  size_t RetainedBytes() const override { return static_cast<size_t>(slots_) * sizeof(int64_t); }
  size_t BudgetBytes() const override { return RetainedBytes(); }

  int64_t slots() const { return slots_; }

 private:
  struct FreeDeleter {
    void operator()(int64_t* p) const { std::free(p); }  // NOLINT(cppcoreguidelines-no-malloc)
  };
  using Counters = std::unique_ptr<int64_t[], FreeDeleter>;

  ArrayLatencyRecorder(int64_t min_latency, int64_t max_latency, Counters counts, int64_t slots);

  void ReportLatency(int64_t latency, int64_t count) override;
  void ReportBuckets(const LatencyBucket* buckets, size_t n) override;
  void ExtractAscending(internal::ExtractionVisitor& visitor) override;
  void ForEachBucket(internal::BucketForwarder& out) const override;
  void ClearDistribution() override;

  Counters counts_;
  const int64_t slots_;
  int64_t lowest_;   // smallest occupied slot; slots_ when empty
  int64_t highest_;  // largest occupied slot; -1 when empty
};

}  // namespace perld
