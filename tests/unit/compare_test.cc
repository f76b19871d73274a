#include "client/perlctl/compare.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace perld::perlctl {
namespace {

SloFacts Facts(int64_t unit_ns, const char* unit, int64_t p99, int64_t max, double rate) {
  SloFacts f;
  f.unit_ns = unit_ns;
  f.unit = unit;
  f.records = 1000;
  f.valid = 1000;
  f.min = 1;
  f.max = max;
  f.avg = 10;
  f.rate = rate;
  f.percentiles = {{50, 5}, {99, p99}};
  return f;
}

TEST(CompareTest, ParsesRelativeAndAbsoluteLimits) {
  absl::StatusOr<std::vector<RegressionTerm>> terms =
      ParseFailIf("p99>+5%, max > +2ms,rate<-10%,records<-1,p50>3");
  ASSERT_TRUE(terms.ok()) << terms.status();
  ASSERT_EQ(terms->size(), 5u);
  EXPECT_EQ((*terms)[0].text, "p99>+5%");
  EXPECT_TRUE((*terms)[0].above);
  EXPECT_TRUE((*terms)[0].relative);
  EXPECT_EQ((*terms)[0].limit, 5);
  EXPECT_EQ((*terms)[1].limit_unit_ns, 1'000'000);
  EXPECT_FALSE((*terms)[2].above);
  EXPECT_EQ((*terms)[2].limit, -10);
  EXPECT_EQ((*terms)[3].limit, -1);
  EXPECT_FALSE((*terms)[3].relative);
  EXPECT_EQ((*terms)[4].limit_unit_ns, 0);
  for (const char* bad : {"", "p99", "p99=+5%", "q99>+5%", "p99>+5x", "records>+5ms", "rate>"}) {
    EXPECT_FALSE(ParseFailIf(bad).ok()) << bad;
  }
}

TEST(CompareTest, DifferentUnitsCompareInTheFinerOneExactly) {
  SloFacts a = Facts(1'000'000, "ms", 2, 7, 100);  // ms
  SloFacts b = Facts(1, "ns", 2'000'001, 7'000'000, 100);
  ToCommonUnit(&a, &b);
  EXPECT_EQ(a.unit_ns, 1);
  EXPECT_STREQ(a.unit, "ns");
  EXPECT_EQ(a.percentiles[99], 2'000'000);
  EXPECT_EQ(a.max, 7'000'000);
  const std::vector<CompareRow> rows = CompareRows(a, b, {99});
  ASSERT_EQ(rows.size(), 7u);  // records, rate, invalid, min, avg, p99, max
  EXPECT_EQ(rows[5].metric, "p99");
  EXPECT_EQ(rows[5].delta(), 1);
  EXPECT_EQ(rows[6].delta(), 0);
  EXPECT_FALSE(rows[2].relative().has_value());  // invalid 0 -> 0: no relative change
}

TEST(CompareTest, TheGateFailsWhenBPassesALimitInItsDirection) {
  const SloFacts a = Facts(1'000, "us", 100, 1'000, 1'000);
  const SloFacts b = Facts(1'000, "us", 106, 3'001, 899);
  absl::StatusOr<std::vector<RegressionTerm>> terms =
      ParseFailIf("p99>+5%,p99>+10%,max>+2ms,max>+3ms,rate<-10%,rate<-11%");
  ASSERT_TRUE(terms.ok());
  const std::vector<RegressionVerdict> v = EvaluateFailIf(*terms, a, b);
  ASSERT_EQ(v.size(), 6u);
  EXPECT_TRUE(v[0].failed);   // +6%
  EXPECT_FALSE(v[1].failed);  // not above +10%
  EXPECT_TRUE(v[2].failed);   // +2001 us > 2000 us
  EXPECT_FALSE(v[3].failed);
  EXPECT_TRUE(v[4].failed);  // -10.1%
  EXPECT_FALSE(v[5].failed);
  EXPECT_EQ(v[0].line, "FAIL p99>+5%: 100 -> 106 us (+6.0%)");
  EXPECT_EQ(v[2].line, "FAIL max>+2ms: 1000 -> 3001 us (+2001)");
}

TEST(CompareTest, AGateThatCannotMeasureFails) {
  SloFacts a = Facts(1, "ns", 10, 20, 1);
  const SloFacts b = Facts(1, "ns", 10, 20, 1);
  a.percentiles.clear();
  absl::StatusOr<std::vector<RegressionTerm>> terms = ParseFailIf("p99>+5%");
  ASSERT_TRUE(terms.ok());
  const std::vector<RegressionVerdict> v = EvaluateFailIf(*terms, a, b);
  EXPECT_TRUE(v[0].failed);
  EXPECT_EQ(v[0].line, "FAIL p99>+5%: not measured in A");
}

}  // namespace
}  // namespace perld::perlctl
