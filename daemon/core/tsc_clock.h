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
// /proc/cpuinfo) and only when the kernel trusts the TSC too: `tsc` must be
// listed in /sys/devices/system/clocksource/clocksource0/available_clocksource
// (the kernel drops it there when it finds the TSC unstable or unsynchronized
// across CPUs). Otherwise Create() fails naming the reason and callers use
// MonotonicNanos().
//
// Honest conversion: NowNanos() converts a *signed* tick offset from the
// calibration base (a read a few ticks behind the base gives a time a few ns
// earlier, not +279 years). A latency is measured as a tick difference and
// converted once (DeltaNanos(end_ticks - start_ticks)); converting and
// flooring each endpoint separately made a 10.02 ns step print as 10 or 11.
// Info() reports the effective resolution: the smallest non-zero difference
// of back-to-back reads, converted to ns (on some hosts the TSC advances in
// steps of ~10 ns, not one tick).
//
// Forced TSC (`clock: tsc`): guests often boot with tsc=unstable although
// the CPU advertises an invariant TSC, and CLOCK_MONOTONIC then costs 2-3x a
// bare RDTSC per reading. CreateForced() skips the kernel's verdict but
// still requires constant_tsc and nonstop_tsc, and checks the TSC itself:
// pinned on each CPU this thread may run on, right after the calibration
// and again a calibration window later, it reads the TSC between two
// CLOCK_MONOTONIC readings (the tightest of many tries), each CPU between
// two readings on the first CPU (so the calibration's rate error cancels),
// and refuses when two CPUs' offsets differ by more than the clock's
// resolution beyond what the readings can resolve (CheckCpuAgreement),
// naming the CPUs and the skew.
// Test hook: PERLD_TEST_TSC_SKEW_NS=N adds N ns to the last CPU's offset
// (how the refusal is tested end to end on hosts whose TSCs agree).
//
// Threads: immutable after Create(); NowNanos() is safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/clock.h"

namespace perld {

// One CPU's reading in the cross-CPU check: TSC time minus CLOCK_MONOTONIC,
// and how precisely that was measured (half the CLOCK_MONOTONIC interval the
// TSC read sat in).
struct CpuOffset {
  int cpu = 0;
  double offset_ns = 0;
  double uncertainty_ns = 0;
  double at_ns = 0;  // CLOCK_MONOTONIC when it was read
};

// OK when any two offsets differ by at most `tolerance_ns` beyond their
// uncertainties; else FailedPrecondition naming the two CPUs, the measured
// skew and the tolerance.
absl::Status CheckCpuAgreement(const std::vector<CpuOffset>& offsets, double tolerance_ns);

class TscClock {
 public:
  // Returns a calibrated clock or an error naming why the TSC is unusable.
  static absl::StatusOr<TscClock> Create(int64_t window_ns = 20'000'000);
  // `clock: tsc` (header comment): the TSC even when the kernel does not
  // list it; an error when the CPU lacks an invariant TSC or the CPUs
  // disagree. Info() then says it was forced and what the check measured.
  static absl::StatusOr<TscClock> CreateForced(int64_t window_ns = 20'000'000);
  // A clock with a given calibration: `base_tsc` ticks read at `base_ns`,
  // `ticks_per_ns` in (2^-8, 2^32). No hardware check: for the conversion
  // tests, which must run on hosts whose kernel does not trust the TSC.
  static TscClock FromCalibration(uint64_t base_tsc, int64_t base_ns, double ticks_per_ns) {
    return TscClock(base_tsc, base_ns, static_cast<uint64_t>(4294967296.0 / ticks_per_ns));
  }

  // Raw reading (ticks). Pair with ToNanos / DeltaNanos.
  static int64_t Ticks() {
#if defined(__x86_64__)
    return static_cast<int64_t>(__builtin_ia32_rdtsc());
#else
    return 0;
#endif
  }
  // Monotonic-clock nanoseconds of a raw reading (signed offset from the base).
  int64_t ToNanos(int64_t ticks) const {
    const int64_t offset = static_cast<int64_t>(static_cast<uint64_t>(ticks) - base_tsc_);
    return base_ns_ + static_cast<int64_t>((static_cast<__int128>(offset) * mult_) >> 32);
  }
  // Nanoseconds of a tick difference (converted once; negative stays negative).
  int64_t DeltaNanos(int64_t delta_ticks) const {
    if (delta_ticks >= 0 && delta_ticks < (int64_t{1} << 23))
        [[likely]] {  // mult < 2^40: fits 64 bits
      return static_cast<int64_t>((static_cast<uint64_t>(delta_ticks) * mult_) >> 32);
    }
    return static_cast<int64_t>((static_cast<__int128>(delta_ticks) * mult_) >> 32);
  }
  int64_t NowNanos() const { return ToNanos(Ticks()); }
  double ticks_per_ns() const { return 4294967296.0 / static_cast<double>(mult_); }
  // Made by CreateForced (`clock: tsc`).
  bool forced() const { return !forced_.empty(); }
  // Name "tsc", measured resolution, description with the calibration.
  ClockInfo Info() const;

 private:
  TscClock(uint64_t base_tsc, int64_t base_ns, uint64_t mult)
      : base_tsc_(base_tsc), base_ns_(base_ns), mult_(mult) {}
  static absl::StatusOr<TscClock> Calibrate(int64_t window_ns);
  uint64_t base_tsc_;
  int64_t base_ns_;
  uint64_t mult_;       // ns per tick, 32.32 fixed point
  std::string forced_;  // CreateForced: what the clock line adds; else empty
};

}  // namespace perld
