#include "daemon/core/latency_bucket_sort.h"

#include <algorithm>
#include <utility>

#include "daemon/core/contract.h"

namespace perld {
namespace {

constexpr size_t kStdSortBelow = 64;
constexpr int kMinDigitBits = 8;
constexpr int kMaxDigitBits = 16;

int BitWidth(uint64_t v) { return v == 0 ? 0 : 64 - __builtin_clzll(v); }

}  // namespace

LatencyBucket* SortBucketsByLatency(LatencyBucket* buckets, LatencyBucket* scratch, size_t n,
                                    int64_t min_latency, int64_t max_latency,
                                    std::vector<uint32_t>* histogram) {
  PERLD_CONTRACT(n < (size_t{1} << 32), "too many buckets for the radix counters");
  if (n < kStdSortBelow) {
    std::sort(buckets, buckets + n,
              [](const LatencyBucket& a, const LatencyBucket& b) { return a.latency < b.latency; });
    return buckets;
  }
  const uint64_t base = static_cast<uint64_t>(min_latency);
  const int bits = BitWidth(static_cast<uint64_t>(max_latency) - base);
  if (bits == 0) {
    return buckets;
  }
  // Up to ~2n buckets per pass keeps collisions (store-forwarding chains on
  // the bucket cursors) rare while the histogram stays cache-sized.
  const int max_digit = std::clamp(BitWidth(n) + 1, kMinDigitBits, kMaxDigitBits);
  const int passes = (bits + max_digit - 1) / max_digit;
  const int digit = (bits + passes - 1) / passes;
  const size_t radix = size_t{1} << digit;
  const uint64_t mask = radix - 1;
  if (histogram->size() < radix) {
    histogram->resize(radix);
  }
  uint32_t* const count = histogram->data();

  LatencyBucket* src = buckets;
  LatencyBucket* dst = scratch;
  for (int p = 0; p < passes; ++p) {
    const int shift = p * digit;
    std::fill_n(count, radix, 0u);
    for (size_t i = 0; i < n; ++i) {
      ++count[((static_cast<uint64_t>(src[i].latency) - base) >> shift) & mask];
    }
    if (std::find(count, count + radix, static_cast<uint32_t>(n)) != count + radix) {
      continue;  // every key has the same digit: this pass would not move anything
    }
    uint32_t sum = 0;
    for (size_t d = 0; d < radix; ++d) {
      const uint32_t here = count[d];
      count[d] = sum;
      sum += here;
    }
    for (size_t i = 0; i < n; ++i) {
      dst[count[((static_cast<uint64_t>(src[i].latency) - base) >> shift) & mask]++] = src[i];
    }
    std::swap(src, dst);
  }
  return src;
}

}  // namespace perld
