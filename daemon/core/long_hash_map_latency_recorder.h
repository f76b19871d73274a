// LongHashMapLatencyRecorder: sparse exact distribution in a primitive
// open-addressing map of (latency, count) pairs -- no per-entry node, no
// boxing (SBK's LongHashMapLatencyRecorder over LongLongHashMap).
//
// The production periodic window when the range does not fit the array
// budget, and always the total window (see latency_recorder_builder.h).
// Storage is InterleavedLongMap (linear probing over one interleaved array,
// load <= 1/2). BasicLongHashMapLatencyRecorder<AbslLongMap> -- the same
// recorder over absl::flat_hash_map -- is kept as the measured baseline that
// justified the specialized map (tests/bench/recorder_bench.cc, RECORDERS.md).
//
// Hot path: one probe (hit: ~1.5 slots) per run of equal latencies in a
// batch (RecordBatch sums a run in registers first: a fast closed-loop
// bench's records mostly share one value); allocation only when a new
// distinct latency doubles the table beyond its retained high-water size.
// Extraction drains the table while emptying each slot (same pass) and
// walks the D distinct latencies once in ascending order: when they are
// dense (observed span <= 2D) it drains straight into a direct-address
// count buffer over the span (no sort at all); otherwise into a reusable
// (latency, count) buffer that is radix-sorted (latency_bucket_sort.h).
// O(C + D) for table capacity C, no allocation once the buffers reached the
// largest window so far. Capacity is never released, so steady windows
// never rehash or allocate.
//
// Budget (SBK mapBytesCount): 16 logical bytes (key + count) per distinct
// latency; IsFull() once that exceeds max_map_size_mb or the window
// overflows. This is a policy figure, not RSS: RetainedBytes() counts the
// real table (32-64 B per distinct key) plus the extraction buffers in use
// (dense: <= 16 B, sparse: 32 B per high-water distinct key).
//
// Threads: single owner (see LatencyRecorder).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/core/interleaved_long_map.h"
#include "daemon/core/latency_recorder.h"

namespace perld {

// absl::flat_hash_map behind InterleavedLongMap's interface (benchmark
// baseline). absl cannot empty a large table in place without tombstones,
// so Drain/Clear re-reserve the previous size: one table allocation per
// window.
class AbslLongMap {
 public:
  bool Add(int64_t key, int64_t count) {
    auto [it, inserted] = map_.try_emplace(key, count);
    if (!inserted) {
      it->second += count;
    }
    return inserted;
  }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  size_t capacity() const { return map_.capacity(); }
  size_t MemoryBytes() const { return map_.capacity() * (1 + 2 * sizeof(int64_t)); }
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const auto& [key, count] : map_) {
      fn(key, count);
    }
  }
  template <typename Fn>
  void Drain(Fn&& fn) {
    ForEach(fn);
    Clear();
  }
  void Clear() {
    const size_t size = map_.size();
    map_.clear();
    map_.reserve(size);
  }

 private:
  absl::flat_hash_map<int64_t, int64_t> map_;
};

template <typename Map>
class BasicLongHashMapLatencyRecorder final : public LatencyRecorder {
 public:
  static constexpr int64_t kBytesPerDistinct = 16;  // SBK LATENCY_VALUE_SIZE_BYTES * 2

  // InvalidArgument unless 0 <= min_latency <= max_latency and
  // 1 <= max_map_size_mb <= 2^40.
  static absl::StatusOr<std::unique_ptr<BasicLongHashMapLatencyRecorder>> Create(
      int64_t min_latency, int64_t max_latency, int64_t max_map_size_mb);

  void RecordBatch(const TimeStamp* ts, size_t n) override;
  bool IsFull() const override { return map_bytes_ > max_map_bytes_ || window().IsOverflow(); }
  size_t RetainedBytes() const override {
    return map_.MemoryBytes() + (sorted_.capacity() + scratch_.capacity()) * sizeof(LatencyBucket) +
           dense_.capacity() * sizeof(int64_t) + histogram_.capacity() * sizeof(uint32_t);
  }
  size_t BudgetBytes() const override { return static_cast<size_t>(max_map_bytes_); }

  size_t distinct() const { return map_.size(); }
  int64_t map_bytes() const { return map_bytes_; }  // logical payload counted for IsFull
  size_t table_capacity() const { return map_.capacity(); }
  size_t sort_buffer_capacity() const { return sorted_.capacity(); }

 private:
  BasicLongHashMapLatencyRecorder(int64_t min_latency, int64_t max_latency, int64_t max_map_bytes);

  void Add(int64_t latency, int64_t count) {
    if (map_.Add(latency, count)) {  // new distinct latency: rare at steady state
      map_bytes_ += kBytesPerDistinct;
      lowest_ = std::min(lowest_, latency);
      highest_ = std::max(highest_, latency);
    }
  }
  void ExtractDense(internal::ExtractionVisitor& visitor, size_t span);
  void ExtractSparse(internal::ExtractionVisitor& visitor, size_t size);

  void ReportLatency(int64_t latency, int64_t count) override;
  void ReportBuckets(const LatencyBucket* buckets, size_t n) override;
  void ExtractAscending(internal::ExtractionVisitor& visitor) override;
  void ForEachBucket(internal::BucketForwarder& out) const override;
  void ClearDistribution() override;

  Map map_;
  std::vector<int64_t> dense_;          // dense extraction: counts over the span
  std::vector<LatencyBucket> sorted_;   // sparse extraction buffer (high-water)
  std::vector<LatencyBucket> scratch_;  // radix-sort scratch (high-water)
  std::vector<uint32_t> histogram_;     // radix-sort counters (<= 2^16)
  int64_t map_bytes_ = 0;
  int64_t lowest_;   // smallest distinct latency this window (max bound when empty)
  int64_t highest_;  // largest distinct latency this window (min bound when empty)
  const int64_t max_map_bytes_;
};

using LongHashMapLatencyRecorder = BasicLongHashMapLatencyRecorder<InterleavedLongMap>;
using AbslLongHashMapLatencyRecorder = BasicLongHashMapLatencyRecorder<AbslLongMap>;

extern template class BasicLongHashMapLatencyRecorder<InterleavedLongMap>;
extern template class BasicLongHashMapLatencyRecorder<AbslLongMap>;

}  // namespace perld
