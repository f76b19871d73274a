// The server time of one /metrics scrape: N running runs in a real
// RunRegistry (each with a closed window of 1,000 distinct latencies and the
// default 28 percentiles), selected and rendered exactly as the daemon does
// (SelectRunMetrics, RenderPerldRun + WritePerldFamilies, WriteSbkRunFamilies),
// perld's names (0) and both (2). No HTTP, no
// recorder: the text generation and the snapshot reads a scrape pays.
// rerender:1 renders every run's lines (each published a window since the
// previous scrape); rerender:0 reuses them (none did), as DaemonMetrics does.
//
// BM_ScrapePrometheusCpp is the other arm of the A/B: the same runs as
// prometheus-cpp MetricFamily objects (http::RunsCollectable) written by its
// TextSerializer, every scrape (a MetricFamily cannot be cached as text);
// names:2 adds SBK's names with perld's writer, as the daemon built with
// -DPERLD_RUNS_VIA_PROMETHEUS_CPP=ON does. Before measuring, both arms' texts
// are checked to hold the same samples with the same values (as doubles).
//
//   build/release/tests/bench/metrics_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "daemon/http/metric_families.h"
#include "daemon/http/prometheus_text.h"
#include "daemon/http/run_metric_families.h"
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

// N running runs with two closed windows each, and the input that exports them all.
struct Fixture {
  explicit Fixture(int n, config::MetricNames names) : registry(config::RetentionConfig{}) {
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
    input.prometheus.names = names;
    input.prometheus.max_runs = n;
    input.now_unix_ms = 1'700'000'100'000;
  }
  runs::RunRegistry registry;
  http::RunsExpositionInput input;
};

// Sample line (name and labels) -> value, of an exposition text. A quantile
// label is compared as the double it parses to: TextSerializer writes the
// quantile 0.9975 as "0.9975000000000001" (16 digits of the nearest double).
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    std::string key = line.substr(0, space);
    if (const size_t q = key.find("quantile=\""); q != std::string::npos) {
      const size_t begin = q + 10;
      const size_t end = key.find('"', begin);
      key.replace(begin, end - begin, http::FormatSampleValue(std::strtod(&key[begin], nullptr)));
    }
    out[key] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

// The prometheus-cpp arm: perld's names through RunsCollectable and
// TextSerializer, SBK's names (names: both) through perld's writer.
void ScrapePrometheusCpp(const std::vector<http::RunMetrics>& runs, config::MetricNames names,
                         std::string* text) {
  text->clear();
  if (names != config::MetricNames::kSbk) {
    http::AppendFamiliesText(http::RunsCollectable(runs).Collect(), text);
  }
  if (names != config::MetricNames::kPerld) {
    http::PrometheusText sbk;
    http::WriteSbkRunFamilies(runs, sbk);
    text->append(sbk.text());
  }
}

void BM_Scrape(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto names = static_cast<config::MetricNames>(state.range(1));
  const bool rerender = state.range(2) != 0;
  Fixture fixture(n, names);
  const runs::RunRegistry& registry = fixture.registry;
  const http::RunsExpositionInput& input = fixture.input;
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

void BM_ScrapePrometheusCpp(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto names = static_cast<config::MetricNames>(state.range(1));
  Fixture fixture(n, names);
  {
    // Both arms must carry the same samples and values.
    int64_t omitted = 0;
    const std::vector<http::RunMetrics> runs =
        http::SelectRunMetrics(fixture.registry, fixture.input, &omitted);
    http::PrometheusText perld;
    http::WriteRunFamilies(runs, names, perld);
    std::string text;
    ScrapePrometheusCpp(runs, names, &text);
    const std::map<std::string, double> a = Samples(perld.text());
    const std::map<std::string, double> b = Samples(text);
    if (a != b) {
      for (const auto& [line, value] : a) {
        auto it = b.find(line);
        if (it == b.end() || it->second != value) {
          std::fprintf(stderr, "the two arms differ: %s %.17g (prometheus-cpp: %s)\n", line.c_str(),
                       value, it == b.end() ? "none" : std::to_string(it->second).c_str());
          break;
        }
      }
      std::fprintf(stderr, "%zu and %zu samples\n", a.size(), b.size());
      std::abort();
    }
  }
  size_t bytes = 0;
  std::string buffer;
  for (auto _ : state) {
    int64_t omitted = 0;
    std::vector<http::RunMetrics> runs =
        http::SelectRunMetrics(fixture.registry, fixture.input, &omitted);
    ScrapePrometheusCpp(runs, names, &buffer);
    bytes = buffer.size();
    benchmark::DoNotOptimize(buffer.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ScrapePrometheusCpp)
    ->ArgsProduct({{1, 10, 100},
                   {static_cast<int>(config::MetricNames::kPerld),
                    static_cast<int>(config::MetricNames::kBoth)}})
    ->ArgNames({"runs", "names"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace perld

BENCHMARK_MAIN();
