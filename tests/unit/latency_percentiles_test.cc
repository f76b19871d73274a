#include "daemon/core/latency_percentiles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "daemon/core/latency_config.h"
#include "daemon/core/percentile_index.h"
#include "gtest/gtest.h"

namespace perld {
namespace {

PercentileSet Set(std::vector<double> p) {
  auto s = PercentileSet::Create(std::move(p));
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LatencyPercentilesTest, SeedExampleBuckets) {
  // 100 x 4, 105 x 7, 110 x 6: cumulative intervals [0,4) [4,11) [11,17).
  const PercentileSet set = Set({10, 50, 64.8, 65, 99, 100});
  LatencySnapshot out;
  PercentileWalker walker(set, 17, &out);
  walker.Add(100, 4);
  walker.Add(105, 7);
  walker.Add(110, 6);
  EXPECT_EQ(walker.cumulative(), 17);
  // indexes: 1, 8, 11 (floor 11.016), 11 (floor 11.05), 16, 16 (clamped from 17)
  EXPECT_EQ(out.values, (std::vector<int64_t>{100, 105, 110, 110, 110, 110}));
  EXPECT_EQ(out.counts, (std::vector<int64_t>{4, 7, 6, 6, 6, 6}));
  EXPECT_EQ(out.median, 105);  // index 17 >> 1 = 8
  EXPECT_EQ(out.percents, set.percents());
  EXPECT_EQ(out.fractions, set.fractions());
}

TEST(LatencyPercentilesTest, IndexIsSbksTruncatedDoubleProduct) {
  const PercentileSet set = Set({29, 57, 99.99});
  // 100 * (29 / 100.0) == 28.999999999999996 in IEEE double -> index 28.
  EXPECT_EQ(set.Index(0, 100), 28);
  EXPECT_EQ(set.Index(1, 100), 56);  // 57 / 100.0 * 100 == 56.99999999999999
  EXPECT_EQ(set.Index(2, 100), 99);
  EXPECT_EQ(set.Index(2, 10000), 9998);  // 10000 * 0.9999 == 9998.999999999998
  EXPECT_EQ(set.Index(2, 1), 0);
  const PercentileSet hundred = Set({100});
  EXPECT_EQ(hundred.Index(0, 1), 0);
  EXPECT_EQ(hundred.Index(0, 5), 4);  // clamped: SBK would miss (index 5 of 5)
  EXPECT_EQ(hundred.Index(0, std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max() - 1);

  LatencySnapshot out;
  PercentileWalker walker(set, 100, &out);
  for (int64_t v = 0; v < 100; ++v) {
    walker.Add(v, 1);
  }
  EXPECT_EQ(out.values, (std::vector<int64_t>{28, 56, 99}));
  EXPECT_EQ(out.counts, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(out.median, 50);
}

TEST(LatencyPercentilesTest, EmptyWindowReportsZeros) {
  const PercentileSet set = PercentileSet::Default();
  LatencySnapshot out;
  out.values = {7, 7};
  out.median = 3;
  PercentileWalker walker(set, 0, &out);
  EXPECT_EQ(out.values, std::vector<int64_t>(set.size(), 0));
  EXPECT_EQ(out.counts, std::vector<int64_t>(set.size(), 0));
  EXPECT_EQ(out.median, 0);
}

TEST(LatencyPercentilesTest, SeveralPercentilesInOneBucket) {
  const PercentileSet set = Set({1, 2, 3, 90});
  LatencySnapshot out;
  PercentileWalker walker(set, 1000, &out);
  walker.Add(5, 995);
  walker.Add(9, 5);
  EXPECT_EQ(out.values, (std::vector<int64_t>{5, 5, 5, 5}));
  EXPECT_EQ(out.counts, (std::vector<int64_t>{995, 995, 995, 995}));
}

TEST(LatencyPercentilesTest, DefaultSetIsSbks) {
  const PercentileSet set = PercentileSet::Default();
  ASSERT_EQ(set.size(), 28u);
  EXPECT_EQ(set.percents().front(), 5.0);
  EXPECT_EQ(set.percents()[17], 90.0);
  EXPECT_EQ(set.percents()[18], 92.5);
  EXPECT_EQ(set.percents().back(), 99.99);
  EXPECT_EQ(set.fractions().back(), 99.99 / 100.0);
}

TEST(LatencyPercentilesTest, CreateSortsAndValidates) {
  auto s = PercentileSet::Create({99, 50, 0.5});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->percents(), (std::vector<double>{0.5, 50, 99}));
  EXPECT_TRUE(PercentileSet::Create({0}).ok());  // the minimum
  EXPECT_FALSE(PercentileSet::Create({-1}).ok());
  EXPECT_FALSE(PercentileSet::Create({100.0001}).ok());
  EXPECT_FALSE(PercentileSet::Create({50, 50}).ok());
  EXPECT_FALSE(PercentileSet::Create({std::nan("")}).ok());
  EXPECT_TRUE(PercentileSet::Create({100}).ok());
  EXPECT_TRUE(PercentileSet::Create({}).ok());
  const absl::Status st = ValidatePercentiles(std::vector<double>{10, 20, 10});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("percentiles"), absl::string_view::npos);
}

// --- methods (PercentileMethod) ----------------------------------------------

PercentileSet SetBy(std::vector<double> p, PercentileMethod method) {
  auto s = PercentileSet::Create(std::move(p), method);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

LatencySnapshot Walk(const PercentileSet& set, const std::vector<LatencyBucket>& buckets) {
  int64_t valid = 0;
  for (const LatencyBucket& b : buckets) valid += b.count;
  LatencySnapshot out;
  PercentileWalker walker(set, valid, &out);
  for (const LatencyBucket& b : buckets) walker.Add(b.latency, b.count);
  return out;
}

// HdrHistogram Java, AbstractHistogram.getValueAtPercentile (2.1.12), on an
// exact histogram (every value its own bucket): the walk as Java writes it.
int64_t JavaValueAtPercentile(const std::vector<LatencyBucket>& buckets, double percentile) {
  int64_t total = 0;
  for (const LatencyBucket& b : buckets) total += b.count;
  const double requested = std::min(
      std::max(std::nextafter(percentile, -std::numeric_limits<double>::infinity()), 0.0), 100.0);
  const double fp_count = (requested * static_cast<double>(total)) / 100.0;
  auto count_at = static_cast<int64_t>(std::ceil(fp_count));
  count_at = std::max<int64_t>(count_at, 1);
  int64_t to_index = 0;
  for (const LatencyBucket& b : buckets) {
    to_index += b.count;
    if (to_index >= count_at) return b.latency;
  }
  return 0;
}

// HdrHistogram C, hdr_value_at_percentile (0.11.x), on an exact histogram.
int64_t CValueAtPercentile(const std::vector<LatencyBucket>& buckets, double percentile) {
  int64_t total = 0;
  for (const LatencyBucket& b : buckets) total += b.count;
  const double requested = percentile < 100.0 ? percentile : 100.0;
  // C's own arithmetic, truncation of x + 0.5 included.
  // NOLINTNEXTLINE(bugprone-incorrect-roundings)
  auto count_at = static_cast<int64_t>(((requested / 100) * static_cast<double>(total)) + 0.5);
  count_at = count_at > 1 ? count_at : 1;
  int64_t to_index = 0;
  for (const LatencyBucket& b : buckets) {
    to_index += b.count;
    if (to_index >= count_at) return b.latency;
  }
  return 0;
}

TEST(PercentileMethodTest, TenRecordsAsTheHeaderSays) {
  std::vector<LatencyBucket> one_to_ten;
  for (int64_t v = 1; v <= 10; ++v) one_to_ten.push_back({v, 1});
  const std::vector<double> p = {12, 30, 50, 95};
  const LatencySnapshot sbk = Walk(SetBy(p, PercentileMethod::kSbk), one_to_ten);
  const LatencySnapshot nearest = Walk(SetBy(p, PercentileMethod::kNearestRank), one_to_ten);
  const LatencySnapshot hdr = Walk(SetBy(p, PercentileMethod::kHdr), one_to_ten);
  EXPECT_EQ(sbk.values, (std::vector<int64_t>{2, 4, 6, 10}));
  EXPECT_EQ(nearest.values, (std::vector<int64_t>{2, 3, 5, 10}));
  EXPECT_EQ(hdr.values, (std::vector<int64_t>{1, 3, 5, 10}));
  EXPECT_EQ(sbk.median, 6);  // SBK's own median index, 10 >> 1
  EXPECT_EQ(nearest.median, 5);
  EXPECT_EQ(hdr.median, 5);
}

TEST(PercentileMethodTest, EachMethodIsItsToolsAlgorithm) {
  // Random distributions (few and many distinct values, heavy buckets) and
  // percents that land on integer ranks, between them, and at the ends.
  std::mt19937_64 rng(29);
  for (int round = 0; round < 300; ++round) {
    std::vector<LatencyBucket> buckets;
    const int distinct = 1 + static_cast<int>(rng() % (round % 3 == 0 ? 5 : 400));
    int64_t latency = static_cast<int64_t>(rng() % 100);
    for (int i = 0; i < distinct; ++i) {
      latency += 1 + static_cast<int64_t>(rng() % 50);
      buckets.push_back({latency, 1 + static_cast<int64_t>(rng() % (round % 2 ? 3 : 1000))});
    }
    int64_t total = 0;
    for (const LatencyBucket& b : buckets) total += b.count;
    std::vector<double> p = {0, 100, 50};
    for (int i = 0; i < 40; ++i) {
      // Integer ranks: 100 * k / total; and arbitrary levels.
      const double at_rank =
          100.0 * static_cast<double>(rng() % (total + 1)) / static_cast<double>(total);
      const double any = static_cast<double>(rng() % 100'000'000) / 1e6;
      for (double x : {at_rank, any}) {
        if (std::find(p.begin(), p.end(), x) == p.end()) p.push_back(x);
      }
    }
    for (PercentileMethod method : {PercentileMethod::kNearestRank, PercentileMethod::kHdr}) {
      const PercentileSet set = SetBy(p, method);
      const LatencySnapshot walked = Walk(set, buckets);
      PercentileIndex index(buckets);
      LatencySnapshot searched;
      index.Fill(set, &searched);
      EXPECT_EQ(searched, walked);
      for (size_t i = 0; i < set.size(); ++i) {
        const double percent = set.percents()[i];
        const int64_t want = method == PercentileMethod::kHdr
                                 ? CValueAtPercentile(buckets, percent)
                                 : JavaValueAtPercentile(buckets, percent);
        ASSERT_EQ(walked.values[i], want) << PercentileMethodName(method) << " p" << percent
                                          << " of " << total << " round " << round;
      }
      const int64_t median = method == PercentileMethod::kHdr ? CValueAtPercentile(buckets, 50)
                                                              : JavaValueAtPercentile(buckets, 50);
      EXPECT_EQ(walked.median, median);
    }
    // SBK's stays what it was: the default set's answers, median V >> 1.
    const LatencySnapshot sbk = Walk(SetBy(p, PercentileMethod::kSbk), buckets);
    const LatencySnapshot plain = Walk(Set(p), buckets);
    EXPECT_EQ(sbk, plain);
  }
}

TEST(PercentileMethodTest, NamesRoundTripAndUnknownOnesAreRefused) {
  for (PercentileMethod m :
       {PercentileMethod::kSbk, PercentileMethod::kNearestRank, PercentileMethod::kHdr}) {
    absl::StatusOr<PercentileMethod> parsed = ParsePercentileMethod(PercentileMethodName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  absl::StatusOr<PercentileMethod> bad = ParsePercentileMethod("nearest");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("sbk, nearest-rank or hdr"), std::string::npos);
  EXPECT_EQ(Set({50}).method(), PercentileMethod::kSbk);
}

}  // namespace
}  // namespace perld
