// Cost of one timestamp reading: CLOCK_MONOTONIC (vDSO) versus the calibrated
// TSC clock that `perld bench --clock auto` uses when the TSC is invariant and
// the kernel lists it among its clocksources, and the bare RDTSC instruction
// (what the TSC costs on this machine even where the kernel does not trust it).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "daemon/core/clock.h"
#include "daemon/core/tsc_clock.h"

namespace perld {
namespace {

void BM_ClockMonotonic(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(MonotonicNanos());
}
BENCHMARK(BM_ClockMonotonic);

void BM_ClockTsc(benchmark::State& state) {
  static const absl::StatusOr<TscClock> tsc = TscClock::Create();
  if (!tsc.ok()) {
    state.SkipWithError(std::string(tsc.status().message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(tsc->NowNanos());
}
BENCHMARK(BM_ClockTsc);

void BM_RawRdtsc(benchmark::State& state) {
#if defined(__x86_64__)
  for (auto _ : state) benchmark::DoNotOptimize(__builtin_ia32_rdtsc());
#else
  state.SkipWithError("RDTSC needs x86-64");
#endif
}
BENCHMARK(BM_RawRdtsc);

}  // namespace
}  // namespace perld

BENCHMARK_MAIN();
