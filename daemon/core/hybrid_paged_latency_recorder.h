// HybridPagedLatencyRecorder: exact distribution in power-of-two pages of
// 2^page_bits latencies (page id = latency >> page_bits), SBM's aggregator
// recorder for dense-plus-sparse nanosecond distributions (seed section 6.6).
//
// Each page starts as sorted parallel arrays of 16-bit offsets and int64
// counts (capacity 4, held inside the page; doubling on the heap up to
// sparse_entry_limit), and is promoted to a dense 2^page_bits counter array
// on its (limit + 1)-th distinct value; a dense page stays dense (no
// promotion/demotion churn). Only active page ids are sorted at report time
// (a radix sort of (id, index) pairs, skipped when the window activated its
// pages in ascending order); sparse pages are already ordered and dense
// pages are scanned directly, zeroing visited slots in the same pass.
// Pages are retained and reused by later windows. Lookup: the last page,
// then its successor in creation order (ascending input revisits pages in
// the order it created them), then the page table (InterleavedLongMap).
//
// Memory accounting mirrors SBM's estimate exactly: per page 32 B object +
// 32 B map entry + arrays (16 B header each; 10 B per sparse entry of
// capacity; 8 B per dense slot), plus 8 B per active-id slot (+16 B header).
// After the natural report of a window (and on Reset) the whole retained
// cache is released if the estimate exceeds max_memory_mb. With policy
// kResetWindowWhenFull (total windows) IsFull() also turns true above the
// limit, so the owner prints and resets the window before the release.
//
// Threads: single owner (see LatencyRecorder). Hot path: page-cache or
// successor hit, or one hash probe, then a branch-free search of the page's
// sparse offsets (SSE2, eight at a time) or a dense increment; allocation
// only for a new page, sparse growth or promotion. Buckets merged from
// remote windows (ReportBuckets) that spread over many pages look their
// pages up in blocks, so the cache misses of a block overlap.
// tests/bench/RECORDERS.md ("Remote windows spread over many pages") has
// the figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/interleaved_long_map.h"
#include "daemon/core/latency_recorder.h"

namespace perld {

enum class HybridMemoryPolicy {
  kReleaseAfterWindow,   // periodic: never cut a window short, release after its report
  kResetWindowWhenFull,  // total: IsFull() above the limit, report + reset + release
};

class HybridPagedLatencyRecorder final : public LatencyRecorder {
 public:
  static constexpr int kMaxPageBits = 16;
  static constexpr int64_t kInitialSparseCapacity = 4;
  static constexpr int64_t kPageObjectBytes = 32;
  static constexpr int64_t kPageMapEntryBytes = 32;
  static constexpr int64_t kArrayObjectBytes = 16;
  static constexpr int64_t kSparseEntryBytes = 2 + 8;  // offset + count
  static constexpr int64_t kActiveIdBytes = 8;

  // InvalidArgument unless 0 <= min_latency <= max_latency, max_memory_mb >=
  // 1, 1 <= page_bits <= 16 and 1 <= sparse_entry_limit < 2^page_bits.
  static absl::StatusOr<std::unique_ptr<HybridPagedLatencyRecorder>> Create(
      int64_t min_latency, int64_t max_latency, int64_t max_memory_mb, int page_bits,
      int sparse_entry_limit, HybridMemoryPolicy policy);

  void RecordBatch(const TimeStamp* ts, size_t n) override;
  bool IsFull() const override {
    return (policy_ == HybridMemoryPolicy::kResetWindowWhenFull &&
            retained_bytes_ > max_memory_bytes_) ||
           window().IsOverflow();
  }
  size_t RetainedBytes() const override { return static_cast<size_t>(retained_bytes_); }
  size_t BudgetBytes() const override { return static_cast<size_t>(max_memory_bytes_); }
  int64_t CacheReleases() const override { return cache_releases_; }

  int page_bits() const { return page_bits_; }
  int sparse_entry_limit() const { return sparse_limit_; }
  HybridMemoryPolicy policy() const { return policy_; }
  size_t retained_pages() const { return pages_.size(); }
  size_t active_pages() const { return active_.size(); }
  size_t dense_pages() const;

 private:
  // Sparse offsets are searched kSparseChunk at a time (FindSparse): a heap
  // array's offsets are allocated in whole chunks, and the inline ones may be
  // read one chunk wide (the page's own fields follow them).
  static constexpr int kSparseChunk = 8;
  static constexpr size_t SparseOffsetsBytes(int64_t capacity) {
    return static_cast<size_t>((capacity + kSparseChunk - 1) / kSparseChunk * kSparseChunk) *
           sizeof(uint16_t);
  }

