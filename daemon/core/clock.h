// MonotonicNanos(): CLOCK_MONOTONIC in nanoseconds, the time base of perld's
// recorder ticks and of `perld bench` timestamps. On Linux x86-64 this is a
// vDSO call (no system call) costing about 20 ns per reading; see
// tests/bench/README.md for the measured figure on this machine.
//
// ClockInfo: what a run says about its timestamp clock -- a short name, the
// effective resolution measured at start (the smallest non-zero difference
// of back-to-back reads, in ns) and a one-line description that includes why
// a fallback was taken. MeasureResolutionNs() does the measurement for any
// reader.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

namespace perld {
inline int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Which clock a run times with (config `clock`, `--clock`): auto = the
// calibrated TSC when the CPU has an invariant one and the kernel trusts it,
// else CLOCK_MONOTONIC; tsc = the TSC even when the kernel does not trust it
// (TscClock::CreateForced: refused when the CPU lacks an invariant TSC or
// its CPUs disagree); monotonic = CLOCK_MONOTONIC.
enum class ClockSource { kAuto, kTsc, kMonotonic };

// "auto", "tsc", "monotonic".
const char* ClockSourceName(ClockSource source);

struct ClockInfo {
  std::string name;          // "tsc" or "monotonic"
  double resolution_ns = 0;  // smallest non-zero step of back-to-back reads; 0: unknown
  std::string description;   // e.g. "calibrated TSC (2.0960 ticks/ns), resolution 10.02 ns"
};

// Smallest non-zero difference of `samples` pairs of back-to-back `read()`s,
// in the reader's units (0 when every pair was equal).
template <class Read>
int64_t SmallestStep(Read&& read, int samples = 20'000) {
  int64_t best = 0;
  for (int i = 0; i < samples; ++i) {
    const int64_t a = read();
    const int64_t b = read();
    const int64_t d = b - a;
    if (d > 0 && (best == 0 || d < best)) best = d;
  }
  return best;
}

// CLOCK_MONOTONIC's ClockInfo; `why` (may be empty) says why it was chosen.
ClockInfo MonotonicClockInfo(const std::string& why);
}  // namespace perld
