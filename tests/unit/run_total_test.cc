#include "daemon/core/run_total.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "daemon/core/percentile_index.h"
#include "tests/unit/latency_oracle.h"

namespace perld {
namespace {

TEST(RunTotalTest, MergesWindowsExactlyAsTheirConcatenation) {
  const PercentileSet set = PercentileSet::Default();
  RunTotal total(size_t{1} << 30);
  testing::SortedVectorOracle all(0, 1'000'000);
  for (int w = 0; w < 5; ++w) {
    const auto obs = testing::ClusteredLognormal(20'000, w * 100, 500'000, 10 + w);
    testing::SortedVectorOracle one(0, 1'000'000);
    one.Add(obs);
    all.Add(obs);
    total.Add(CountersOf(one.Expect(set)), one.Buckets());
  }
  LatencySnapshot got;
  total.Snapshot(set, 1, 2, &got);
  LatencySnapshot want = all.Expect(set);
  want.start_time = 1;
  want.end_time = 2;
  EXPECT_EQ(got, want);
  EXPECT_EQ(total.distribution(), all.Buckets());
  EXPECT_TRUE(total.exact());
  EXPECT_EQ(total.windows(), 5);
}

TEST(RunTotalTest, CountersOfInvertsTheSnapshotCopy) {
  LatencySnapshot empty;
  EXPECT_EQ(CountersOf(empty), LatencyCounters{});
  LatencySnapshot s;
  s.records = 5;
  s.invalid = 5;  // only negative latencies: no min
  EXPECT_EQ(CountersOf(s).min_latency, kNoMinLatency);
}

TEST(RunTotalTest, BeyondTheBudgetCountersStayExactAndExactnessIsReported) {
  const PercentileSet set = PercentileSet::Create({50}).value();
  RunTotal total(3 * sizeof(LatencyBucket));
  LatencyCounters c;
  c.records = c.valid = 2;
  c.min_latency = 1;
  c.max_latency = 2;
  total.Add(c, std::vector<LatencyBucket>{{1, 1}, {2, 1}});
  EXPECT_TRUE(total.exact());
  c.min_latency = 3;
  c.max_latency = 4;
  total.Add(c, std::vector<LatencyBucket>{{3, 1}, {4, 1}});
  EXPECT_FALSE(total.exact());
  EXPECT_TRUE(total.distribution().empty()) << "dropped: no answer from part of the run";
  c.min_latency = c.max_latency = 5;
  c.records = c.valid = 1;
  total.Add(c, std::vector<LatencyBucket>{{5, 1}});  // counters only from now on
  EXPECT_TRUE(total.distribution().empty());
  LatencySnapshot s;
  total.Snapshot(set, 0, 0, &s);
  EXPECT_EQ(s.records, 5);
  EXPECT_EQ(s.valid, 5);
  EXPECT_EQ(s.min_latency, 1);
  EXPECT_EQ(s.max_latency, 5);
  EXPECT_FALSE(s.percentiles_exact);
  EXPECT_TRUE(s.values.empty() && s.counts.empty() && s.percents.empty());
  EXPECT_EQ(s.median, 0);
}

TEST(RunTotalTest, MergeAscendingCombinesEqualLatencies) {
  std::vector<LatencyBucket> into = {{1, 1}, {5, 2}, {9, 1}};
  MergeAscending(std::vector<LatencyBucket>{{0, 1}, {5, 3}, {10, 4}}, &into);
  EXPECT_EQ(into, (std::vector<LatencyBucket>{{0, 1}, {1, 1}, {5, 5}, {9, 1}, {10, 4}}));
  MergeAscending(std::vector<LatencyBucket>{{11, 1}}, &into);  // append fast path
  EXPECT_EQ(into.back(), (LatencyBucket{11, 1}));
}

}  // namespace
}  // namespace perld

