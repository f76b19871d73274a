// LatencyWindow: the counters every exact latency window shares, and the one
// validation rule that decides whether a latency may enter a distribution.
//
// SBK semantics (LatencyRecorder.record):
//   * records and bytes always count;
//   * a negative latency counts as `invalid` only;
//   * a non-negative latency updates min, max and total latency, then is
//     below-min discarded, above-max discarded, or valid (inclusive bounds);
//   * only a valid latency enters the exact distribution.
// perld additions: a timestamp with records < 1 is refused whole and counted
// in `rejected` (a zero or negative frequency would corrupt a distribution);
// every sum saturates at INT64_MAX/INT64_MIN instead of overflowing, and a
// saturated sum trips IsOverflow().
//
// Threads: none. A window belongs to one recorder, which belongs to one thread.
// Hot-path cost: Account() is inline, branch-light, allocation-free.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "daemon/core/time_stamp.h"

namespace perld {

inline constexpr int64_t kNoMinLatency = std::numeric_limits<int64_t>::max();

namespace internal {
inline int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) [[unlikely]] {
    r = b < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return r;
}
// REQUIRES: a >= 0 and b >= 0.
inline int64_t SatMulNonNegative(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) [[unlikely]] {
    r = std::numeric_limits<int64_t>::max();
  }
  return r;
}
}  // namespace internal

// latency = end - start computed with wrap-around (defined for any input); a
// garbage timestamp yields some latency that the window then classifies.
inline int64_t LatencyOf(const TimeStamp& ts) {
  return static_cast<int64_t>(static_cast<uint64_t>(ts.end) - static_cast<uint64_t>(ts.start));
}

// The counters of one window. Plain data so batch loops can keep a copy in
// registers and store it back once per batch.
struct LatencyCounters {
  int64_t records = 0;
  int64_t bytes = 0;
  int64_t total_latency = 0;
  int64_t min_latency = kNoMinLatency;  // kNoMinLatency until a latency >= 0 is seen
  int64_t max_latency = 0;
  int64_t invalid = 0;
  int64_t lower_discard = 0;
  int64_t higher_discard = 0;
  int64_t valid = 0;
  int64_t rejected = 0;

  // Adds `other` (sums saturate; min/max combine). SBK LatencyRecorder.update.
  void Merge(const LatencyCounters& other);
  // Adds a batch of `valid_records` valid records (the batch fast path):
  // records and valid grow by it, bytes and total latency by their sums,
  // min/max combine with [lowest, highest]. Saturating.
  void MergeBatch(int64_t valid_records, int64_t byte_sum, __int128 latency_sum, int64_t lowest,
                  int64_t highest);
  // Every counter is >= 0 and valid + discards + invalid <= records.
  bool IsConsistent() const;
  bool operator==(const LatencyCounters&) const = default;

  // Classifies one observation into these counters. Returns true iff the
  // latency is valid (min_bound <= latency <= max_bound, records >= 1): the
  // caller must then add (latency, records) to its distribution.
  bool Account(int64_t min_bound, int64_t max_bound, int64_t record_count, int64_t byte_count,
               int64_t latency) {
    if (record_count < 1) [[unlikely]] {
      rejected = internal::SatAdd(rejected, 1);
      return false;
    }
    records = internal::SatAdd(records, record_count);
    bytes = internal::SatAdd(bytes, byte_count);
    if (latency < 0) [[unlikely]] {
      invalid = internal::SatAdd(invalid, record_count);
      return false;
    }
    min_latency = std::min(min_latency, latency);
    max_latency = std::max(max_latency, latency);
    total_latency =
        internal::SatAdd(total_latency, internal::SatMulNonNegative(latency, record_count));
    if (latency < min_bound) [[unlikely]] {
      lower_discard = internal::SatAdd(lower_discard, record_count);
      return false;
    }
    if (latency > max_bound) [[unlikely]] {
      higher_discard = internal::SatAdd(higher_discard, record_count);
      return false;
    }
    valid = internal::SatAdd(valid, record_count);
    return true;
  }
};

class LatencyWindow {
 public:
  // SBK LatencyConfig limits: TOTAL_LATENCY_MAX = LONG_MAX >> 1, records and
  // bytes LONG_MAX >> 2. Exceeding any of them makes IsOverflow() true.
  static constexpr int64_t kTotalLatencyMax = std::numeric_limits<int64_t>::max() >> 1;
  static constexpr int64_t kTotalRecordsMax = std::numeric_limits<int64_t>::max() >> 2;
  static constexpr int64_t kTotalBytesMax = std::numeric_limits<int64_t>::max() >> 2;

  // Inclusive bounds. REQUIRES: 0 <= min_bound <= max_bound (checked by the
  // recorder factories, which return a Status instead of constructing).
  LatencyWindow(int64_t min_bound, int64_t max_bound)
      : min_bound_(min_bound), max_bound_(max_bound) {}

  int64_t min_bound() const { return min_bound_; }
  int64_t max_bound() const { return max_bound_; }
  bool SameBounds(const LatencyWindow& other) const {
    return min_bound_ == other.min_bound_ && max_bound_ == other.max_bound_;
  }

  // See LatencyCounters::Account. Hot path.
  bool Account(int64_t records, int64_t bytes, int64_t latency) {
    return counters_.Account(min_bound_, max_bound_, records, bytes, latency);
  }

  // Clears every counter; the window now starts (and ends) at `start_time`.
  void Reset(int64_t start_time);
  void set_end_time(int64_t end_time) { end_time_ = end_time; }
  int64_t start_time() const { return start_time_; }
  int64_t end_time() const { return end_time_; }

  // SBK isOverflow(): total latency, records or bytes beyond the limits above.
  bool IsOverflow() const {
    return counters_.total_latency > kTotalLatencyMax || counters_.bytes > kTotalBytesMax ||
           counters_.records > kTotalRecordsMax;
  }

  const LatencyCounters& counters() const { return counters_; }
  // For recorder batch loops (copy in, Account, store back) and merges.
  LatencyCounters& mutable_counters() { return counters_; }

 private:
  int64_t min_bound_;
  int64_t max_bound_;
  int64_t start_time_ = 0;
  int64_t end_time_ = 0;
  LatencyCounters counters_;
};

}  // namespace perld
