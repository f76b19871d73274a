// MergeDistributions against an oracle that never merges: the raw values of
// every window concatenated and counted (std::map), over random windows.
#include "daemon/core/distribution_merge.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

namespace perld {
namespace {

std::vector<LatencyBucket> Counted(const std::vector<int64_t>& raw) {
  std::map<int64_t, int64_t> counts;
  for (int64_t v : raw) ++counts[v];
  std::vector<LatencyBucket> out;
  for (const auto& [latency, count] : counts) out.push_back({latency, count});
  return out;
}

TEST(DistributionMergeTest, EqualsTheCountOfTheConcatenatedRawValues) {
  std::mt19937_64 rng(20261205);
  for (int trial = 0; trial < 200; ++trial) {
    const int windows = static_cast<int>(rng() % 40);
    std::vector<std::vector<LatencyBucket>> stored;
    std::vector<int64_t> all;
    for (int w = 0; w < windows; ++w) {
      std::vector<int64_t> raw(rng() % 300);
      const int64_t spread = 1 + static_cast<int64_t>(rng() % 5000);
      for (int64_t& v : raw) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(spread));
      all.insert(all.end(), raw.begin(), raw.end());
      stored.push_back(Counted(raw));
    }
    std::vector<std::span<const LatencyBucket>> inputs(stored.begin(), stored.end());
    EXPECT_EQ(MergeDistributions(inputs), Counted(all)) << "trial " << trial;
  }
}

TEST(DistributionMergeTest, EmptyInputsAndSaturation) {
  EXPECT_TRUE(MergeDistributions({}).empty());
  const std::vector<LatencyBucket> none;
  const std::vector<LatencyBucket> big = {{7, std::numeric_limits<int64_t>::max() - 1}};
  const std::vector<LatencyBucket> two = {{7, 2}, {9, 1}};
  const std::vector<std::span<const LatencyBucket>> inputs = {none, big, two, none};
  const std::vector<LatencyBucket> merged = MergeDistributions(inputs);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].count, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(merged[1], (LatencyBucket{9, 1}));
}

}  // namespace
}  // namespace perld
