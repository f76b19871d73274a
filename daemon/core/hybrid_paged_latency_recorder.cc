#include "daemon/core/hybrid_paged_latency_recorder.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "daemon/core/latency_bucket_sort.h"

namespace perld {

absl::StatusOr<std::unique_ptr<HybridPagedLatencyRecorder>> HybridPagedLatencyRecorder::Create(
    int64_t min_latency, int64_t max_latency, int64_t max_memory_mb, int page_bits,
    int sparse_entry_limit, HybridMemoryPolicy policy) {
  if (min_latency < 0 || max_latency < min_latency) {
    return absl::InvalidArgumentError(
        absl::StrCat("hybrid recorder bounds [", min_latency, ", ", max_latency, "] are invalid"));
  }
  if (max_memory_mb < 1 || max_memory_mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hybrid recorder budget ", max_memory_mb, " MB is invalid"));
  }
  if (page_bits < 1 || page_bits > kMaxPageBits) {
    return absl::InvalidArgumentError(
        absl::StrCat("hybrid page bits ", page_bits, " outside [1, ", kMaxPageBits, "]"));
  }
  if (sparse_entry_limit < 1 || sparse_entry_limit >= (1 << page_bits)) {
    return absl::InvalidArgumentError(absl::StrCat("hybrid sparse entry limit ", sparse_entry_limit,
                                                   " outside [1, ", (1 << page_bits) - 1, "]"));
  }
  return std::unique_ptr<HybridPagedLatencyRecorder>(new HybridPagedLatencyRecorder(
      min_latency, max_latency, max_memory_mb << 20, page_bits, sparse_entry_limit, policy));
}

HybridPagedLatencyRecorder::HybridPagedLatencyRecorder(int64_t min_latency, int64_t max_latency,
                                                       int64_t max_memory_bytes, int page_bits,
                                                       int sparse_entry_limit,
                                                       HybridMemoryPolicy policy)
    : LatencyRecorder(RecorderKind::kHybridPaged, min_latency, max_latency),
      page_bits_(page_bits),
      page_size_(int64_t{1} << page_bits),
      page_mask_((int64_t{1} << page_bits) - 1),
      sparse_limit_(sparse_entry_limit),
      policy_(policy),
      max_memory_bytes_(max_memory_bytes) {}

size_t HybridPagedLatencyRecorder::dense_pages() const {
  return static_cast<size_t>(
      std::count_if(pages_.begin(), pages_.end(), [](const Page& p) { return p.is_dense; }));
}

int64_t HybridPagedLatencyRecorder::ArrayBytes(const Page& page) const {
  if (page.is_dense) {
    return kArrayObjectBytes + page_size_ * 8;
  }
  return 2 * kArrayObjectBytes + int64_t{page.sparse_capacity} * kSparseEntryBytes;
}

uint32_t HybridPagedLatencyRecorder::NewPage(int64_t page_id) {
  const auto index = static_cast<uint32_t>(pages_.size());
  Page& page = pages_.emplace_back();
  page.id = page_id;
  page.sparse_capacity =
      static_cast<uint16_t>(std::min<int64_t>(kInitialSparseCapacity, sparse_limit_));
  retained_bytes_ += kPageObjectBytes + kPageMapEntryBytes + ArrayBytes(page);
  return index;
}

void HybridPagedLatencyRecorder::FindPage(int64_t page_id) {
  // Ascending input revisits pages in the order it created them: try the
  // cached page's successor in pages_ before the page table.
  const uint32_t next = cached_index_ + 1;
  if (cached_id_ >= 0 && next < pages_.size() && pages_[next].id == page_id) {
    cached_index_ = next;
  } else {
    bool added = false;
    int64_t& index = page_index_.FindOrInsert(page_id, 0, &added);
    if (added) index = NewPage(page_id);  // NewPage does not touch page_index_
    cached_index_ = static_cast<uint32_t>(index);
  }
  cached_id_ = page_id;
}

inline HybridPagedLatencyRecorder::Page& HybridPagedLatencyRecorder::PageFor(int64_t page_id) {
  if (page_id != cached_id_) [[unlikely]] {
    FindPage(page_id);
  }
  Page& page = pages_[cached_index_];
  if (!page.active) {
    Activate(cached_index_);
  }
  return page;
}

void HybridPagedLatencyRecorder::GrowActive() {
  const int64_t grown = std::max(kInitialSparseCapacity, active_capacity_ * 2);
  retained_bytes_ += (grown - active_capacity_) * kActiveIdBytes;
  if (active_capacity_ == 0) {
    retained_bytes_ += kArrayObjectBytes;
  }
  active_capacity_ = grown;
  active_.reserve(static_cast<size_t>(grown));
}

inline void HybridPagedLatencyRecorder::Activate(uint32_t index) {
  if (static_cast<int64_t>(active_.size()) == active_capacity_) [[unlikely]] {
    GrowActive();
  }
  Page& page = pages_[index];
  active_.push_back(LatencyBucket{page.id, index});
  page.active = true;
}

inline void HybridPagedLatencyRecorder::Add(int64_t latency, int64_t count) {
  AddTo(PageFor(latency >> page_bits_), latency, count);
}

inline void HybridPagedLatencyRecorder::AddTo(Page& page, int64_t latency, int64_t count) {
  const auto offset = static_cast<uint16_t>(latency & page_mask_);
  if (page.is_dense) {
    page.dense()[offset] += count;
  } else {
    AddSparse(page, offset, count);
  }
}

inline HybridPagedLatencyRecorder::SparseSlot HybridPagedLatencyRecorder::FindSparse(
    const uint16_t* offsets, int32_t size, uint16_t offset) {
  SparseSlot slot;
#if defined(__SSE2__)
  // Unsigned 16-bit compares through signed ones: both sides biased by 2^15.
  const __m128i bias = _mm_set1_epi16(static_cast<int16_t>(0x8000));
  const __m128i key = _mm_set1_epi16(static_cast<int16_t>(offset ^ 0x8000));
  for (int32_t i = 0; i < size; i += kSparseChunk) {
    __m128i chunk;
    std::memcpy(&chunk, offsets + i, sizeof(chunk));
    chunk = _mm_xor_si128(chunk, bias);
    const int32_t left = size - i;
    const uint32_t live = left >= kSparseChunk ? 0xFFFFu : (1u << (2 * left)) - 1;
    const auto equal = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi16(chunk, key))) & live;
    const auto below = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmplt_epi16(chunk, key))) & live;
    // The offsets ascend, so those below are a prefix: count its bits
    // (two per lane) without popcnt, which x86-64's baseline lacks.
    slot.below += __builtin_ctz(~below) / 2;
    if (equal != 0 && slot.equal < 0) slot.equal = i + __builtin_ctz(equal) / 2;
  }