namespace perld {
namespace {

TEST(PickStoredPercentilesTest, OnlySbksRuleIsStored) {
  LatencySnapshot stored;
  stored.percents = {50, 99};
  stored.fractions = {0.5, 0.99};
  stored.values = {10, 20};
  stored.counts = {1, 1};
  LatencySnapshot out;
  double missing = -1;
  EXPECT_TRUE(PickStoredPercentiles(stored, PercentileSet::Create({99}).value(), &out, &missing));
  EXPECT_EQ(out.values, (std::vector<int64_t>{20}));
  LatencySnapshot other;
  EXPECT_FALSE(PickStoredPercentiles(
      stored, PercentileSet::Create({99}, PercentileMethod::kNearestRank).value(), &other,
      &missing));
  EXPECT_EQ(missing, 99);
  EXPECT_TRUE(other.values.empty());
}

// A random ascending distribution over [lo, hi] with about `n` latencies.
std::vector<LatencyBucket> RandomAscending(std::mt19937_64& rng, int64_t lo, int64_t hi, int n) {
  std::map<int64_t, int64_t> d;
  std::uniform_int_distribution<int64_t> latency(lo, hi);
  std::uniform_int_distribution<int64_t> count(1, 5);
  for (int i = 0; i < n; ++i) d[latency(rng)] += count(rng);
  std::vector<LatencyBucket> out;
  for (const auto& [l, c] : d) out.push_back(LatencyBucket{l, c});
  return out;
}

// Every shape of merge -- only latencies already there, new latencies
// before, among and after the old ones, an append -- against a std::map.
TEST(RunTotalTest, MergeAscendingEqualsAMapOfTheSums) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 400; ++round) {
    SCOPED_TRACE(round);
    std::vector<LatencyBucket> into = RandomAscending(rng, 100, 400, 1 + round % 50);
    std::vector<LatencyBucket> add;
    switch (round % 5) {
      case 0:  // a subset of into's latencies
        for (const LatencyBucket& b : into) {
          if (rng() % 3 == 0) add.push_back(LatencyBucket{b.latency, 1 + int64_t(rng() % 7)});
        }
        break;
      case 1:  // anywhere, overlapping both ends
        add = RandomAscending(rng, 0, 500, 1 + round % 40);
        break;
      case 2:  // inside into's span
        add = RandomAscending(rng, 150, 350, 1 + round % 30);
        break;
      case 3:  // from into's last latency on
        add = RandomAscending(rng, into.back().latency, 600, 1 + round % 10);
        break;
      default:  // below into's first latency, or up to it
        add = RandomAscending(rng, 0, into.front().latency, 1 + round % 20);
        break;
    }
    std::map<int64_t, int64_t> want;
    for (const LatencyBucket& b : into) want[b.latency] += b.count;
    for (const LatencyBucket& b : add) want[b.latency] += b.count;
    MergeAscending(add, &into);
    std::vector<LatencyBucket> expect;
    for (const auto& [l, c] : want) expect.push_back(LatencyBucket{l, c});
    ASSERT_EQ(into, expect);
  }
}

TEST(RunTotalTest, MergeAscendingSaturatesCounts) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<LatencyBucket> into = {{1, kMax - 1}, {3, 2}};
  MergeAscending(std::vector<LatencyBucket>{{1, 5}}, &into);
  EXPECT_EQ(into, (std::vector<LatencyBucket>{{1, kMax}, {3, 2}}));
  MergeAscending(std::vector<LatencyBucket>{{2, 1}, {3, kMax}}, &into);
  EXPECT_EQ(into, (std::vector<LatencyBucket>{{1, kMax}, {2, 1}, {3, kMax}}));
}

// An index merged window after window (a client's breakdown) answers
// exactly as one built from the concatenated data.
TEST(PercentileIndexTest, MergedWindowByWindowAnswersAsTheConcatenation) {
  std::mt19937_64 rng(7);
  const PercentileSet set =
      PercentileSet::Create({0.001, 1, 25, 50, 75, 90, 99, 99.9, 99.99, 100}).value();
  PercentileIndex merged;
  std::map<int64_t, int64_t> all;
  for (int w = 0; w < 200; ++w) {
    // Mostly known latencies, sometimes new ones, sometimes only high ones,
    // sometimes only low ones.
    const int64_t lo = w % 5 == 0 ? 900 : 0;
    const int64_t hi = w % 7 == 3 ? 50 : 1'000 + w;
    const std::vector<LatencyBucket> window = RandomAscending(rng, lo, std::max(lo, hi), 30);
    merged.Merge(window);
    for (const LatencyBucket& b : window) all[b.latency] += b.count;
    std::vector<LatencyBucket> buckets;
    for (const auto& [l, c] : all) buckets.push_back(LatencyBucket{l, c});
    LatencySnapshot want;
    FillPercentiles(set, buckets, &want);
    LatencySnapshot got;
    merged.Fill(set, &got);
    ASSERT_EQ(got, want) << "window " << w;
    ASSERT_EQ(merged.buckets(), buckets);
  }
}

TEST(PercentileIndexTest, AnswersExactlyAsTheWalk) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    testing::SortedVectorOracle oracle(0, 1'000'000);
    oracle.Add(testing::ClusteredLognormal(5'000 * seed, 0, 900'000, seed));
    const std::vector<LatencyBucket> buckets = oracle.Buckets();
    const PercentileSet set =
        PercentileSet::Create({0.001, 1, 25, 50, 75, 90, 99, 99.9, 99.99, 99.999, 100}).value();
    LatencySnapshot walked;
    FillPercentiles(set, buckets, &walked);
    PercentileIndex index(buckets);
    LatencySnapshot searched;
    index.Fill(set, &searched);
    EXPECT_EQ(searched, walked) << seed;
    EXPECT_EQ(searched.values, oracle.Expect(set).values);
    EXPECT_EQ(searched.median, oracle.Expect(set).median);
  }
  PercentileIndex empty;
  LatencySnapshot none;
  empty.Fill(PercentileSet::Default(), &none);
  EXPECT_EQ(none.values, std::vector<int64_t>(PercentileSet::Default().size(), 0));
}

}  // namespace
}  // namespace perld
