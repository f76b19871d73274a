// TscClock: a calibrated, invariant-TSC nanosecond clock for the timestamp hot
// path. One RDTSC costs about 7 ns on the reference machine against about 17 ns
// for clock_gettime(CLOCK_MONOTONIC) (tests/bench/README.md, "Clocks"); a
// PerlBench record reads the clock twice, so this is the largest single cost
// per record after the queue.
//
// Calibration: Calibrate() samples (TSC, CLOCK_MONOTONIC) pairs `window_ns`
// apart and derives a 32.32 fixed-point ns-per-tick multiplier; NowNanos()
// returns base_ns + ((tsc - base_tsc) * mult >> 32), i.e. monotonic time
// extrapolated through the TSC. Agreement with CLOCK_MONOTONIC is tested in
// tests/unit/tsc_clock_test.cc (drift over seconds far below 0.1%).
// Availability: only on x86-64 with constant_tsc and nonstop_tsc (checked in
// /proc/cpuinfo); otherwise Create() fails and callers use MonotonicNanos().
//
// Threads: immutable after Create(); NowNanos() is safe from any thread.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace perld {

class TscClock {
 public:
  // Returns a calibrated clock or an error naming why the TSC is unusable.
  static absl::StatusOr<TscClock> Create(int64_t window_ns = 20'000'000);

  int64_t NowNanos() const {
#if defined(__x86_64__)
    const uint64_t ticks = __builtin_ia32_rdtsc() - base_tsc_;
    return base_ns_ + static_cast<int64_t>((static_cast<unsigned __int128>(ticks) * mult_) >> 32);
#else
    return 0;
#endif
  }
  double ticks_per_ns() const { return 4294967296.0 / static_cast<double>(mult_); }

 private:
  TscClock(uint64_t base_tsc, int64_t base_ns, uint64_t mult)
      : base_tsc_(base_tsc), base_ns_(base_ns), mult_(mult) {}
  uint64_t base_tsc_;
  int64_t base_ns_;
  uint64_t mult_;  // ns per tick, 32.32 fixed point
};

}  // namespace perld
