#include "daemon/http/run_metric_families.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <utility>

namespace perld::http {
namespace {

prometheus::MetricType ToPrometheus(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return prometheus::MetricType::Counter;
    case MetricType::kGauge:
      return prometheus::MetricType::Gauge;
    case MetricType::kSummary:
      return prometheus::MetricType::Summary;
  }
  return prometheus::MetricType::Untyped;
}

// One correctly rounded division: the double nearest the exact seconds.
double Seconds(int64_t units, TimeUnit unit) {
  return static_cast<double>(units) / static_cast<double>(1'000'000'000 / NanosPerUnit(unit));
}

// The quantile of a percent as the double nearest its exact text (99.9 ->
// 0.999, not 99.9 / 100 = 0.9990000000000001, which TextSerializer would
// print as a different label value), shared by every run a thread collects.
double Quantile(double percent) {
  thread_local std::map<double, double> cache;
  if (cache.size() > 4096) cache.clear();
  auto [it, added] = cache.try_emplace(percent, 0.0);
  if (added) {
    const std::string text = PercentToQuantileText(percent);
    std::from_chars(text.data(), text.data() + text.size(), it->second);
  }
  return it->second;
}

// Appends one run's samples to each family, as RenderPerldRun writes them.
class RunCollector {
 public:
  RunCollector(const RunMetrics& run, std::vector<prometheus::MetricFamily>& families)
      : run_(run), labels_(LabelPairs(run.identity)), families_(families) {}

  prometheus::ClientMetric& Metric(PerldFamily f) {
    prometheus::ClientMetric& m = families_[f].metric.emplace_back();
    m.label = labels_;
    return m;
  }
  void Value(PerldFamily f, double v) {
    prometheus::ClientMetric& m = Metric(f);
    (families_[f].type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value) = v;
  }
  void Int(PerldFamily f, int64_t v) { Value(f, static_cast<double>(v)); }
  void Summary(PerldFamily f, const LatencySnapshot* s) {
    prometheus::ClientMetric& m = Metric(f);
    if (s != nullptr) {
      const size_t n = std::min(s->percents.size(), s->values.size());
      m.summary.quantile.reserve(n);
      for (size_t k = 0; k < n; ++k) {
        m.summary.quantile.push_back({Quantile(s->percents[k]), Seconds(s->values[k], run_.unit)});
      }
    }
    const LatencySnapshot& total = run_.total.snapshot;
    m.summary.sample_sum = Seconds(total.total_latency, run_.unit);
    m.summary.sample_count =
        static_cast<uint64_t>(total.valid + total.lower_discard + total.higher_discard);
  }

 private:
  const RunMetrics& run_;
  const MetricLabels labels_;
  std::vector<prometheus::MetricFamily>& families_;
};

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

}  // namespace

MetricLabels LabelPairs(const Labels& labels) {
  MetricLabels out;
  const std::string& text = labels.text();
  for (size_t i = 0; i < text.size();) {
    const size_t eq = text.find("=\"", i);
    if (eq == std::string::npos) break;
    prometheus::ClientMetric::Label& label = out.emplace_back();
    label.name = text.substr(i, eq - i);
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        ++j;
        label.value += text[j] == 'n' ? '\n' : text[j];
      } else {
        label.value += text[j];
      }
    }
    i = j + 2;  // past the closing quote and the comma
  }
  return out;
}

std::vector<prometheus::MetricFamily> RunsCollectable::Collect() const {
  std::vector<prometheus::MetricFamily> families(kPerldFamilies);
  for (size_t f = 0; f < kPerldFamilies; ++f) {
    families[f].name = kPerldFamilyInfo[f].name;
    families[f].help = kPerldFamilyInfo[f].help;
    families[f].type = ToPrometheus(kPerldFamilyInfo[f].type);
    families[f].metric.reserve(runs_.size());
  }
  for (const RunMetrics& run : runs_) {
    RunCollector c(run, families);
    const LatencySnapshot& total = run.total.snapshot;
    prometheus::ClientMetric& info = c.Metric(kInfo);
    info.label.push_back({"state", run.state});
    info.label.push_back({"unit", TimeUnitName(run.unit)});
    info.label.push_back({"action", run.action});
    info.gauge.value = 1;
    c.Value(kStartTime, run.start_unix_seconds);
    c.Int(kRecords, total.records);
    c.Int(kBytes, total.bytes);
    c.Int(kInvalid, total.invalid);
    c.Int(kLowerDiscards, total.lower_discard);
    c.Int(kHigherDiscards, total.higher_discard);
    c.Int(kDropped, static_cast<int64_t>(run.dropped));
    c.Int(kBlocked, static_cast<int64_t>(run.blocked));
    c.Int(kTotalReleases, run.total_window_releases);
    c.Int(kFullCloses, run.latest ? run.latest->snapshot.full_closes : 0);
    c.Summary(kLatency, run.latest ? &run.latest->snapshot : nullptr);
    c.Summary(kTotalLatency, run.total_exact ? &total : nullptr);
    if (run.latest) {
      const LatencySnapshot& s = run.latest->snapshot;
      const double seconds = run.latest->seconds;
      const double rate_seconds = run.latest->RateSeconds();
      for (size_t k = 0; k < std::min(s.percents.size(), s.counts.size()); ++k) {
        prometheus::ClientMetric& m = c.Metric(kQuantileRecords);
        m.label.push_back({"percentile", FormatSampleValue(s.percents[k])});
        m.gauge.value = static_cast<double>(s.counts[k]);
      }
      c.Value(kWindowSeconds, seconds);
      c.Value(kRecordsPerSecond, Rate(static_cast<double>(s.records), rate_seconds));
      c.Value(kBytesPerSecond, Rate(static_cast<double>(s.bytes), rate_seconds));
      c.Value(kAverage, s.AvgLatency() * static_cast<double>(NanosPerUnit(run.unit)) / 1e9);
      c.Value(kMin, Seconds(s.min_latency, run.unit));
      c.Value(kMax, Seconds(s.max_latency, run.unit));
    }
    c.Int(kWriters, run.writers);
    c.Int(kReaders, run.readers);
    c.Int(kClients, run.connections);
    if (run.state == "running" && run.latest) c.Int(kRecorderMemory, run.recorder_bytes);
    c.Int(kCacheReleases, run.cache_releases);
    if (run.component == "sbm") {
      c.Int(kRemoteReports, run.remote_reports);
      c.Int(kLateReports, run.late_reports);
      if (run.latest) c.Int(kWindowClients, run.window_clients);
    }
  }
  std::erase_if(families, [](const prometheus::MetricFamily& f) { return f.metric.empty(); });
  return families;
}

}  // namespace perld::http
