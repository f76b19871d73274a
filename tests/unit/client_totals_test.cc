#include "daemon/ingest/client_totals.h"

#include <vector>

#include "daemon/core/run_total.h"
#include "gtest/gtest.h"

namespace perld::ingest {
namespace {

// A window of `n` distinct latencies from `first`, `step` apart, count 2.
struct Window {
  LatencyCounters counters;
  std::vector<LatencyBucket> buckets;
};
Window Make(int64_t first, int64_t step, int64_t n) {
  Window w;
  for (int64_t i = 0; i < n; ++i) {
    w.buckets.push_back({first + i * step, 2});
    w.counters.records += 2;
    w.counters.valid += 2;
    w.counters.total_latency += 2 * (first + i * step);
  }
  w.counters.min_latency = first;
  w.counters.max_latency = first + (n - 1) * step;
  return w;
}

// Windows this far apart are each merged when they come.
constexpr int64_t kApart = ClientTotals::kRefreshMs;

TEST(ClientTotalsTest, KeepsAnExactDistributionAcrossWindows) {
  auto budget = std::make_shared<BreakdownBudget>(1 << 20);
  ClientTotals t(budget);
  const Window a = Make(100, 2, 50);  // 100, 102, ...
  const Window b = Make(101, 2, 50);  // interleaved
  const Window c = Make(100, 2, 10);  // repeats
  t.AddWindow(a.counters, a.buckets, 1 * kApart);
  t.AddWindow(b.counters, b.buckets, 2 * kApart);
  t.AddWindow(c.counters, c.buckets, 3 * kApart);
  const ClientTotals::Snapshot s = t.Snap();
  ASSERT_NE(s.distribution, nullptr);  // exact
  EXPECT_FALSE(t.pending());
  EXPECT_EQ(s.reports, 3);
  EXPECT_EQ(s.counters.records, 220);
  EXPECT_EQ(s.last_report_unix_ms, 3 * kApart);
  const std::vector<LatencyBucket>& buckets = s.distribution->buckets();
  ASSERT_EQ(buckets.size(), 100u);
  int64_t sum = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    EXPECT_EQ(buckets[i].latency, 100 + static_cast<int64_t>(i));
    sum += buckets[i].count;
  }
  EXPECT_EQ(sum, 220);
  EXPECT_EQ(s.distribution->valid(), 220);
  EXPECT_GT(budget->used(), 0);