#else
  for (int32_t i = 0; i < size; ++i) {
    slot.below += offsets[i] < offset ? 1 : 0;
    if (offsets[i] == offset) slot.equal = i;
  }
#endif
  return slot;
}

inline void HybridPagedLatencyRecorder::AddSparse(Page& page, uint16_t offset, int64_t count) {
  const int32_t size = page.sparse_size;
  if (size == 0) {  // a page's first value (every value, for one value per page)
    page.offsets()[0] = offset;
    page.counts()[0] = count;
    page.sparse_size = 1;
    return;
  }
  // A value the page already holds: the common case once a window is warm.
  const SparseSlot slot = FindSparse(page.offsets(), size, offset);
  if (slot.equal >= 0) [[likely]] {
    page.counts()[slot.equal] += count;
    return;
  }
  InsertSparse(page, slot.below, offset, count);
}

void HybridPagedLatencyRecorder::InsertSparse(Page& page, int32_t pos, uint16_t offset,
                                              int64_t count) {
  const int32_t size = page.sparse_size;
  if (size == sparse_limit_) {
    Promote(page);
    page.dense()[offset] += count;
    return;
  }
  if (size == page.sparse_capacity) {
    const int32_t grown = std::min(sparse_limit_, page.sparse_capacity * 2);
    auto heap = std::make_unique<std::byte[]>(static_cast<size_t>(grown) * sizeof(int64_t) +
                                              SparseOffsetsBytes(grown));
    std::memcpy(heap.get(), page.counts(), static_cast<size_t>(size) * sizeof(int64_t));
    std::memcpy(heap.get() + static_cast<size_t>(grown) * sizeof(int64_t), page.offsets(),
                static_cast<size_t>(size) * sizeof(uint16_t));
    page.heap = std::move(heap);
    retained_bytes_ += int64_t{grown - page.sparse_capacity} * kSparseEntryBytes;
    page.sparse_capacity = static_cast<uint16_t>(grown);
  }
  uint16_t* const o = page.offsets();
  int64_t* const c = page.counts();
  for (int32_t i = size; i > pos; --i) {  // a few entries at most: no memmove call
    o[i] = o[i - 1];
    c[i] = c[i - 1];
  }
  o[pos] = offset;
  c[pos] = count;
  page.sparse_size = size + 1;
}

