// The cost of a rate-controlled run's second distribution (issue 30), on the
// recorder thread's own path: RunRecorder::Accept of a closed-loop run (its
// windows only) against RunRecorder::AcceptPaced of a rate-controlled run
// (its windows, the response view's windows fed end - intended start, and
// the schedule counters), batches of 256 timestamps as the channels deliver
// them. items/s is the recorder's capacity for that kind of run; the ratio
// of the two is what the second distribution costs (tests/bench/README.md,
// "Response view").
//
// Latencies: a realistic spread (service: 1..2000 units; start lags: mostly
// 0..50, a tail of late ones), in ms (SBK's default: dense-array periodic
// window) and ns (hash-map periodic window). The windows never close (no
// Tick), as between two interval closes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "daemon/core/latency_config.h"
#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/runs/recorder_event.h"
#include "daemon/runs/run_recorder.h"

namespace perld::runs {
namespace {

constexpr size_t kBatch = 256;
constexpr size_t kBatches = 64;  // distinct batches, cycled

struct Input {
  std::vector<TimeStamp> ts;
  std::vector<int64_t> intended;
};

Input MakeInput(int64_t spread) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> service(1, spread);
  std::uniform_int_distribution<int> tail(0, 99);
  std::uniform_int_distribution<int64_t> lag(0, spread / 40 + 1);
  Input in;
  int64_t start = 1'000'000;
  for (size_t i = 0; i < kBatch * kBatches; ++i) {
    start += 3;
    const int64_t late = tail(rng) == 0 ? spread / 2 : lag(rng);
    in.ts.push_back(TimeStamp{start, start + service(rng), 1, 1024});
    in.intended.push_back(start - late);
  }
  return in;
}

PeriodicAndTotalWindows Windows(TimeUnit unit) {
  return *PeriodicAndTotalWindows::Create(LatencyConfig::ForUnit(unit), 0);
}

void BM_Recorder(benchmark::State& state, TimeUnit unit, bool paced) {
  RecorderOutbox outbox;
  std::optional<ResponseViewSetup> view;
  if (paced) {
    view.emplace(ResponseViewSetup{
        .id = 2, .windows = Windows(unit), .late_threshold_ns = 1, .skipped = nullptr});
  }
  RunRecorder recorder(1, Windows(unit), unit, int64_t{1} << 60, 0, 0, nullptr, &outbox, nullptr,
                       {}, 0, std::move(view));
  const Input in = MakeInput(unit == TimeUnit::kMs ? 2'000 : 200'000);
  size_t b = 0;
  for (auto _ : state) {
    const size_t at = b * kBatch;
    if (paced) {
      recorder.AcceptPaced(in.ts.data() + at, in.intended.data() + at, kBatch);
    } else {
      recorder.Accept(in.ts.data() + at, kBatch);
    }
    b = (b + 1) % kBatches;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

BENCHMARK_CAPTURE(BM_Recorder, ms_closed, TimeUnit::kMs, false);
BENCHMARK_CAPTURE(BM_Recorder, ms_paced, TimeUnit::kMs, true);
BENCHMARK_CAPTURE(BM_Recorder, ns_closed, TimeUnit::kNs, false);
BENCHMARK_CAPTURE(BM_Recorder, ns_paced, TimeUnit::kNs, true);

}  // namespace
}  // namespace perld::runs

BENCHMARK_MAIN();
