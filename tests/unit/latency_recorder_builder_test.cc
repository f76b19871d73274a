#include "daemon/core/latency_recorder_builder.h"

#include "daemon/core/array_latency_recorder.h"
#include "gtest/gtest.h"

namespace perld {
namespace {

LatencyConfig Range(int64_t lo, int64_t hi, TimeUnit unit = TimeUnit::kNs) {
  LatencyConfig c = LatencyConfig::ForUnit(unit);
  c.min_latency = lo;
  c.max_latency = hi;
  return c;
}

TEST(LatencyRecorderBuilderTest, SeedSelectionExamples) {
  // Seed 7.1: 0..180,000 ms and 0..5,000,000 ns fit; 180 M ns and 180 G ns do not.
  EXPECT_EQ(ChoosePeriodicRecorderKind(LatencyConfig{}), RecorderKind::kArray);
  EXPECT_EQ(ChoosePeriodicRecorderKind(Range(0, 5'000'000)), RecorderKind::kArray);
  EXPECT_EQ(ChoosePeriodicRecorderKind(Range(0, 180'000'000)), RecorderKind::kLongHashMap);
  EXPECT_EQ(ChoosePeriodicRecorderKind(Range(0, 180'000'000'000)), RecorderKind::kLongHashMap);
  EXPECT_EQ(ChoosePeriodicRecorderKind(LatencyConfig::ForUnit(TimeUnit::kUs)),
            RecorderKind::kLongHashMap);
}

TEST(LatencyRecorderBuilderTest, ArrayBudgetBoundaryUsesTruncatedMegabytes) {
  // floor(range * 8 / MiB) < maxArraySizeMB (64): range 8,388,607 -> 63 MB.
  EXPECT_EQ(ChoosePeriodicRecorderKind(0, 8'388'607, 64), RecorderKind::kArray);
  EXPECT_EQ(ChoosePeriodicRecorderKind(0, 8'388'608, 64), RecorderKind::kLongHashMap);
  EXPECT_EQ(ChoosePeriodicRecorderKind(1000, 1000 + 8'388'607, 64), RecorderKind::kArray);
  EXPECT_EQ(ChoosePeriodicRecorderKind(0, 131'071, 1), RecorderKind::kArray);
  EXPECT_EQ(ChoosePeriodicRecorderKind(0, 131'072, 1), RecorderKind::kLongHashMap);
  // Indexability: even a huge array budget cannot index 2^31 slots.
  EXPECT_EQ(ChoosePeriodicRecorderKind(0, ArrayLatencyRecorder::kMaxSlots - 1, 1 << 30),
            RecorderKind::kArray);
  EXPECT_EQ(ChoosePeriodicRecorderKind(0, ArrayLatencyRecorder::kMaxSlots, 1 << 30),
            RecorderKind::kLongHashMap);
  EXPECT_EQ(ChoosePeriodicRecorderKind(0, int64_t{1} << 61, 1 << 30), RecorderKind::kLongHashMap);
}

TEST(LatencyRecorderBuilderTest, BuildsPeriodicTotalAndHybrid) {
  auto periodic = BuildPeriodicRecorder(LatencyConfig{});
  ASSERT_TRUE(periodic.ok());
  EXPECT_EQ((*periodic)->kind(), RecorderKind::kArray);
  EXPECT_EQ((*periodic)->min_latency(), 0);
  EXPECT_EQ((*periodic)->max_latency(), 180'000);

  LatencyConfig ns = LatencyConfig::ForUnit(TimeUnit::kNs);
  ns.max_hash_map_size_mb = 3;
  ns.total_max_hash_map_size_mb = 5;
  auto sparse = BuildPeriodicRecorder(ns);
  ASSERT_TRUE(sparse.ok());
  EXPECT_EQ((*sparse)->kind(), RecorderKind::kLongHashMap);
  EXPECT_EQ((*sparse)->BudgetBytes(), 3u << 20);

  auto total = BuildTotalRecorder(LatencyConfig{});  // always the primitive map
  ASSERT_TRUE(total.ok());
  EXPECT_EQ((*total)->kind(), RecorderKind::kLongHashMap);
  EXPECT_EQ((*total)->BudgetBytes(), 256u << 20);
  EXPECT_EQ((*BuildTotalRecorder(ns))->BudgetBytes(), 5u << 20);

  auto hp = BuildHybridRecorder(ns, HybridRole::kPeriodic);
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ((*hp)->policy(), HybridMemoryPolicy::kReleaseAfterWindow);
  EXPECT_EQ((*hp)->BudgetBytes(), 1024u << 20);
  EXPECT_EQ((*hp)->page_bits(), 8);
  EXPECT_EQ((*hp)->sparse_entry_limit(), 32);
  auto ht = BuildHybridRecorder(ns, HybridRole::kTotal);
  ASSERT_TRUE(ht.ok());
  EXPECT_EQ((*ht)->policy(), HybridMemoryPolicy::kResetWindowWhenFull);
  EXPECT_EQ((*ht)->BudgetBytes(), 2048u << 20);

  for (RecorderKind kind : {RecorderKind::kArray, RecorderKind::kLongHashMap,
                            RecorderKind::kHashMap, RecorderKind::kHybridPaged}) {
    auto r = BuildRecorder(kind, Range(10, 5000), 4);
    ASSERT_TRUE(r.ok()) << RecorderKindName(kind);
    EXPECT_EQ((*r)->kind(), kind);
  }
}

TEST(LatencyRecorderBuilderTest, RejectsInvalidConfigs) {
  LatencyConfig bad;
  bad.max_latency = -1;
  EXPECT_EQ(BuildPeriodicRecorder(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(BuildTotalRecorder(bad).ok());
  EXPECT_FALSE(BuildHybridRecorder(bad, HybridRole::kTotal).ok());
  LatencyConfig pages;
  pages.exact_latency_page_bits = 4;  // 16 values per page; 32 sparse entries impossible
  EXPECT_FALSE(BuildHybridRecorder(pages, HybridRole::kPeriodic).ok());
}

}  // namespace
}  // namespace perld
