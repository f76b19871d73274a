// The daemon's automatic memory budget: cgroup limit files (v2 "max", v1's
// "no limit" value), the smaller of physical memory and the cgroup limit,
// 75% of it, and a configured value taking precedence.
#include "daemon/server/memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace perld::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(MemoryBudgetTest, ParsesCgroupLimitFiles) {
  EXPECT_EQ(ParseCgroupMemoryLimit("1073741824\n"), kGiB);
  EXPECT_EQ(ParseCgroupMemoryLimit("max\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("9223372036854771712\n"), std::nullopt);  // v1: none
  EXPECT_EQ(ParseCgroupMemoryLimit(""), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("0"), std::nullopt);
}

TEST(MemoryBudgetTest, AutomaticIsThreeQuartersOfTheSmallerOfRamAndCgroup) {
  MemoryBudget b = ResolveMemoryBudget(0, 16 * kGiB, std::nullopt);
  EXPECT_EQ(b.bytes, 12 * kGiB);
  EXPECT_THAT(b.source, HasSubstr("75% of the physical memory"));
  b = ResolveMemoryBudget(0, 16 * kGiB, 4 * kGiB);
  EXPECT_EQ(b.bytes, 3 * kGiB);
  EXPECT_THAT(b.source, HasSubstr("cgroup memory limit"));
  EXPECT_EQ(ResolveMemoryBudget(0, 2 * kGiB, 64 * kGiB).bytes, 3 * kGiB / 2);
  EXPECT_EQ(ResolveMemoryBudget(5 * kGiB, 2 * kGiB, kGiB).bytes, 5 * kGiB);  // configured
  EXPECT_EQ(ResolveMemoryBudget(0, 0, std::nullopt).bytes, 0);               // unknown: none
  // This machine: something positive, never above its memory.
  const MemoryBudget here = ResolveMemoryBudget(0);
  EXPECT_GT(here.bytes, 0);
  EXPECT_LE(here.bytes, PhysicalMemoryBytes());
}

}  // namespace
}  // namespace perld::server
