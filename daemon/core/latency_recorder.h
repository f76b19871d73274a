// LatencyRecorder: one exact latency window = LatencyWindow accounting plus
// an exact latency -> record-count distribution held by a concrete storage
// (ArrayLatencyRecorder, LongHashMapLatencyRecorder, HashMapLatencyRecorder,
// HybridPagedLatencyRecorder).
//
// Lifecycle (SBK): Reset(start) -> Record/RecordBatch many -> SetEndTime(end)
// -> CopyPercentiles (consumes the window, then resets it) -> ...
//
// Safety: the unchecked distribution insert (ReportLatency/ReportBuckets) is
// private. It is reached only (a) from Record/RecordBatch after LatencyWindow
// accepted the latency as valid, (b) from MergeFrom/CopyPercentiles(copy_to)
// with a source of identical bounds whose buckets were validated on entry,
// and (c) from MergeBuckets after every bucket was checked. An out-of-range
// latency therefore can never index storage (SBK's negative-index hole).
// Debug builds also assert the bounds inside every unchecked insert. (The
// only other door is RecorderBenchPeer, a friend defined solely in the
// benchmark binary to time the bare insert.)
//
// Threads: not thread-safe by design; one owner thread (the recorder thread)
// calls everything. Hot path: Record / RecordBatch never allocate at steady
// state (array: never; maps and pages: only when a distinct latency needs
// new capacity beyond the retained high-water mark) and never lock.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "daemon/core/contract.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/core/latency_window.h"
#include "daemon/core/time_stamp.h"

namespace perld {

enum class RecorderKind { kArray, kLongHashMap, kHashMap, kHybridPaged };
const char* RecorderKindName(RecorderKind kind);

// The argument check shared by the map recorders' factories: OK, or
// InvalidArgument for bounds outside 0 <= min <= max or a budget outside
// [1, 2^40] MB.
[[nodiscard]] absl::Status ValidateMapRecorderArgs(int64_t min_latency, int64_t max_latency,
                                                   int64_t max_map_size_mb);

// One exact bucket: `count` records had exactly `latency`.
struct LatencyBucket {
  int64_t latency = 0;
  int64_t count = 0;
  bool operator==(const LatencyBucket&) const = default;
};

// The bounds a window's producer checked its counters and buckets against
// (LatencyRecorder::CheckBuckets: e.g. an ingest handler decoding a remote
// window for its run's range). A recorder with the same bounds does not
// check them a second time. The default is "not checked" (min > max).
struct CheckedBounds {
  int64_t min_bound = 1;
  int64_t max_bound = 0;
};

// Receives buckets in chunks (e.g. to serialize a window report).
class LatencyBucketSink {
 public:
  virtual ~LatencyBucketSink() = default;
  virtual void OnBuckets(std::span<const LatencyBucket> buckets) = 0;
};

class LatencyRecorder;

namespace internal {

// Buffers buckets on the stack and forwards them in chunks to a recorder's
// unchecked insert (one virtual call per kChunk buckets) and/or a sink.
class BucketForwarder {
 public:
  static constexpr size_t kChunk = 256;
  BucketForwarder(LatencyRecorder* target, LatencyBucketSink* sink)
      : target_(target), sink_(sink) {}
  BucketForwarder(const BucketForwarder&) = delete;
  BucketForwarder& operator=(const BucketForwarder&) = delete;

  bool active() const { return target_ != nullptr || sink_ != nullptr; }
  void Add(int64_t latency, int64_t count) {
    buffer_[size_++] = LatencyBucket{latency, count};
    if (size_ == kChunk) {
      Flush();
    }
  }
  void Flush();

 private:
  LatencyRecorder* target_;
  LatencyBucketSink* sink_;
  size_t size_ = 0;
  std::array<LatencyBucket, kChunk> buffer_;
};

// What a consuming extraction feeds: the percentile walk plus the optional
// window -> total copy and bucket sink, all in the same single pass.
class ExtractionVisitor {
 public:
  ExtractionVisitor(const PercentileSet& set, int64_t valid, LatencySnapshot* out,
                    LatencyRecorder* copy_to, LatencyBucketSink* sink)
      : walker_(set, valid, out), forwarder_(copy_to, sink), forwarding_(forwarder_.active()) {}
  void Add(int64_t latency, int64_t count) {
    walker_.Add(latency, count);
    if (forwarding_) {
      forwarder_.Add(latency, count);
    }
  }
  void Finish() {
    if (forwarding_) {
      forwarder_.Flush();
    }
  }
  int64_t cumulative() const { return walker_.cumulative(); }

 private:
  PercentileWalker walker_;
  BucketForwarder forwarder_;
  const bool forwarding_;
};

}  // namespace internal

class LatencyRecorder {
 public:
  virtual ~LatencyRecorder() = default;
  LatencyRecorder(const LatencyRecorder&) = delete;
  LatencyRecorder& operator=(const LatencyRecorder&) = delete;

