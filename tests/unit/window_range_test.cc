// perlctl's range options (client/perlctl/window_range.h): durations,
// RFC 3339 times or offsets, window numbers, and the refusals.
#include "client/perlctl/window_range.h"

#include <gtest/gtest.h>

namespace perld::perlctl {
namespace {

TEST(WindowRangeTest, OffsetsCarryTheirUnit) {
  EXPECT_EQ(*ParseOffsetMs("250ms"), 250);
  EXPECT_EQ(*ParseOffsetMs("30s"), 30'000);
  EXPECT_EQ(*ParseOffsetMs("1.5s"), 1'500);
  EXPECT_EQ(*ParseOffsetMs("2m"), 120'000);
  EXPECT_EQ(*ParseOffsetMs("1h"), 3'600'000);
  EXPECT_EQ(*ParseOffsetMs("0"), 0);
  for (const char* bad : {"", "30", "-1s", "s", "1x", "nans", "1e300h"}) {
    EXPECT_FALSE(ParseOffsetMs(bad).ok()) << bad;
  }
}

TEST(WindowRangeTest, TimesAreRfc3339OrOffsetsFromTheRunsStart) {
  absl::StatusOr<RangeTime> at = ParseRangeTime("2026-12-05T10:00:00.250Z");
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->Resolve(5), 1'796'464'800'250);
  absl::StatusOr<RangeTime> zoned = ParseRangeTime("2026-12-05T11:00:00+01:00");
  ASSERT_TRUE(zoned.ok());
  EXPECT_EQ(zoned->Resolve(0), 1'796'464'800'000);
  absl::StatusOr<RangeTime> offset = ParseRangeTime("30s");
  ASSERT_TRUE(offset.ok());
  EXPECT_EQ(offset->Resolve(1'000), 31'000);
  EXPECT_FALSE(ParseRangeTime("yesterday").ok());
  EXPECT_FALSE(ParseRangeTime("2026-12-05 10:00").ok());
}

TEST(WindowRangeTest, WindowNumbers) {
  absl::StatusOr<WindowRangeOptions> r = ParseWindowNumbers("3-10");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first_window, 3);
  EXPECT_EQ(r->last_window, 10);
  r = ParseWindowNumbers("7");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first_window, 7);
  EXPECT_EQ(r->last_window, 7);
  r = ParseWindowNumbers("7-");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->last_window, 0);  // open
  EXPECT_EQ(DescribeRange(*r), "windows 7-");
  for (const char* bad : {"", "0-3", "3-1", "a-b", "-3", "1-2-3"}) {
    EXPECT_FALSE(ParseWindowNumbers(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace perld::perlctl
