// The server time of one /metrics scrape: N running runs in a real
// RunRegistry (each with a closed window of 1,000 distinct latencies and the
// default 28 percentiles), selected and rendered exactly as the daemon does
// (SelectRunMetrics, RenderPerldRun + WritePerldFamilies, WriteSbkRunFamilies),
// perld's names (0) and both (2). No HTTP, no
// recorder: the text generation and the snapshot reads a scrape pays.
// rerender:1 renders every run's lines (each published a window since the
// previous scrape); rerender:0 reuses them (none did), as DaemonMetrics does.
//
//   build/release/tests/bench/metrics_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "daemon/http/prometheus_text.h"
#include "daemon/http/run_metrics.h"
#include "daemon/http/runs_exposition.h"
#include "daemon/runs/run_registry.h"

namespace perld {
namespace {

const std::vector<double> kPercentiles = {5,    10, 15,    20,   25,    30,   35,    40,   45,   50,
                                          55,   60, 65,    70,   75,    80,   85,    90,   92.5, 95,
                                          97.5, 99, 99.25, 99.5, 99.75, 99.9, 99.95, 99.99};

runs::WindowRecord Window(runs::RunId id, int64_t seq) {
  runs::WindowRecord w;
  w.run_id = id;
  w.kind = runs::WindowRecord::Kind::kPeriodic;
  w.seq = seq;
  w.seconds = 1;
  LatencySnapshot& s = w.snapshot;
  for (int64_t latency = 100; latency < 1100; ++latency) {
    w.distribution.push_back({latency, 3});
    s.records += 3;
    s.total_latency += 3 * latency;
  }
  s.valid = s.records;
  s.bytes = s.records * 1024;
  s.min_latency = 100;
  s.max_latency = 1099;
  s.median = 600;
  for (double p : kPercentiles) {
    s.percents.push_back(p);
    s.fractions.push_back(p / 100);
    s.values.push_back(100 + static_cast<int64_t>(p * 10));
    s.counts.push_back(3);
  }
  return w;
}

void BM_Scrape(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto names = static_cast<config::MetricNames>(state.range(1));
  const bool rerender = state.range(2) != 0;
  runs::RunRegistry registry(config::RetentionConfig{});
  for (int i = 1; i <= n; ++i) {
    runs::RunInfo info;
    info.id = static_cast<runs::RunId>(i);
    info.spec.name = "paced-" + std::to_string(i);
    info.spec.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
    info.spec.latency.percentiles = kPercentiles;
    info.spec.writers = 1;
    info.start_unix_ms = 1'700'000'000'000;
    registry.AddRunning(info);
    registry.AddWindow(Window(info.id, 1));
    registry.AddWindow(Window(info.id, 2));
  }
  http::RunsExpositionInput input;
  input.prometheus.names = names;
  input.prometheus.max_runs = n;
  input.now_unix_ms = 1'700'000'100'000;
  size_t bytes = 0;
  std::string buffer;  // reused from scrape to scrape, as the daemon's HTTP threads do
  std::vector<http::RunFragments> fragments(static_cast<size_t>(n));  // the daemon's cache
  for (auto _ : state) {
    int64_t omitted = 0;
    std::vector<http::RunMetrics> runs = http::SelectRunMetrics(registry, input, &omitted);
    http::PrometheusText out(std::move(buffer));
    if (names != config::MetricNames::kSbk) {
      // rerender: every run published a window since the last scrape (the
      // worst case); cached: none did (DaemonMetrics keeps their lines).
      std::vector<const http::RunFragments*> views;
      for (size_t i = 0; i < runs.size(); ++i) {
        if (rerender || fragments[i].empty()) http::RenderPerldRun(runs[i], &fragments[i]);
        views.push_back(&fragments[i]);
      }
      http::WritePerldFamilies(views, out);
    }
    if (names != config::MetricNames::kPerld) http::WriteSbkRunFamilies(runs, out);
    buffer = out.Take();
    bytes = buffer.size();
    benchmark::DoNotOptimize(buffer.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Scrape)
    ->ArgsProduct({{1, 10, 100},
                   {static_cast<int>(config::MetricNames::kPerld),
                    static_cast<int>(config::MetricNames::kBoth)},
                   {1, 0}})
    ->ArgNames({"runs", "names", "rerender"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace perld

BENCHMARK_MAIN();