  RecorderKind kind() const { return kind_; }
  const LatencyWindow& window() const { return window_; }
  const LatencyCounters& counters() const { return window_.counters(); }
  int64_t min_latency() const { return window_.min_bound(); }  // inclusive
  int64_t max_latency() const { return window_.max_bound(); }  // inclusive

  // Accounts one observation (LatencyWindow rules) and, only if valid, adds
  // `records` to the bucket of `latency`. `start_time` is accepted for SBK
  // API parity and not stored. Hot path: one virtual call.
  void Record(int64_t start_time, int32_t records, int64_t bytes, int64_t latency) {
    static_cast<void>(start_time);
    if (window_.Account(records, bytes, latency)) {
      ReportLatency(latency, records);
    }
  }

  // Batch form for the recorder thread: latency = ts.end - ts.start, records
  // and bytes from each TimeStamp; exactly equivalent to n Record calls. One
  // virtual call per batch; the per-record body is inlined in each class.
  virtual void RecordBatch(const TimeStamp* ts, size_t n) = 0;

  // Consumes the window in one ascending pass over its buckets: fills `out`
  // (counters, start/end time, every percentile of `percentiles` with its
  // count, median), optionally adds the exact distribution and the counters
  // to `copy_to` (window -> total) and streams the buckets to `sink`, clears
  // each occupied slot as it is visited, then resets the window with start
  // time = its end time. Returns InvalidArgument if copy_to == this and
  // FailedPrecondition if copy_to's bounds differ; nothing is consumed then.
  // Cost: O(occupied span) for the array, O(D log D) for maps (D distinct),
  // O(P log P + occupied page entries) for pages; no allocation once the
  // reusable buffers reached their high-water mark.
  [[nodiscard]] absl::Status CopyPercentiles(const PercentileSet& percentiles, LatencySnapshot* out,
                                             LatencyRecorder* copy_to = nullptr,
                                             LatencyBucketSink* sink = nullptr);

  // Empties the distribution and zeroes every counter; the next window starts
  // at `start_time`. O(1) after CopyPercentiles (it already cleared the
  // distribution); otherwise O(occupied storage).
  void Reset(int64_t start_time);
  // The end time CopyPercentiles reports (defaults to the start time).
  void SetEndTime(int64_t end_time) { window_.set_end_time(end_time); }

  // Adds `other`'s exact distribution and counters without consuming it
  // (remote -> aggregate, window -> total). REQUIRES identical bounds:
  // FailedPrecondition otherwise, InvalidArgument for &other == this; this
  // recorder is unchanged on error. Any concrete kinds may be mixed.
  [[nodiscard]] absl::Status MergeFrom(const LatencyRecorder& other);

  // Adds an already-aggregated window received from elsewhere (e.g. a remote
  // client's report): `counters` plus its exact buckets, any order. Every
  // bucket is checked first (latency within this recorder's bounds, count
  // >= 1, sum of counts == counters.valid, counters consistent); on error
  // returns InvalidArgument and changes nothing. `checked`: the bounds the
  // caller already checked them against; when they are this recorder's, the
  // check (a pass over every bucket) is not repeated.
  [[nodiscard]] absl::Status MergeBuckets(const LatencyCounters& counters,
                                          std::span<const LatencyBucket> buckets,
                                          CheckedBounds checked = {});
  // The checks MergeBuckets makes, for a recorder with bounds
  // [min_bound, max_bound]: OK exactly when MergeBuckets would accept.
  [[nodiscard]] static absl::Status CheckBuckets(const LatencyCounters& counters,
                                                 std::span<const LatencyBucket> buckets,
                                                 int64_t min_bound, int64_t max_bound);

  // Streams every bucket to `sink` without changing anything. Order is
  // unspecified (storage order); use CopyPercentiles for ascending order.
  void VisitBuckets(LatencyBucketSink* sink) const;

  // True when the window must be reported and reset now: SBK's total limits
  // (LatencyWindow::IsOverflow) or, for maps and pages, the storage budget.
  virtual bool IsFull() const { return window_.IsOverflow(); }
  // Estimated bytes of distribution storage this recorder keeps (including
  // capacity retained across windows and reusable buffers).
  virtual size_t RetainedBytes() const = 0;
  // The configured storage budget (SBK getMaxMemoryBytes).
  virtual size_t BudgetBytes() const = 0;
  // Times the retained storage was released because it exceeded the budget
  // after a report (hybrid pages; 0 for the other recorders).
  virtual int64_t CacheReleases() const { return 0; }

 protected:
  // REQUIRES: 0 <= min_latency <= max_latency (the factories check it).
  LatencyRecorder(RecorderKind kind, int64_t min_latency, int64_t max_latency)
      : kind_(kind), window_(min_latency, max_latency) {}

