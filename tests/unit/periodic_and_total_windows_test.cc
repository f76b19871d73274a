#include "daemon/core/periodic_and_total_windows.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "daemon/core/array_latency_recorder.h"
#include "daemon/core/distribution_merge.h"
#include "daemon/core/hash_map_latency_recorder.h"
#include "daemon/core/latency_recorder_builder.h"
#include "daemon/core/long_hash_map_latency_recorder.h"
#include "gtest/gtest.h"
#include "tests/unit/latency_oracle.h"

namespace perld {
namespace {

using testing::Observation;
using testing::SortedVectorOracle;

std::vector<Observation> Stream(size_t n, int64_t base, int64_t step, uint64_t seed) {
  std::vector<Observation> out;
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    out.push_back({base + static_cast<int64_t>(i) * step + static_cast<int64_t>(rng() % 3),
                   static_cast<int32_t>(1 + rng() % 3), 512});
  }
  return out;
}

void Record(PeriodicAndTotalWindows& w, const std::vector<Observation>& obs, int64_t now) {
  const std::vector<TimeStamp> ts = testing::ToTimeStamps(obs);
  w.RecordBatch(ts.data(), ts.size(), now);
}

// The percentile values of a spilled total: its segments' merge.
std::vector<int64_t> SpilledPercentiles(const std::vector<WindowReport>& segments,
                                        const WindowReport& total, const PercentileSet& set) {
  std::vector<SpanBucketSource> spans;
  spans.reserve(segments.size());
  std::vector<BucketSource*> sources;
  sources.reserve(segments.size());
  for (const WindowReport& s : segments) sources.push_back(&spans.emplace_back(s.distribution));
  LatencySnapshot out = total.snapshot;
  EXPECT_TRUE(MergedPercentiles(sources, set, &out).ok());
  return out.values;
}

TEST(PeriodicAndTotalWindowsTest, UsesTheBuilderPolicy) {
  auto w = PeriodicAndTotalWindows::Create(LatencyConfig{}, 0);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->periodic().kind(), RecorderKind::kArray);
  EXPECT_EQ(w->total().kind(), RecorderKind::kLongHashMap);
  auto h = PeriodicAndTotalWindows::CreateHybrid(LatencyConfig::ForUnit(TimeUnit::kNs), 0);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->periodic().kind(), RecorderKind::kHybridPaged);
  EXPECT_EQ(h->total().kind(), RecorderKind::kHybridPaged);
  LatencyConfig bad;
  bad.percentiles = {50, 50};
  EXPECT_FALSE(PeriodicAndTotalWindows::Create(bad, 0).ok());
}

TEST(PeriodicAndTotalWindowsTest, WindowsMergeIntoAnExactTotal) {
  const LatencyConfig config;
  auto made = PeriodicAndTotalWindows::Create(config, 100);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  SortedVectorOracle all(config.min_latency, config.max_latency);
  int64_t now = 100;
  for (int window = 0; window < 6; ++window) {
    std::vector<Observation> obs = Stream(3000, int64_t{10} * window, 7, window);
    obs.push_back({-3, 2, 0});
    obs.push_back({config.max_latency + 1, 1, 0});
    Record(w, obs, now);
    SortedVectorOracle one(config.min_latency, config.max_latency);
    one.Add(obs);
    all.Add(obs);
    WindowReport got;
    w.CloseWindow(now + 50, &got);
    LatencySnapshot want = one.Expect(w.percentiles());
    want.start_time = now;
    want.end_time = now + 50;
    EXPECT_EQ(got.snapshot, want);
    EXPECT_EQ(got.scope, WindowReport::Scope::kPeriodic);
    int64_t in_distribution = 0;
    for (size_t i = 0; i < got.distribution.size(); ++i) {
      in_distribution += got.distribution[i].count;
      if (i > 0) {
        EXPECT_LT(got.distribution[i - 1].latency, got.distribution[i].latency);
      }
    }
    EXPECT_EQ(in_distribution, want.valid);
    now += 50;
  }
  EXPECT_FALSE(w.HasPendingReports());
  WindowReport total;
  w.CloseWindow(now, &total);  // an empty window is still reported
  EXPECT_EQ(total.snapshot.records, 0);
  EXPECT_EQ(total.snapshot.start_time, now);
  w.CloseTotal(now + 1, &total);
  LatencySnapshot want = all.Expect(w.percentiles());
  want.start_time = 100;
  want.end_time = now + 1;
  EXPECT_EQ(total.snapshot, want);
  EXPECT_EQ(total.scope, WindowReport::Scope::kTotal);
  EXPECT_EQ(total.segments, 1);
  EXPECT_TRUE(total.exact_total);
  // Both windows restarted.
  EXPECT_EQ(w.total().counters(), LatencyCounters{});
  EXPECT_EQ(w.total().window().start_time(), now + 1);
}

