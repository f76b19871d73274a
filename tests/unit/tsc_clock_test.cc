#include "daemon/core/tsc_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "daemon/core/clock.h"

namespace perld {
namespace {

TEST(TscClockTest, AgreesWithMonotonicClock) {
  absl::StatusOr<TscClock> tsc = TscClock::Create();
  if (!tsc.ok()) GTEST_SKIP() << "TSC refused: " << tsc.status();
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
  if (!tsc.ok()) GTEST_SKIP() << "TSC refused: " << tsc.status();
  int64_t prev = tsc->NowNanos();
  for (int i = 0; i < 1'000'000; ++i) {
    const int64_t now = tsc->NowNanos();
    ASSERT_GE(now, prev);
    prev = now;
  }
}

// A read a few ticks behind the calibration base is a few ns earlier, not
// 2^64 ticks later (+279 years); a tick difference converts once, signed.
TEST(TscClockTest, ConversionIsSignedAndConvertsDifferencesOnce) {
  absl::StatusOr<TscClock> tsc = TscClock::Create();
  if (!tsc.ok()) GTEST_SKIP() << "TSC refused: " << tsc.status();
  const int64_t now = TscClock::Ticks();
  const int64_t behind = tsc->ToNanos(now - 1'000'000'000'000);  // far before the base
  EXPECT_LT(behind, tsc->ToNanos(now));
  EXPECT_GT(behind, tsc->ToNanos(now) - int64_t{10'000} * 1'000'000'000);  // < 10^4 s earlier
  const double per_tick = 1.0 / tsc->ticks_per_ns();
  for (const int64_t ticks : {int64_t{0}, int64_t{21}, int64_t{42}, int64_t{1} << 30}) {
    EXPECT_NEAR(static_cast<double>(tsc->DeltaNanos(ticks)), static_cast<double>(ticks) * per_tick,
                1.0)
        << ticks;
    EXPECT_NEAR(static_cast<double>(tsc->DeltaNanos(-ticks)),
                -static_cast<double>(tsc->DeltaNanos(ticks)), 1.0)
        << ticks;  // negative stays negative
  }
  const ClockInfo info = tsc->Info();
  EXPECT_EQ(info.name, "tsc");
  EXPECT_GT(info.resolution_ns, 0);
  EXPECT_NE(info.description.find("resolution"), std::string::npos);
}

// The same arithmetic on a fixed calibration (the AMD guest's 2.096 ticks/ns),
// so it runs where the kernel does not trust the TSC and Create() refuses it.
TEST(TscClockTest, FixedCalibrationConvertsSignedAndOnce) {
  constexpr uint64_t kBase = uint64_t{1} << 50;
  constexpr int64_t kBaseNs = 5'000'000'000;
  const TscClock tsc = TscClock::FromCalibration(kBase, kBaseNs, 2.096);
  EXPECT_NEAR(tsc.ticks_per_ns(), 2.096, 1e-6);
  EXPECT_EQ(tsc.ToNanos(static_cast<int64_t>(kBase)), kBaseNs);
  // 21 ticks behind the base: 10 ns earlier (floored), not +279 years.
  EXPECT_EQ(tsc.ToNanos(static_cast<int64_t>(kBase - 21)), kBaseNs - 11);
  // 32.32 fixed point: a second is right to within a nanosecond.
  EXPECT_NEAR(tsc.ToNanos(static_cast<int64_t>(kBase + 2'096'000'000)), kBaseNs + 1'000'000'000, 1);
  // One 10.02 ns step is 10 ns whatever the endpoints: the difference is
  // converted once, never two floored endpoints subtracted.
  for (const uint64_t start : {kBase + 1, kBase + 2, kBase + 13, kBase + 20}) {
    EXPECT_EQ(tsc.DeltaNanos(static_cast<int64_t>(start + 21) - static_cast<int64_t>(start)), 10)
        << start;
  }
  EXPECT_EQ(tsc.DeltaNanos(42), 20);
  EXPECT_EQ(tsc.DeltaNanos(-42), -21);  // negative stays negative
  // Beyond the 64-bit fast path (>= 2^23 ticks): ~18 minutes, to within 1 us.
  EXPECT_NEAR(tsc.DeltaNanos(int64_t{2'096} << 30), int64_t{1'000} << 30, 1'000);
}

// SmallestStep: the smallest non-zero difference of back-to-back reads.
TEST(CpuAgreementTest, OffsetsWithinTheirUncertaintyAgree) {
  // 30 ns apart, each known to +-20 ns: not a measured disagreement.
  EXPECT_TRUE(CheckCpuAgreement({{0, 100, 20}, {1, 130, 20}}, 1.0).ok());
  EXPECT_TRUE(CheckCpuAgreement({{0, 5, 0.5}}, 1.0).ok());
  EXPECT_TRUE(CheckCpuAgreement({}, 1.0).ok());
}

TEST(CpuAgreementTest, ASkewedCpuIsRefusedWithTheSkew) {
  // CPU 3 runs 850 ns ahead; each reading known to +-15 ns.
  const absl::Status s =
      CheckCpuAgreement({{0, 10, 15}, {1, 12, 15}, {3, 860, 15}}, /*tolerance_ns=*/0.39);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("CPU 0 and CPU 3 disagree by 850.0 ns"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("(0.39 ns)"), std::string::npos) << s.message();
}

TEST(TscClockTest, ForcedTscSaysSoOrNamesWhyNot) {
  absl::StatusOr<TscClock> tsc = TscClock::CreateForced();
  if (!tsc.ok()) {
    // Refused: the CPU lacks an invariant TSC, or its CPUs disagree.
    const std::string why(tsc.status().message());
    EXPECT_TRUE(why.find("constant_tsc") != std::string::npos ||
                why.find("refused: the TSC of CPU") != std::string::npos)
        << why;
    return;
  }
  const ClockInfo info = tsc->Info();
  EXPECT_EQ(info.name, "tsc");
  EXPECT_NE(info.description.find("FORCED by clock: tsc"), std::string::npos) << info.description;
  EXPECT_NE(info.description.find("CPUs agree with CLOCK_MONOTONIC: offsets"), std::string::npos);
  const int64_t a = MonotonicNanos();
  const int64_t t = tsc->NowNanos();
  const int64_t b = MonotonicNanos();
  EXPECT_GE(t, a - 1'000'000);  // within 1 ms of CLOCK_MONOTONIC
  EXPECT_LE(t, b + 1'000'000);
}

TEST(ClockInfoTest, SmallestStepOfAStepClock) {
  int64_t t = 0;
  int calls = 0;
  // Advances by 21 or 42 on alternate reads, as an AMD TSC in 10 ns steps.
  auto read = [&] { return t += (++calls % 2 == 0) ? 21 : 42; };
  EXPECT_EQ(SmallestStep(read, 100), 21);
  auto frozen = [] { return int64_t{7}; };
  EXPECT_EQ(SmallestStep(frozen, 100), 0);
  const ClockInfo mono = MonotonicClockInfo("tsc not in the kernel's available clocksources");
  EXPECT_EQ(mono.name, "monotonic");
  EXPECT_NE(mono.description.find("available clocksources"), std::string::npos);
}

}  // namespace
}  // namespace perld