  // Shared body of RecordBatch: `add(latency, count)` is the concrete
  // class's inline unchecked insert and runs only for valid latencies.
  // Fast path (records >= 1 and latency in bounds: one unsigned compare)
  // accumulates into batch-local registers with no per-record overflow
  // branch, merged (saturating) once per chunk; everything else goes
  // through LatencyCounters::Account. Result is identical to n Record()
  // calls. The latency sum is 64-bit when a chunk cannot overflow it
  // (chunk * max_bound * (2^31 - 1) < 2^62: every millisecond and most
  // microsecond ranges), else 128-bit. kTrackValidMinMax = false lets a
  // storage that knows its own valid min/max (the array's occupied span)
  // skip that work; it must then call FoldValidMinMax after the batch.
  template <bool kTrackValidMinMax = true, typename AddFn>
  void RecordBatchWith(const TimeStamp* ts, size_t n, AddFn&& add) {
    constexpr uint64_t kMaxChunk = uint64_t{1} << 20;  // bounds records/bytes sums
    constexpr uint64_t kMinNarrowChunk = 64;
    const uint64_t narrow_chunk = std::min(
        kMaxChunk, ((uint64_t{1} << 62) / (static_cast<uint64_t>(max_latency()) + 1)) >> 31);
    if (narrow_chunk >= kMinNarrowChunk) {
      BatchLoop<int64_t, kTrackValidMinMax>(ts, n, narrow_chunk, add);
    } else {
      BatchLoop<__int128, kTrackValidMinMax>(ts, n, kMaxChunk, add);
    }
  }

  template <typename Sum, bool kTrackValidMinMax, typename AddFn>
  void BatchLoop(const TimeStamp* ts, size_t n, uint64_t chunk, AddFn& add) {
    const int64_t lo = window_.min_bound();
    const int64_t hi = window_.max_bound();
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    LatencyCounters c = window_.counters();
    while (n > 0) {
      const size_t m = n < chunk ? n : static_cast<size_t>(chunk);
      int64_t records = 0;
      int64_t bytes = 0;
      Sum total = 0;
      int64_t lowest = c.min_latency;
      int64_t highest = c.max_latency;
      for (size_t i = 0; i < m; ++i) {
        const int64_t latency = LatencyOf(ts[i]);
        const int64_t r = ts[i].records;
        if (r >= 1 && static_cast<uint64_t>(latency) - static_cast<uint64_t>(lo) <= span)
            [[likely]] {
          records += r;
          bytes += ts[i].bytes;
          total += static_cast<Sum>(latency) * r;
          if constexpr (kTrackValidMinMax) {
            lowest = latency < lowest ? latency : lowest;
            highest = latency > highest ? latency : highest;
          }
          add(latency, r);
        } else {
          c.Account(lo, hi, r, ts[i].bytes, latency);
        }
      }
      c.MergeBatch(records, bytes, static_cast<__int128>(total), lowest, highest);
      ts += m;
      n -= m;
    }
    window_.mutable_counters() = c;
  }

  // Folds the valid latency span [lowest, highest] into min/max (see
  // RecordBatchWith<false>); no-op when lowest > highest (no valid value).
  void FoldValidMinMax(int64_t lowest, int64_t highest) {
    if (lowest > highest) {
      return;
    }
    LatencyCounters& c = window_.mutable_counters();
    c.min_latency = std::min(c.min_latency, lowest);
    c.max_latency = std::max(c.max_latency, highest);
  }

  // Debug-build check every unchecked insert performs.
  void CheckUnchecked(int64_t latency, int64_t count) const {
    PERLD_CONTRACT(latency >= window_.min_bound() && latency <= window_.max_bound(),
                   "unchecked latency outside the recorder bounds");
    PERLD_CONTRACT(count >= 1, "unchecked bucket count < 1");
    static_cast<void>(latency);
    static_cast<void>(count);
  }

 private:
  friend class internal::BucketForwarder;
  // Benchmark seam: tests/bench defines it to time the unchecked insert alone
  // (the seed's "frequency update"). Not defined in any production target.
  friend class RecorderBenchPeer;

  // Unchecked distribution inserts. REQUIRES: min <= latency <= max and
  // count >= 1 (see the header comment for who may call them).
  virtual void ReportLatency(int64_t latency, int64_t count) = 0;
  virtual void ReportBuckets(const LatencyBucket* buckets, size_t n) = 0;
  // Feeds every bucket to `visitor` in strictly ascending latency order and
  // leaves the distribution empty, clearing each slot in the same pass.
  virtual void ExtractAscending(internal::ExtractionVisitor& visitor) = 0;
  // Feeds every bucket to `out`, any order, changing nothing.
  virtual void ForEachBucket(internal::BucketForwarder& out) const = 0;
  // Empties the distribution (Reset without a prior extraction).
  virtual void ClearDistribution() = 0;
  // Runs after the natural report of a window (hybrid: cache release).
  virtual void AfterReport() {}

  const RecorderKind kind_;
  LatencyWindow window_;
};

}  // namespace perld