void HybridPagedLatencyRecorder::Promote(Page& page) {
  const int64_t before = ArrayBytes(page);
  auto dense = std::make_unique<std::byte[]>(static_cast<size_t>(page_size_) * sizeof(int64_t));
  auto* counters = reinterpret_cast<int64_t*>(dense.get());
  std::memset(counters, 0, static_cast<size_t>(page_size_) * sizeof(int64_t));
  for (int32_t i = 0; i < page.sparse_size; ++i) {
    counters[page.offsets()[i]] = page.counts()[i];
  }
  page.heap = std::move(dense);
  page.is_dense = true;
  page.sparse_size = 0;
  page.sparse_capacity = 0;
  retained_bytes_ += ArrayBytes(page) - before;
}

void HybridPagedLatencyRecorder::RecordBatch(const TimeStamp* ts, size_t n) {
  RecordBatchWith(ts, n, [this](int64_t latency, int64_t count) { Add(latency, count); });
}

void HybridPagedLatencyRecorder::ReportLatency(int64_t latency, int64_t count) {
  CheckUnchecked(latency, count);
  Add(latency, count);
}

void HybridPagedLatencyRecorder::ReportBuckets(const LatencyBucket* buckets, size_t n) {
  // A remote window's buckets often each land on a different page, in an
  // order pages_ does not follow. Bucket by bucket, every one would wait
  // for its page-table slot and then for its page; in blocks, the slots are
  // looked up first (independent loads whose misses overlap), the pages
  // prefetched, and only then added to.
  if (n == 0) return;
  // Buckets packed into few pages (two or more a page on average, judged
  // from the ends: the input is usually ascending) go one by one: the last
  // page is at hand for the next bucket, and blocks would only add work.
  const int64_t span =
      std::abs((buckets[n - 1].latency >> page_bits_) - (buckets[0].latency >> page_bits_)) + 1;
  if (static_cast<int64_t>(n) >= 2 * span) {
    for (size_t i = 0; i < n; ++i) ReportLatency(buckets[i].latency, buckets[i].count);
    return;
  }
  constexpr size_t kBlock = 32;
  constexpr uint32_t kNoPage = ~uint32_t{0};
  uint32_t index[kBlock];
  for (size_t start = 0; start < n; start += kBlock) {
    const LatencyBucket* const block = buckets + start;
    const size_t m = std::min(kBlock, n - start);
    for (size_t j = 0; j < m; ++j) {
      const int64_t* found = page_index_.FindOrNull(block[j].latency >> page_bits_);
      index[j] = found != nullptr ? static_cast<uint32_t>(*found) : kNoPage;
    }
    for (size_t j = 0; j < m; ++j) {
      if (index[j] != kNoPage) __builtin_prefetch(&pages_[index[j]]);
    }
    for (size_t j = 0; j < m; ++j) {
      const int64_t latency = block[j].latency;
      const int64_t count = block[j].count;
      CheckUnchecked(latency, count);
      if (index[j] == kNoPage) {  // a new page (or one made earlier in this block)
        Add(latency, count);
        continue;
      }
      Page& page = pages_[index[j]];
      if (!page.active) Activate(index[j]);
      AddTo(page, latency, count);
    }
  }
}