  // One cache line per page. The first kInitialSparseCapacity entries live
  // in the page itself, so a page with few values (one value per page: the
  // sparse worst case) is one line of pages_, read sequentially, with no
  // array to chase. Beyond them `heap` holds the sparse arrays (capacity
  // counts, then capacity offsets) or, once promoted, the 2^page_bits dense
  // counters. The memory estimate still charges SBM's arrays (its
  // accounting, not this layout).
  static constexpr int kInlineEntries = static_cast<int>(kInitialSparseCapacity);
  struct alignas(64) Page {
    int64_t id = 0;
    uint16_t inline_offsets[kInlineEntries] = {};
    uint16_t sparse_size = 0;
    uint16_t sparse_capacity = 0;
    bool active = false;  // holds data in the current window
    bool is_dense = false;
    int64_t inline_counts[kInlineEntries] = {};
    std::unique_ptr<std::byte[]> heap;

    bool on_heap() const { return heap != nullptr && !is_dense; }
    int64_t* counts() { return on_heap() ? reinterpret_cast<int64_t*>(heap.get()) : inline_counts; }
    uint16_t* offsets() {
      return on_heap() ? reinterpret_cast<uint16_t*>(heap.get() +
                                                     size_t{sparse_capacity} * sizeof(int64_t))
                       : inline_offsets;
    }
    int64_t* dense() { return is_dense ? reinterpret_cast<int64_t*>(heap.get()) : nullptr; }
    const int64_t* dense() const {
      return is_dense ? reinterpret_cast<const int64_t*>(heap.get()) : nullptr;
    }
    const int64_t* counts() const { return const_cast<Page*>(this)->counts(); }
    const uint16_t* offsets() const { return const_cast<Page*>(this)->offsets(); }
  };
  static_assert(sizeof(Page) == 64, "a page is one cache line");
  // Page is not standard-layout (its unique_ptr), but both compilers lay
  // its members out in order, which is all this check needs.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  static_assert(offsetof(Page, inline_offsets) + kSparseChunk * sizeof(uint16_t) <= sizeof(Page),
                "a chunk read from the inline offsets stays inside the page");
#pragma GCC diagnostic pop

  HybridPagedLatencyRecorder(int64_t min_latency, int64_t max_latency, int64_t max_memory_bytes,
                             int page_bits, int sparse_entry_limit, HybridMemoryPolicy policy);

  void Add(int64_t latency, int64_t count);
  // Adds to `page` (the page of `latency`, active): dense or sparse.
  void AddTo(Page& page, int64_t latency, int64_t count);
  Page& PageFor(int64_t page_id);
  // Points the page cache (cached_id_, cached_index_) at `page_id`'s page,
  // making the page when it is new. Out of line: PageFor's hit stays small.
  [[gnu::noinline]] void FindPage(int64_t page_id);
  uint32_t NewPage(int64_t page_id);
  void Activate(uint32_t index);
  [[gnu::noinline]] void GrowActive();
  // Where `offset` is among a page's `size` sorted offsets: its index (-1
  // when absent) and how many are below it (where it goes). Reads whole
  // chunks and masks off what lies past `size`, with no branch on the
  // values: which slot a value is in is as good as random, and a search
  // that branched on it would mispredict about once per value.
  struct SparseSlot {
    int32_t equal = -1;
    int32_t below = 0;
  };
  static SparseSlot FindSparse(const uint16_t* offsets, int32_t size, uint16_t offset);
  void AddSparse(Page& page, uint16_t offset, int64_t count);
  // A value new to the page, at `pos`: grows or promotes the page.
  [[gnu::noinline]] void InsertSparse(Page& page, int32_t pos, uint16_t offset, int64_t count);
  void Promote(Page& page);
  int64_t ArrayBytes(const Page& page) const;
  void ClearPage(Page& page);
  void ReleaseIfOversized();

  void ReportLatency(int64_t latency, int64_t count) override;
  void ReportBuckets(const LatencyBucket* buckets, size_t n) override;
  void ExtractAscending(internal::ExtractionVisitor& visitor) override;
  void ForEachBucket(internal::BucketForwarder& out) const override;
  void ClearDistribution() override;
  void AfterReport() override { ReleaseIfOversized(); }

  const int page_bits_;
  const int64_t page_size_;
  const int64_t page_mask_;
  const int sparse_limit_;
  const HybridMemoryPolicy policy_;
  const int64_t max_memory_bytes_;

  std::vector<Page> pages_;        // retained pages, reused across windows
  InterleavedLongMap page_index_;  // page id -> index in pages_
  // Pages with data this window as (page id, index in pages_) pairs, so the
  // report radix-sorts the ids without touching the pages (latency_bucket_sort.h).
  std::vector<LatencyBucket> active_;
  std::vector<LatencyBucket> sort_scratch_;
  std::vector<uint32_t> sort_histogram_;
  int64_t active_capacity_ = 0;  // SBM's activePageIds length (accounting)
  int64_t retained_bytes_ = 0;   // SBM's retainedMemoryBytes
  int64_t cache_releases_ = 0;   // ReleaseIfOversized releases
  int64_t cached_id_ = -1;       // last page used (ids are >= 0)
  uint32_t cached_index_ = 0;
};

}  // namespace perld
