#include "daemon/core/latency_window.h"

#include <limits>

#include "gtest/gtest.h"

namespace perld {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(LatencyWindowTest, ClassifiesLikeSbk) {
  LatencyWindow w(10, 20);
  w.Reset(7);
  EXPECT_TRUE(w.Account(2, 100, 10));    // inclusive min
  EXPECT_TRUE(w.Account(1, 100, 20));    // inclusive max
  EXPECT_FALSE(w.Account(3, 100, 9));    // below min
  EXPECT_FALSE(w.Account(4, 100, 21));   // above max
  EXPECT_FALSE(w.Account(5, 100, -1));   // invalid
  EXPECT_FALSE(w.Account(0, 100, 15));   // rejected whole
  EXPECT_FALSE(w.Account(-2, 100, 15));  // rejected whole
  const LatencyCounters& c = w.counters();
  EXPECT_EQ(c.records, 15);
  EXPECT_EQ(c.bytes, 500);
  EXPECT_EQ(c.valid, 3);
  EXPECT_EQ(c.lower_discard, 3);
  EXPECT_EQ(c.higher_discard, 4);
  EXPECT_EQ(c.invalid, 5);
  EXPECT_EQ(c.rejected, 2);
  // Discards count toward min, max and total latency; invalid does not.
  EXPECT_EQ(c.min_latency, 9);
  EXPECT_EQ(c.max_latency, 21);
  EXPECT_EQ(c.total_latency, 2 * 10 + 20 + 3 * 9 + 4 * 21);
  EXPECT_TRUE(c.IsConsistent());
  EXPECT_EQ(w.start_time(), 7);
  EXPECT_EQ(w.end_time(), 7);
  w.set_end_time(9);
  EXPECT_EQ(w.end_time(), 9);
  w.Reset(11);
  EXPECT_EQ(w.counters(), LatencyCounters{});
  EXPECT_EQ(w.counters().min_latency, kNoMinLatency);
}

TEST(LatencyWindowTest, OverflowLimitsAreSbks) {
  LatencyWindow w(0, kMax);
  w.Reset(0);
  EXPECT_FALSE(w.IsOverflow());
  w.Account(1, 0, LatencyWindow::kTotalLatencyMax);
  EXPECT_FALSE(w.IsOverflow());  // strictly greater trips it
  w.Account(1, 0, 1);
  EXPECT_TRUE(w.IsOverflow());

  LatencyWindow b(0, 10);
  b.Reset(0);
  b.Account(1, LatencyWindow::kTotalBytesMax, 1);
  EXPECT_FALSE(b.IsOverflow());
  b.Account(1, 1, 1);
  EXPECT_TRUE(b.IsOverflow());
}

TEST(LatencyWindowTest, SumsSaturateInsteadOfWrapping) {
  LatencyWindow w(0, kMax);
  w.Reset(0);
  w.Account(std::numeric_limits<int32_t>::max(), kMax, kMax);
  w.Account(std::numeric_limits<int32_t>::max(), kMax, kMax);
  EXPECT_EQ(w.counters().total_latency, kMax);
  EXPECT_EQ(w.counters().bytes, kMax);
  EXPECT_TRUE(w.IsOverflow());
  LatencyWindow n(0, 10);
  n.Reset(0);
  n.Account(1, std::numeric_limits<int64_t>::min(), 1);
  n.Account(1, -1, 1);
  EXPECT_EQ(n.counters().bytes, std::numeric_limits<int64_t>::min());
}

TEST(LatencyWindowTest, LatencyOfWrapsDefinedForGarbage) {
  EXPECT_EQ(LatencyOf(TimeStamp{100, 150, 1, 0}), 50);
  EXPECT_EQ(LatencyOf(TimeStamp{150, 100, 1, 0}), -50);
  EXPECT_EQ(LatencyOf(TimeStamp{-1, kMax, 1, 0}), std::numeric_limits<int64_t>::min());
}

TEST(LatencyWindowTest, MergeCombinesCounters) {
  LatencyWindow a(0, 100);
  LatencyWindow b(0, 100);
  a.Reset(0);
  b.Reset(0);
  a.Account(1, 10, 50);
  a.Account(1, 10, 200);
  b.Account(2, 5, 3);
  b.Account(1, 5, -1);
  LatencyCounters m = a.counters();
  m.Merge(b.counters());
  EXPECT_EQ(m.records, 5);
  EXPECT_EQ(m.bytes, 30);
  EXPECT_EQ(m.valid, 3);
  EXPECT_EQ(m.higher_discard, 1);
  EXPECT_EQ(m.invalid, 1);
  EXPECT_EQ(m.min_latency, 3);
  EXPECT_EQ(m.max_latency, 200);
  EXPECT_EQ(m.total_latency, 50 + 200 + 6);
  LatencyCounters empty;
  empty.Merge(LatencyCounters{});
  EXPECT_EQ(empty.min_latency, kNoMinLatency);
}

TEST(LatencyWindowTest, ConsistencyCheck) {
  LatencyCounters c;
  EXPECT_TRUE(c.IsConsistent());
  c.valid = 1;
  EXPECT_FALSE(c.IsConsistent());  // more classified than records
  c.records = 1;
  EXPECT_TRUE(c.IsConsistent());
  c.invalid = -1;
  EXPECT_FALSE(c.IsConsistent());
}

}  // namespace
}  // namespace perld
