#include "daemon/core/latency_percentiles.h"

#include <vector>

#include "daemon/core/latency_config.h"
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

}  // namespace
}  // namespace perld