TEST(PeriodicAndTotalWindowsTest, CloseTotalFoldsUnreportedPeriodicData) {
  auto made = PeriodicAndTotalWindows::Create(LatencyConfig{}, 0);
  ASSERT_TRUE(made.ok());
  const std::vector<Observation> obs = Stream(100, 5, 1, 1);
  Record(*made, obs, 1);
  WindowReport total;
  made->CloseTotal(9, &total);
  SortedVectorOracle oracle(0, 180'000);
  oracle.Add(obs);
  LatencySnapshot want = oracle.Expect(made->percentiles());
  want.end_time = 9;
  EXPECT_EQ(total.snapshot, want);
}

// A warm-up: windows before DiscardTotal are reported as ever, the total
// holds exactly what came after it, from its time on.
TEST(PeriodicAndTotalWindowsTest, DiscardTotalLeavesTheWarmupOutOfTheTotal) {
  auto made = PeriodicAndTotalWindows::Create(LatencyConfig{}, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  const std::vector<Observation> warmup = Stream(500, 900, 3, 1);
  Record(w, warmup, 1);
  int64_t warmup_records = 0;
  for (const Observation& o : warmup) warmup_records += o.records;
  WindowReport report;
  w.CloseWindow(10, &report);
  EXPECT_EQ(report.snapshot.records, warmup_records);
  EXPECT_EQ(w.DiscardTotal(10).records, warmup_records);
  SortedVectorOracle after(0, 180'000);
  for (int window = 0; window < 3; ++window) {
    const std::vector<Observation> obs = Stream(400, 5 + window, 2, 7 + window);
    after.Add(obs);
    Record(w, obs, 11 + window);
    w.CloseWindow(20 + 10 * window, &report);
  }
  WindowReport total;
  w.CloseTotal(60, &total);
  LatencySnapshot want = after.Expect(w.percentiles());
  want.start_time = 10;
  want.end_time = 60;
  EXPECT_EQ(total.snapshot, want);
  int64_t in_distribution = 0;
  for (const LatencyBucket& b : total.distribution) in_distribution += b.count;
  EXPECT_EQ(in_distribution, want.valid);
}

TEST(PeriodicAndTotalWindowsTest, FullPeriodicWindowIsReportedResetAndCounted) {
  LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);  // primitive-map periodic
  config.max_hash_map_size_mb = 1;                               // 65,536 distinct latencies
  auto made = PeriodicAndTotalWindows::Create(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  ASSERT_EQ(w.periodic().kind(), RecorderKind::kLongHashMap);
  std::vector<Observation> obs;
  for (int64_t v = 0; v < 150'000; ++v) {
    obs.push_back({v * 3, 1, 8});
  }
  Record(w, obs, 777);
  ASSERT_TRUE(w.HasPendingReports());
  std::vector<WindowReport> early = w.TakePendingReports();
  EXPECT_FALSE(w.HasPendingReports());
  ASSERT_EQ(early.size(), 2u);
  EXPECT_EQ(w.periodic_full_closes(), 2);
  int64_t reported = 0;
  for (size_t i = 0; i < early.size(); ++i) {
    EXPECT_EQ(early[i].scope, WindowReport::Scope::kPeriodic);
    EXPECT_TRUE(early[i].snapshot.closed_full);
    EXPECT_EQ(early[i].snapshot.full_closes, static_cast<int64_t>(i + 1));
    EXPECT_EQ(early[i].snapshot.end_time, 777);
    // Checked every 256 timestamps: at most one chunk beyond the budget.
    EXPECT_GT(early[i].snapshot.valid, 65'536);
    EXPECT_LE(early[i].snapshot.valid, 65'536 + 256);
    reported += early[i].snapshot.valid;
  }
  WindowReport last;
  w.CloseWindow(800, &last);
  EXPECT_FALSE(last.snapshot.closed_full);
  EXPECT_EQ(last.snapshot.full_closes, 2);
  EXPECT_EQ(reported + last.snapshot.valid, 150'000);  // nothing skipped
  WindowReport total;
  w.CloseTotal(801, &total);
  SortedVectorOracle oracle(config.min_latency, config.max_latency);
  oracle.Add(obs);
  LatencySnapshot want = oracle.Expect(w.percentiles());
  want.end_time = 801;
  EXPECT_EQ(total.snapshot, want);  // the total is exact across the early closes
}

TEST(PeriodicAndTotalWindowsTest, FullTotalIsReportedAndReset) {
  LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  config.total_max_hash_map_size_mb = 1;
  auto made = PeriodicAndTotalWindows::Create(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  std::vector<Observation> a;
  for (int64_t v = 0; v < 40'000; ++v) {
    a.push_back({v, 1, 0});
  }
  std::vector<Observation> b;
  for (int64_t v = 40'000; v < 80'000; ++v) {
    b.push_back({v, 1, 0});
  }
  Record(w, a, 1);
  WindowReport s;
  w.CloseWindow(10, &s);
  EXPECT_FALSE(w.HasPendingReports());
  Record(w, b, 11);
  w.CloseWindow(20, &s);
  EXPECT_EQ(s.snapshot.valid, 40'000);
  std::vector<WindowReport> pending = w.TakePendingReports();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].scope, WindowReport::Scope::kTotalSegment);
  EXPECT_TRUE(pending[0].snapshot.closed_full);
  EXPECT_EQ(pending[0].snapshot.valid, 80'000);
  EXPECT_EQ(pending[0].snapshot.start_time, 0);
  EXPECT_EQ(pending[0].snapshot.end_time, 20);
  EXPECT_EQ(w.total_full_closes(), 1);
  EXPECT_EQ(w.total().counters().valid, 0);
  EXPECT_EQ(w.total().window().start_time(), 20);

  // The run total counts every record across the segments. The carried
  // distribution (80,001 buckets, 1.28 MB) exceeds the 1 MiB budget, so it
  // is dropped and no percentile is given (issue 27: before, p50 = p99 = 5,
  // from the one record of the last segment); the counters stay exact.
  std::vector<Observation> c = {{5, 2, 0}, {-1, 1, 0}};
  Record(w, c, 21);
  WindowReport total;
  w.CloseTotal(30, &total);
  EXPECT_EQ(total.scope, WindowReport::Scope::kTotal);
  EXPECT_EQ(total.segments, 2);
  EXPECT_EQ(total.snapshot.records, 80'003);
  EXPECT_EQ(total.snapshot.valid, 80'002);
  EXPECT_EQ(total.snapshot.invalid, 1);
  EXPECT_EQ(total.snapshot.start_time, 0);
  EXPECT_EQ(total.snapshot.end_time, 30);
  EXPECT_EQ(total.snapshot.min_latency, 0);
  EXPECT_EQ(total.snapshot.max_latency, 79'999);
  EXPECT_FALSE(total.exact_total);
  EXPECT_TRUE(total.distribution.empty());
  EXPECT_FALSE(total.snapshot.percentiles_exact);
  EXPECT_TRUE(total.snapshot.values.empty());
  EXPECT_TRUE(total.snapshot.percents.empty());
  EXPECT_EQ(total.snapshot.median, 0);
  // ... but spilled: the last segment is reported too, and the merge of the
  // two segments' distributions is the exact total (issue 27).
  EXPECT_TRUE(total.spilled);
  std::vector<WindowReport> last = w.TakePendingReports();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].scope, WindowReport::Scope::kTotalSegment);
  EXPECT_FALSE(last[0].snapshot.closed_full);
  EXPECT_EQ(last[0].distribution, (std::vector<LatencyBucket>{{5, 2}}));
  SortedVectorOracle oracle(0, std::numeric_limits<int64_t>::max());
  oracle.Add(a);
  oracle.Add(b);
  oracle.Add(c);
  EXPECT_EQ(SpilledPercentiles({pending[0], last[0]}, total, w.percentiles()),
            oracle.Expect(w.percentiles()).values);
}

// Issue 27's reproduction: array periodic [0, 100000], primitive-map total
// of 1 MB (65,536 distinct values); 70,000 distinct latencies, a window
// close (the total closes early), then one record of 5 -- or none. Before:
// p50 = p99 = median = 5 (or 0), from the last segment alone. Now the total
// has no percentile of its own, is spilled, and its segments merge to the
// exact answer.
TEST(PeriodicAndTotalWindowsTest, SpilledTotalMergesToTheExactAnswer) {
  for (const bool record_after : {true, false}) {
    SCOPED_TRACE(record_after ? "one record after the early close" : "nothing after it");
    auto periodic = ArrayLatencyRecorder::Create(0, 100'000);
    auto total_recorder = HashMapLatencyRecorder::Create(0, 100'000, 1);
    ASSERT_TRUE(periodic.ok() && total_recorder.ok());
    auto made = PeriodicAndTotalWindows::Create(std::move(*periodic), std::move(*total_recorder),
                                                PercentileSet::Default(), 0);
    ASSERT_TRUE(made.ok());
    PeriodicAndTotalWindows& w = *made;
    SortedVectorOracle oracle(0, 100'000);
    std::vector<Observation> many;
    for (int64_t v = 0; v < 70'000; ++v) many.push_back({v * 13 % 70'000, 1, 0});
    Record(w, many, 1);
    oracle.Add(many);
    WindowReport window;
    w.CloseWindow(10, &window);
    std::vector<WindowReport> segments = w.TakePendingReports();
    ASSERT_EQ(segments.size(), 1u);
    if (record_after) {
      const std::vector<Observation> five = {{5, 1, 0}};
      Record(w, five, 11);
      oracle.Add(five);
      w.CloseWindow(20, &window);
    }
    WindowReport total;
    w.CloseTotal(30, &total);
    EXPECT_EQ(total.snapshot.valid, record_after ? 70'001 : 70'000);
    EXPECT_FALSE(total.exact_total);
    EXPECT_FALSE(total.snapshot.percentiles_exact);
    EXPECT_TRUE(total.snapshot.values.empty());  // never the last segment's p50 of 5
    ASSERT_TRUE(total.spilled);
    for (WindowReport& r : w.TakePendingReports()) segments.push_back(std::move(r));
    ASSERT_EQ(static_cast<int64_t>(segments.size()), total.segments);
    const LatencySnapshot want = oracle.Expect(w.percentiles());
    EXPECT_EQ(SpilledPercentiles(segments, total, w.percentiles()), want.values);
  }
}

// The oracle over many segments: random windows of random widths into
// total windows of random caps (1-2 MB: 65,536-131,072 distinct latencies),
// so runs close their total 0 to ~10 times; the final total -- in memory, or
// the merge of every segment reported -- equals the concatenated raw data's.
TEST(PeriodicAndTotalWindowsTest, TotalsOfManySegmentsEqualTheRawData) {
  std::mt19937_64 rng(2027);
  int spilled = 0;
  int64_t most_segments = 0;
  for (int trial = 0; trial < 6; ++trial) {
    SCOPED_TRACE(trial);
    LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
    config.total_max_hash_map_size_mb = 1 + static_cast<int64_t>(rng() % 2);
    auto made = PeriodicAndTotalWindows::Create(config, 0);
    ASSERT_TRUE(made.ok());
    PeriodicAndTotalWindows& w = *made;
    SortedVectorOracle oracle(config.min_latency, config.max_latency);
    std::vector<WindowReport> segments;
    const int windows = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < windows; ++i) {
      std::vector<Observation> obs(rng() % 60'000);
      const uint64_t spread = 1 + rng() % 2'000'000;
      for (Observation& o : obs) {
        o = {static_cast<int64_t>(rng() % spread), static_cast<int32_t>(1 + rng() % 3), 0};
      }
      Record(w, obs, i);
      oracle.Add(obs);
      WindowReport window;
      w.CloseWindow(i + 1, &window);
      for (WindowReport& r : w.TakePendingReports()) {
        if (r.scope == WindowReport::Scope::kTotalSegment) segments.push_back(std::move(r));
      }
    }
    WindowReport total;
    w.CloseTotal(100, &total);
    for (WindowReport& r : w.TakePendingReports()) segments.push_back(std::move(r));
    const LatencySnapshot want = oracle.Expect(w.percentiles());
    EXPECT_EQ(total.snapshot.valid, want.valid);
    EXPECT_EQ(total.snapshot.records, want.records);
    if (total.exact_total) {
      EXPECT_FALSE(total.spilled);
      EXPECT_EQ(total.snapshot.values, want.values);
      EXPECT_EQ(total.snapshot.median, want.median);
    } else {
      ASSERT_TRUE(total.spilled);
      ++spilled;
      most_segments = std::max(most_segments, total.segments);
      EXPECT_EQ(static_cast<int64_t>(segments.size()), total.segments);
      EXPECT_EQ(SpilledPercentiles(segments, total, w.percentiles()), want.values);
    }
  }
  EXPECT_GE(spilled, 2) << "the trials must exercise spilled totals";
  EXPECT_GE(most_segments, 4);
}

TEST(PeriodicAndTotalWindowsTest, ASeededTotalIsNotSpilled) {
  // A run resumed from a checkpoint: its seed is in no reported segment,
  // so a total that outgrows its budget stays without percentiles.
  LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  config.total_max_hash_map_size_mb = 1;
  auto made = PeriodicAndTotalWindows::Create(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  std::vector<LatencyBucket> seed;
  for (int64_t v = 0; v < 50'000; ++v) seed.push_back({2 * v, 1});
  LatencyCounters counters;
  counters.records = counters.valid = 50'000;
  counters.min_latency = 0;
  counters.max_latency = 99'998;
  for (const LatencyBucket& b : seed) counters.total_latency += b.latency;
  w.SeedTotal(counters, seed);
  std::vector<Observation> odd;
  for (int64_t v = 0; v < 50'000; ++v) odd.push_back({2 * v + 1, 1, 0});
  Record(w, odd, 1);
  WindowReport window;
  w.CloseWindow(10, &window);
  WindowReport total;
  w.CloseTotal(20, &total);
  EXPECT_EQ(total.snapshot.valid, 100'000);
  EXPECT_FALSE(total.exact_total);
  EXPECT_FALSE(total.spilled);
}

TEST(PeriodicAndTotalWindowsTest, RunTotalIsExactAcrossTotalSegments) {
  // SBK's counter range closes the total early (total latency > 2^62): the
  // run total still counts every record, with exact percentiles.
  LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  auto made = PeriodicAndTotalWindows::Create(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  constexpr int32_t kMany = 2'000'000'000;
  int64_t segments_seen = 0;
  for (int i = 0; i < 7; ++i) {
    std::vector<Observation> obs = {{1'000'000'000 + i, kMany, 1}, {7, 3, 1}};
    Record(w, obs, i);
    for (const WindowReport& r : w.TakePendingReports()) {
      if (r.scope == WindowReport::Scope::kTotalSegment) ++segments_seen;
    }
    WindowReport window;
    w.CloseWindow(i + 1, &window);
    for (const WindowReport& r : w.TakePendingReports()) {
      if (r.scope == WindowReport::Scope::kTotalSegment) ++segments_seen;
    }
  }
  ASSERT_GE(segments_seen, 2);
  WindowReport total;
  w.CloseTotal(100, &total);
  EXPECT_EQ(total.segments, segments_seen + 1);
  EXPECT_TRUE(total.exact_total);
  // The exact distribution: 21 records at 7 ns, kMany at each 1e9 + i.
  std::vector<LatencyBucket> want = {{7, 21}};
  for (int i = 0; i < 7; ++i) want.push_back({1'000'000'000 + i, kMany});
  EXPECT_EQ(total.distribution, want);
  const int64_t valid = 21 + 7 * int64_t{kMany};
  EXPECT_EQ(total.snapshot.records, valid);
  EXPECT_EQ(total.snapshot.valid, valid);
  // SBK's index rule, walked by hand: index = floor(valid * p / 100).
  const std::vector<double>& percents = w.percentiles().percents();
  ASSERT_EQ(total.snapshot.values.size(), percents.size());
  for (size_t k = 0; k < percents.size(); ++k) {
    const auto index = static_cast<int64_t>(static_cast<double>(valid) * (percents[k] / 100.0));
    int64_t cumulative = 0;
    for (const LatencyBucket& b : want) {
      if (index < cumulative + b.count) {
        EXPECT_EQ(total.snapshot.values[k], b.latency) << percents[k];
        EXPECT_EQ(total.snapshot.counts[k], b.count) << percents[k];
        break;
      }
      cumulative += b.count;
    }
  }
  EXPECT_TRUE(total.snapshot.overflow);  // beyond SBK's limits, still exact
}

TEST(PeriodicAndTotalWindowsTest, AggregatorMergesRemoteWindowsExactly) {
  LatencyConfig config = LatencyConfig::ForUnit(TimeUnit::kNs);
  auto made = PeriodicAndTotalWindows::CreateHybrid(config, 0);
  ASSERT_TRUE(made.ok());
  PeriodicAndTotalWindows& w = *made;
  SortedVectorOracle all(config.min_latency, config.max_latency);
  for (int client = 0; client < 8; ++client) {
    auto remote = LongHashMapLatencyRecorder::Create(config.min_latency, config.max_latency, 64);
    ASSERT_TRUE(remote.ok());
    (*remote)->Reset(0);
    const auto obs = testing::ClusteredLognormal(5000, 100'000, 4'194'304, 50 + client);
    all.Add(obs);
    const std::vector<TimeStamp> ts = testing::ToTimeStamps(obs);
    (*remote)->RecordBatch(ts.data(), ts.size());
    testing::CollectingSink sink;
    (*remote)->VisitBuckets(&sink);
    ASSERT_TRUE(w.MergeWindow((*remote)->counters(), sink.buckets(), 5).ok());
  }
  const std::vector<LatencyBucket> outside = {{-1, 1}};
  LatencyCounters c;
  c.records = 1;
  c.valid = 1;
  EXPECT_FALSE(w.MergeWindow(c, outside, 5).ok());
  WindowReport window;
  w.CloseWindow(6, &window);
  LatencySnapshot want = all.Expect(w.percentiles());
  want.end_time = 6;
  EXPECT_EQ(window.snapshot, want);
  WindowReport total;
  w.CloseTotal(7, &total);
  want.end_time = 7;
  EXPECT_EQ(total.snapshot, want);
}

TEST(PeriodicAndTotalWindowsTest, ExplicitRecordersNeedIdenticalBounds) {
  auto a = HashMapLatencyRecorder::Create(0, 10, 1);
  auto b = HashMapLatencyRecorder::Create(0, 11, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(
      PeriodicAndTotalWindows::Create(std::move(*a), std::move(*b), PercentileSet::Default(), 0)
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(PeriodicAndTotalWindows::Create(nullptr, nullptr, PercentileSet::Default(), 0).ok());
}

}  // namespace
}  // namespace perld
