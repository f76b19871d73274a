// The SBM aggregator's windows (PeriodicAndTotalWindows::CreateHybrid): K
// remote clients' exact windows merged interval by interval must equal the
// concatenated raw data, and the memory caps must report before releasing.
#include <algorithm>
#include <random>
#include <vector>

#include "daemon/core/hybrid_paged_latency_recorder.h"
#include "daemon/core/long_hash_map_latency_recorder.h"
#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/run_total.h"
#include "gtest/gtest.h"
#include "tests/unit/latency_oracle.h"

namespace perld {
namespace {

using testing::Observation;
using testing::SortedVectorOracle;

enum class Shape { kContiguous, kOnePerPage, kClusteredLognormal, kHeavySparseTail };

// One client's raw observations for one interval.
std::vector<Observation> Generate(Shape shape, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Observation> out;
  out.reserve(n);
  const auto records = [&] { return static_cast<int32_t>(1 + rng() % 4); };
  switch (shape) {
    case Shape::kContiguous: {
      const int64_t base = 10'000 + static_cast<int64_t>(rng() % 1000);
      for (size_t i = 0; i < n; ++i) out.push_back({base + static_cast<int64_t>(i), records(), 8});
      break;
    }
    case Shape::kOnePerPage:  // one value in each 256-value page
      for (size_t i = 0; i < n; ++i) {
        out.push_back(
            {static_cast<int64_t>(i) * 256 + static_cast<int64_t>(rng() % 256), records(), 8});
      }
      break;
    case Shape::kClusteredLognormal:
      return testing::ClusteredLognormal(n, 50'000, 1 << 22, seed);
    case Shape::kHeavySparseTail:  // dense head, 2% spread over nine decades
      for (size_t i = 0; i < n; ++i) {
        const bool tail = rng() % 50 == 0;
        const int64_t v = tail ? static_cast<int64_t>(rng() % 1'000'000'000'000)
                               : 1'000 + static_cast<int64_t>(rng() % 2'000);
        out.push_back({v, records(), 8});
      }
      break;
  }
  return out;
}

// What a remote client sends: its window's counters and ascending buckets.
struct ClientWindow {
  LatencyCounters counters;
  std::vector<LatencyBucket> buckets;
};

ClientWindow Aggregate(const LatencyConfig& config, const std::vector<Observation>& obs) {
  SortedVectorOracle oracle(config.min_latency, config.max_latency);
  oracle.Add(obs);
  auto r = LongHashMapLatencyRecorder::Create(config.min_latency, config.max_latency, 1024);
  EXPECT_TRUE(r.ok());
  (*r)->Reset(0);
  const std::vector<TimeStamp> ts = testing::ToTimeStamps(obs);
  (*r)->RecordBatch(ts.data(), ts.size());
  return {(*r)->counters(), oracle.Buckets()};
}

TEST(AggregateWindowsTest, ClientsWithDifferentDistributionsMergeExactly) {
  const LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  auto made = PeriodicAndTotalWindows::CreateHybrid(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  SortedVectorOracle all(config.min_latency, config.max_latency);
  const Shape shapes[] = {Shape::kContiguous, Shape::kOnePerPage, Shape::kClusteredLognormal,
                          Shape::kHeavySparseTail};
  for (int64_t interval = 1; interval <= 3; ++interval) {
    SortedVectorOracle window(config.min_latency, config.max_latency);
    for (int client = 0; client < 8; ++client) {
      const auto obs = Generate(shapes[client % 4], 3000, 100 * interval + client);
      window.Add(obs);
      all.Add(obs);
      const ClientWindow cw = Aggregate(config, obs);
      ASSERT_TRUE(w.MergeWindow(cw.counters, cw.buckets, interval).ok());
    }
    EXPECT_FALSE(w.HasPendingReports()) << "the default caps hold this load";
    WindowReport report;
    w.CloseWindow(interval, &report);
    LatencySnapshot want = window.Expect(w.percentiles());
    want.start_time = interval - 1;
    want.end_time = interval;
    EXPECT_EQ(report.snapshot, want) << "interval " << interval;
    EXPECT_EQ(report.distribution, window.Buckets()) << "interval " << interval;
  }
  WindowReport total;
  w.CloseTotal(4, &total);
  LatencySnapshot want = all.Expect(w.percentiles());
  want.end_time = 4;
  EXPECT_EQ(total.snapshot, want);
  EXPECT_EQ(total.distribution, all.Buckets());
  EXPECT_TRUE(total.exact_total);
}

// A window whose one-value-per-page data needs about twice the 1 MiB cap.
constexpr size_t kOverCapValues = 14'000;  // ~144 B per lone value

TEST(AggregateWindowsTest, PeriodicCapNeverCutsAWindowShortAndReleasesAfterItsReport) {
  LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  config.exact_latency_max_memory_mb = 1;
  auto made = PeriodicAndTotalWindows::CreateHybrid(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  size_t peak = 0;
  for (int64_t interval = 1; interval <= 40; ++interval) {
    const auto obs = Generate(Shape::kOnePerPage, kOverCapValues, interval);
    SortedVectorOracle window(config.min_latency, config.max_latency);
    window.Add(obs);
    const ClientWindow cw = Aggregate(config, obs);
    ASSERT_TRUE(w.MergeWindow(cw.counters, cw.buckets, interval).ok());
    ASSERT_GT(w.periodic().RetainedBytes(), w.periodic().BudgetBytes());
    ASSERT_FALSE(w.HasPendingReports()) << "periodic pressure must not close the window early";
    peak = std::max(peak, w.periodic().RetainedBytes());

    WindowReport report;
    w.CloseWindow(interval, &report);
    EXPECT_FALSE(report.snapshot.closed_full);
    EXPECT_EQ(report.snapshot.valid, cw.counters.valid);  // reported complete ...
    EXPECT_EQ(report.distribution, window.Buckets());
    EXPECT_EQ(w.periodic().RetainedBytes(), 0u);  // ... then the cache is released
    EXPECT_EQ(w.periodic().CacheReleases(), interval);
    // The total keeps its own (2 GiB) budget: no early total segments here.
    ASSERT_FALSE(w.HasPendingReports());
  }
  // Bounded over many intervals: each window needs what the first one did.
  EXPECT_LT(peak, 2 * kOverCapValues * 160);
}

TEST(AggregateWindowsTest, TotalCapReportsTheSegmentThenResetsAndReleases) {
  LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  config.exact_total_latency_max_memory_mb = 1;
  auto made = PeriodicAndTotalWindows::CreateHybrid(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  SortedVectorOracle all(config.min_latency, config.max_latency);
  int64_t segments = 0;
  for (int64_t interval = 1; interval <= 6; ++interval) {
    const auto obs = Generate(Shape::kOnePerPage, kOverCapValues, 1000 + interval);
    all.Add(obs);
    SortedVectorOracle window(config.min_latency, config.max_latency);
    window.Add(obs);
    const ClientWindow cw = Aggregate(config, obs);
    ASSERT_TRUE(w.MergeWindow(cw.counters, cw.buckets, interval).ok());
    WindowReport report;
    w.CloseWindow(interval, &report);
    // Each window alone exceeds the total's cap: the total prints its
    // segment (this window's data, exact) and resets, then releases.
    ASSERT_TRUE(w.HasPendingReports());
    std::vector<WindowReport> pending = w.TakePendingReports();
    ASSERT_EQ(pending.size(), 1u);
    EXPECT_EQ(pending[0].scope, WindowReport::Scope::kTotalSegment);
    EXPECT_TRUE(pending[0].snapshot.closed_full);
    EXPECT_EQ(pending[0].distribution, window.Buckets());
    EXPECT_EQ(w.total().RetainedBytes(), 0u);
    EXPECT_EQ(w.total().CacheReleases(), interval);
    ++segments;
  }
  WindowReport total;
  w.CloseTotal(7, &total);
  const LatencySnapshot want = all.Expect(w.percentiles());
  // Counters cover every record of every segment, whatever the budget kept.
  EXPECT_EQ(CountersOf(total.snapshot), CountersOf(want));
  EXPECT_EQ(total.segments, segments + 1);
  if (total.exact_total) {
    EXPECT_EQ(total.distribution, all.Buckets());
  }
}

}  // namespace
}  // namespace perld
