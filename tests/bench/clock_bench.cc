// Cost of one timestamp reading: CLOCK_MONOTONIC (vDSO) versus the calibrated
// TSC clock that `perld bench --clock auto` uses when the TSC is invariant.
#include <benchmark/benchmark.h>

#include <cstdlib>

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
    state.SkipWithError("no invariant TSC");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(tsc->NowNanos());
}
BENCHMARK(BM_ClockTsc);

}  // namespace
}  // namespace perld

BENCHMARK_MAIN();
