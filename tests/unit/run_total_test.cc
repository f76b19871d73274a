#include "daemon/core/run_total.h"

#include <gtest/gtest.h>

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
