// WindowRate: a window that merged remote clients' windows rates each
// client's records over that client's own span, so a short daemon window
// holding a client's long window is no spike and a long one holding two
// windows of a client no dip (window_rate.h states the rule).
#include "daemon/runs/window_rate.h"

#include <gtest/gtest.h>

namespace perld::runs {
namespace {

constexpr int64_t kT = 1'700'000'000'000;  // a wall-clock instant, ms

TEST(WindowRateTest, LocalWindowsRateOverTheirOwnSeconds) {
  WindowRate rate;
  EXPECT_EQ(rate.TakeRateSeconds(1000, 0.25), 0.25);
  EXPECT_EQ(rate.TakeRateSeconds(0, 1.0), 1.0);
}

TEST(WindowRateTest, AShortWindowHoldingClientsFullWindowsIsNoSpike) {
  WindowRate rate;
  // Three clients' 1 s windows of 1,000 records each, merged into the run's
  // last window of 0.05 s: 3,000 records/s, not 60,000.
  for (int32_t c = 0; c < 3; ++c) rate.Add(c, 1000, kT + c * 7, kT + 1000 + c * 7);
  const double seconds = rate.TakeRateSeconds(3000, 0.05);
  EXPECT_DOUBLE_EQ(3000 / seconds, 3000.0);
  // The next window starts afresh.
  EXPECT_EQ(rate.TakeRateSeconds(10, 0.5), 0.5);
}

TEST(WindowRateTest, TwoWindowsOfOneClientSpanBoth) {
  WindowRate rate;
  // Client 0's windows [0, 1 s) and [1 s, 2 s) in one daemon interval of
  // 1 s, client 1 on a clock 40 s ahead with one 0.5 s window.
  rate.Add(0, 1000, kT, kT + 1000);
  rate.Add(0, 1000, kT + 1000, kT + 2000);
  rate.Add(1, 500, kT + 40'000, kT + 40'500);
  const double seconds = rate.TakeRateSeconds(2500, 1.0);
  EXPECT_DOUBLE_EQ(2500 / seconds, 1000.0 + 1000.0);
}

TEST(WindowRateTest, RecordsWithoutASpanRateOverTheDaemonsSeconds) {
  WindowRate rate;
  rate.Add(0, 400, kT, kT + 2000);  // 200/s
  rate.Add(1, 100, 0, kT);          // no start (SBK clients send no times)
  rate.Add(2, 100, kT, kT);         // an empty span
  rate.Add(-1, 100, kT, kT + 10);   // no client
  // 300 records without a span over 0.5 s, plus client 0's 200/s.
  const double seconds = rate.TakeRateSeconds(700, 0.5);
  EXPECT_DOUBLE_EQ(700 / seconds, 600.0 + 200.0);
}

}  // namespace
}  // namespace perld::runs
