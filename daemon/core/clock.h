// MonotonicNanos(): CLOCK_MONOTONIC in nanoseconds, the time base of perld's
// recorder ticks and of `perld bench` timestamps. On Linux x86-64 this is a
// vDSO call (no system call) costing about 20 ns per reading; see
// tests/bench/README.md for the measured figure on this machine.
#pragma once

#include <cstdint>
#include <ctime>

namespace perld {
inline int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace perld