  // The client's percentiles: those of a walk over the same distribution.
  const PercentileSet set = PercentileSet::Create({0.1, 10, 50, 90, 99, 99.9, 100}).value();
  LatencySnapshot indexed;
  LatencySnapshot walked;
  s.distribution->Fill(set, &indexed);
  FillPercentiles(set, buckets, &walked);
  EXPECT_EQ(indexed.values, walked.values);
  EXPECT_EQ(indexed.counts, walked.counts);
  EXPECT_EQ(indexed.median, walked.median);
}

// One client's totals and two interleaved windows of 50 latencies each.
class ClientTotalsWindowsTest : public ::testing::Test {
 protected:
  std::shared_ptr<BreakdownBudget> budget_ = std::make_shared<BreakdownBudget>(1 << 20);
  ClientTotals t{budget_};
  const Window a = Make(100, 2, 50);
  const Window b = Make(101, 2, 50);
};

// A snapshot is a value: the windows merged after it was taken do not
// change it (a GetClients answer reads it with no lock held).
TEST_F(ClientTotalsWindowsTest, ASnapshotIsUnchangedByLaterWindows) {
  t.AddWindow(a.counters, a.buckets, 1 * kApart);
  const ClientTotals::Snapshot before = t.Snap();
  t.AddWindow(b.counters, b.buckets, 2 * kApart);
  ASSERT_NE(before.distribution, nullptr);
  EXPECT_EQ(before.distribution->buckets(), a.buckets);
  EXPECT_EQ(before.distribution->valid(), 100);
  EXPECT_EQ(before.counters.records, 100);
  EXPECT_EQ(before.reports, 1);
  EXPECT_EQ(t.Snap().distribution->valid(), 200);
  EXPECT_NE(t.Snap().distribution, before.distribution);
}

// The index a merge replaced is reused by the merge after next, once no
// reader holds it: the steady state allocates nothing.
TEST_F(ClientTotalsWindowsTest, AMergeReusesTheIndexNoReaderHolds) {
  t.AddWindow(a.counters, a.buckets, 1 * kApart);
  const PercentileIndex* first = t.Snap().distribution.get();  // let go at once
  t.AddWindow(b.counters, b.buckets, 2 * kApart);
  t.AddWindow(a.counters, a.buckets, 3 * kApart);
  ClientTotals::Snapshot third = t.Snap();
  EXPECT_EQ(third.distribution.get(), first);
  EXPECT_EQ(third.distribution->valid(), 300);
  // Held by a reader, an index is not reused (and not changed).
  t.AddWindow(b.counters, b.buckets, 4 * kApart);
  t.AddWindow(a.counters, a.buckets, 5 * kApart);
  EXPECT_NE(t.Snap().distribution.get(), third.distribution.get());
  EXPECT_EQ(third.distribution->valid(), 300);
  EXPECT_EQ(t.Snap().distribution->valid(), 500);
}

TEST(ClientTotalsTest, OverTheBudgetKeepsCountersDropsTheDistributionAndReleases) {
  // 64 KiB: 1,365 buckets (24 bytes each, charged twice: published and spare)
  auto budget = std::make_shared<BreakdownBudget>(64 << 10);
  {
    ClientTotals small(budget);
    ClientTotals big(budget);
    const Window w = Make(0, 1, 1000);
    small.AddWindow(w.counters, w.buckets, kApart);
    for (int k = 1; k <= 5; ++k) {
      const Window wide = Make(int64_t{k} * 1'000'000, 1, 1000);
      big.AddWindow(wide.counters, wide.buckets, k * kApart);
    }
    EXPECT_NE(small.Snap().distribution, nullptr);
    EXPECT_EQ(big.Snap().distribution, nullptr);     // dropped: not exact
    EXPECT_EQ(big.Snap().counters.records, 10'000);  // every record still counted
    EXPECT_EQ(budget->drops(), 1u);
    EXPECT_LE(budget->used(), budget->limit());
  }
  EXPECT_EQ(budget->used(), 0);  // every charge released with its client
}

// A busy client's windows (less than kRefreshMs after the last merge)
// wait beside the published row, which stays one consistent cut, and are
// merged all at once by the first window kRefreshMs after it: the same
// distribution as merging each, bucket for bucket.
TEST(ClientTotalsTest, WindowsWithinTheRefreshWaitAndAreMergedTogether) {
  auto budget = std::make_shared<BreakdownBudget>(1 << 20);
  ClientTotals t(budget);
  const Window a = Make(100, 2, 50);
  const Window b = Make(101, 2, 50);
  const Window c = Make(100, 3, 40);
  t.AddWindow(a.counters, a.buckets, 1000);  // the first is merged at once
  EXPECT_FALSE(t.pending());
  t.AddWindow(b.counters, b.buckets, 1001);
  t.AddWindow(c.counters, c.buckets, 1000 + kApart - 1);
  EXPECT_TRUE(t.pending());
  ClientTotals::Snapshot s = t.Snap();  // still the cut after `a`
  const uint64_t after_a = s.distribution_version;
  EXPECT_GT(after_a, 0u);
  EXPECT_EQ(s.reports, 1);
  EXPECT_EQ(s.counters.records, 100);
  EXPECT_EQ(s.distribution->valid(), 100);
  EXPECT_EQ(s.last_report_unix_ms, 1000);
  EXPECT_GT(budget->used(), 0);

  EXPECT_EQ(t.Snap().distribution_version, after_a);  // waiting windows: the same distribution
  t.AddWindow(a.counters, a.buckets, 1000 + kApart);  // due: all four merged
  EXPECT_FALSE(t.pending());
  s = t.Snap();
  EXPECT_GT(s.distribution_version, after_a);  // a new distribution, a new name
  EXPECT_EQ(s.reports, 4);
  EXPECT_EQ(s.counters.records, 100 + 100 + 80 + 100);
  EXPECT_EQ(s.last_report_unix_ms, 1000 + kApart);
  std::vector<LatencyBucket> want;
  MergeAscending(a.buckets, &want);
  MergeAscending(b.buckets, &want);
  MergeAscending(c.buckets, &want);
  MergeAscending(a.buckets, &want);
  EXPECT_EQ(s.distribution->buckets(), want);
  EXPECT_EQ(s.distribution->valid(), 380);
}

// Flush (a close, an idle client's reader) merges what waits; a wall clock
// stepped back does not hold the row back.
TEST(ClientTotalsTest, FlushAndAClockSteppedBackMergeWhatWaits) {
  auto budget = std::make_shared<BreakdownBudget>(1 << 20);
  ClientTotals t(budget);
  const Window a = Make(10, 1, 30);
  t.AddWindow(a.counters, a.buckets, 5000);
  t.AddWindow(a.counters, a.buckets, 5001);
  ASSERT_TRUE(t.pending());
  t.Flush(5002);
  EXPECT_FALSE(t.pending());
  EXPECT_EQ(t.Snap().reports, 2);
  EXPECT_EQ(t.Snap().distribution->valid(), 120);
  t.Flush(5003);  // nothing waits: a no-op
  EXPECT_EQ(t.Snap().reports, 2);

  t.AddWindow(a.counters, a.buckets, 5004);  // waits (2 ms after the flush)
  ASSERT_TRUE(t.pending());
  t.AddWindow(a.counters, a.buckets, 10);  // the clock stepped back: merged
  EXPECT_FALSE(t.pending());
  EXPECT_EQ(t.Snap().reports, 4);
  EXPECT_EQ(t.Snap().distribution->valid(), 240);
}

// The reaper's cue for a quiet client: when the newest waiting window came,
// and the refresh rule it is judged by (a clock stepped back counts).
TEST(ClientTotalsTest, TheNewestWaitingWindowsTimeAndTheRefreshRule) {
  auto budget = std::make_shared<BreakdownBudget>(1 << 20);
  ClientTotals t(budget);
  const Window a = Make(10, 1, 30);
  t.AddWindow(a.counters, a.buckets, 7000);  // merged at once
  t.AddWindow(a.counters, a.buckets, 7010);
  t.AddWindow(a.counters, a.buckets, 7020);
  ASSERT_TRUE(t.pending());
  EXPECT_EQ(t.pending_last_unix_ms(), 7020);
  EXPECT_FALSE(ClientTotals::RefreshPassed(7020, 7020 + kApart - 1));
  EXPECT_TRUE(ClientTotals::RefreshPassed(7020, 7020 + kApart));
  EXPECT_TRUE(ClientTotals::RefreshPassed(7020, 7019));
}

// The waiting windows are charged to the budget too: a client whose waiting
// map does not fit drops its distribution, keeps every counter, and
// releases everything it was charged.
TEST(ClientTotalsTest, WaitingWindowsAreChargedAndADropCountsThemAll) {
  auto budget = std::make_shared<BreakdownBudget>(64 << 10);
  {
    ClientTotals t(budget);
    t.AddWindow(Make(0, 1, 10).counters, Make(0, 1, 10).buckets, 100);
    for (int k = 1; k <= 4; ++k) {  // 4 x 1,000 new latencies, all waiting
      const Window w = Make(int64_t{k} * 1'000'000, 1, 1000);
      t.AddWindow(w.counters, w.buckets, 100 + k);
    }
    EXPECT_FALSE(t.pending());
    EXPECT_EQ(t.Snap().distribution, nullptr);  // dropped: not exact
    EXPECT_EQ(t.Snap().reports, 5);
    EXPECT_EQ(t.Snap().counters.records, 20 + 4 * 2000);
    EXPECT_EQ(budget->drops(), 1u);
    EXPECT_LE(budget->used(), budget->limit());
  }
  EXPECT_EQ(budget->used(), 0);
}

TEST(ClientTotalsTest, ARawClientCountsRecordsOnly) {
  auto budget = std::make_shared<BreakdownBudget>(1 << 20);
  ClientTotals t(budget);
  t.AddBatch(100, 250, 9);
  EXPECT_EQ(t.Snap().timestamps, 100);
  EXPECT_EQ(t.Snap().counters.records, 250);
  EXPECT_EQ(t.Snap().distribution, nullptr);
  EXPECT_EQ(budget->used(), 0);
}

}  // namespace
}  // namespace perld::ingest
