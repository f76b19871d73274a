#include "daemon/core/tsc_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "daemon/core/clock.h"

namespace perld {
namespace {

TEST(TscClockTest, AgreesWithMonotonicClock) {
  absl::StatusOr<TscClock> tsc = TscClock::Create();
  if (!tsc.ok()) GTEST_SKIP() << "no invariant TSC: " << tsc.status();
  // Right after calibration both clocks read the same time (within 1 ms).
  EXPECT_LT(std::llabs(tsc->NowNanos() - MonotonicNanos()), 1'000'000);
  // Over a second, the TSC clock's elapsed time matches CLOCK_MONOTONIC's to
  // better than 0.1% (calibration error plus sampling jitter).
  const int64_t t0 = tsc->NowNanos(), m0 = MonotonicNanos();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t t1 = tsc->NowNanos(), m1 = MonotonicNanos();
  const double ratio = static_cast<double>(t1 - t0) / static_cast<double>(m1 - m0);
  EXPECT_NEAR(ratio, 1.0, 1e-3);
  EXPECT_LT(std::llabs((t1 - m1) - (t0 - m0)), 1'000'000) << "drift over 1 s";
}

TEST(TscClockTest, NeverGoesBackwardsOnOneThread) {
  absl::StatusOr<TscClock> tsc = TscClock::Create(2'000'000);
  if (!tsc.ok()) GTEST_SKIP() << "no invariant TSC: " << tsc.status();
  int64_t prev = tsc->NowNanos();
  for (int i = 0; i < 1'000'000; ++i) {
    const int64_t now = tsc->NowNanos();
    ASSERT_GE(now, prev);
    prev = now;
  }
}

}  // namespace
}  // namespace perld
