#include "daemon/core/interleaved_long_map.h"

#include <map>
#include <random>
#include <vector>

#include "daemon/core/latency_bucket_sort.h"
#include "gtest/gtest.h"

namespace perld {
namespace {

std::map<int64_t, int64_t> Contents(const InterleavedLongMap& m) {
  std::map<int64_t, int64_t> out;
  m.ForEach([&out](int64_t k, int64_t v) { EXPECT_TRUE(out.emplace(k, v).second); });
  return out;
}

TEST(InterleavedLongMapTest, MatchesStdMapThroughGrowth) {
  InterleavedLongMap m;
  std::map<int64_t, int64_t> want;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 50'000; ++i) {
    // Mix of sequential, strided (multiples of 1024) and random keys.
    const int64_t key = i % 3 == 0   ? i
                        : i % 3 == 1 ? int64_t{i % 500} * 1024
                                     : static_cast<int64_t>(rng() >> 2);
    const int64_t count = 1 + i % 4;
    const bool inserted = want.find(key) == want.end();
    EXPECT_EQ(m.Add(key, count), inserted);
    want[key] += count;
  }
  EXPECT_EQ(m.size(), want.size());
  EXPECT_LE(m.size() * 2, m.capacity());  // load <= 1/2
  EXPECT_EQ(Contents(m), want);
}

TEST(InterleavedLongMapTest, DrainEmptiesAndKeepsCapacity) {
  InterleavedLongMap m;
  for (int64_t k = 0; k < 10'000; ++k) {
    m.Add(k * 7, k + 1);
  }
  const size_t capacity = m.capacity();
  std::map<int64_t, int64_t> drained;
  m.Drain([&drained](int64_t k, int64_t v) { drained.emplace(k, v); });
  EXPECT_EQ(drained.size(), 10'000u);
  EXPECT_EQ(drained[int64_t{7} * 9], 10);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.capacity(), capacity);
  EXPECT_TRUE(Contents(m).empty());
  for (int64_t k = 0; k < 10'000; ++k) {
    EXPECT_TRUE(m.Add(k * 3, 1));  // all new again
  }
  EXPECT_EQ(m.capacity(), capacity);
  m.Clear();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.capacity(), capacity);
  EXPECT_TRUE(m.Add(0, 2));
  EXPECT_FALSE(m.Add(0, 3));
  EXPECT_EQ(Contents(m), (std::map<int64_t, int64_t>{{0, 5}}));
}

TEST(LatencyBucketSortTest, MatchesStdSortForAllRangeShapes) {
  std::mt19937_64 rng(11);
  std::vector<uint32_t> histogram;  // reused across calls, as the recorders do
  for (size_t n : {0u, 1u, 2u, 100u, 127u, 128u, 129u, 4096u, 70'000u}) {
    for (int64_t range : {int64_t{0}, int64_t{1}, int64_t{4095}, int64_t{70'000}, int64_t{1} << 22,
                          int64_t{1} << 40, (int64_t{1} << 62) - 1}) {
      if (range + 1 < static_cast<int64_t>(n)) {
        continue;  // keys must be distinct
      }
      const int64_t base = 1000;
      std::map<int64_t, int64_t> unique;
      while (unique.size() < n) {
        unique.emplace(base + static_cast<int64_t>(rng() % (static_cast<uint64_t>(range) + 1)),
                       static_cast<int64_t>(1 + rng() % 9));
      }
      std::vector<LatencyBucket> v;
      v.reserve(unique.size());
      for (const auto& [k, c] : unique) {
        v.push_back({k, c});
      }
      const std::vector<LatencyBucket> want = v;
      std::shuffle(v.begin(), v.end(), rng);
      int64_t lo = base + range;
      int64_t hi = base;
      for (const auto& b : v) {
        lo = std::min(lo, b.latency);
        hi = std::max(hi, b.latency);
      }
      std::vector<LatencyBucket> scratch(v.size());
      const LatencyBucket* sorted =
          SortBucketsByLatency(v.data(), scratch.data(), v.size(), lo, hi, &histogram);
      EXPECT_EQ(std::vector<LatencyBucket>(sorted, sorted + n), want)
          << "n=" << n << " range=" << range;
    }
  }
}

}  // namespace
}  // namespace perld