void HybridPagedLatencyRecorder::ExtractAscending(internal::ExtractionVisitor& visitor) {
  // Only the page ids are sorted (radix, no page touched); a window that
  // activated its pages in ascending order -- an ascending remote window --
  // is detected and not sorted at all.
  const LatencyBucket* order = active_.data();
  bool ascending = true;
  int64_t lowest = active_.empty() ? 0 : active_.front().latency;
  int64_t highest = lowest;
  for (size_t k = 1; k < active_.size(); ++k) {
    const int64_t id = active_[k].latency;
    ascending &= active_[k - 1].latency < id;
    lowest = std::min(lowest, id);
    highest = std::max(highest, id);
  }
  if (!ascending) {
    if (sort_scratch_.size() < active_.size()) sort_scratch_.resize(active_.size());
    order = SortBucketsByLatency(active_.data(), sort_scratch_.data(), active_.size(), lowest,
                                 highest, &sort_histogram_);
  }
  for (size_t k = 0; k < active_.size(); ++k) {
    Page& page = pages_[static_cast<size_t>(order[k].count)];
    const int64_t base = page.id << page_bits_;
    if (!page.is_dense) {
      const uint16_t* const offsets = page.offsets();
      const int64_t* const counts = page.counts();
      for (int32_t i = 0; i < page.sparse_size; ++i) {
        visitor.Add(base + offsets[i], counts[i]);
      }
      page.sparse_size = 0;
    } else {
      int64_t* const dense = page.dense();
      for (int64_t offset = 0; offset < page_size_; ++offset) {
        if (dense[offset] != 0) {
          visitor.Add(base + offset, dense[offset]);
          dense[offset] = 0;
        }
      }
    }
    page.active = false;
  }
  active_.clear();
}

void HybridPagedLatencyRecorder::ForEachBucket(internal::BucketForwarder& out) const {
  for (const LatencyBucket& active : active_) {
    const Page& page = pages_[static_cast<size_t>(active.count)];
    const int64_t base = page.id << page_bits_;
    if (!page.is_dense) {
      for (int32_t i = 0; i < page.sparse_size; ++i) {
        out.Add(base + page.offsets()[i], page.counts()[i]);
      }
    } else {
      for (int64_t offset = 0; offset < page_size_; ++offset) {
        if (page.dense()[offset] != 0) {
          out.Add(base + offset, page.dense()[offset]);
        }
      }
    }
  }
}

void HybridPagedLatencyRecorder::ClearPage(Page& page) {
  if (!page.is_dense) {
    page.sparse_size = 0;
  } else {
    std::memset(page.dense(), 0, static_cast<size_t>(page_size_) * sizeof(int64_t));
  }
  page.active = false;
}

void HybridPagedLatencyRecorder::ClearDistribution() {
  for (const LatencyBucket& active : active_) {
    ClearPage(pages_[static_cast<size_t>(active.count)]);
  }
  active_.clear();
  ReleaseIfOversized();
}

void HybridPagedLatencyRecorder::ReleaseIfOversized() {
  if (retained_bytes_ <= max_memory_bytes_) {
    return;
  }
  PERLD_CONTRACT(active_.empty(), "hybrid cache released while a window holds data");
  std::vector<Page>().swap(pages_);
  page_index_.Release();
  std::vector<LatencyBucket>().swap(active_);
  std::vector<LatencyBucket>().swap(sort_scratch_);
  std::vector<uint32_t>().swap(sort_histogram_);
  active_capacity_ = 0;
  retained_bytes_ = 0;
  cached_id_ = -1;
  ++cache_releases_;
}

}  // namespace perld
