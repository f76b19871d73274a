#include "daemon/http/run_metrics.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"

namespace perld::http {
namespace {

constexpr double kBytesPerMebibyte = 1024.0 * 1024.0;
constexpr double kNanosPerSecond = 1e9;

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

// Records whose latency is non-negative: the ones a summary observed.
int64_t Observed(const LatencySnapshot& s) { return s.valid + s.lower_discard + s.higher_discard; }

std::string Int(int64_t v) { return absl::StrCat(v); }

// A run's latency in its unit as ns (SBK's metrics are always in ns).
int64_t ToNanos(int64_t value, TimeUnit unit) { return value * NanosPerUnit(unit); }

double AverageSeconds(const LatencySnapshot& s, TimeUnit unit) {
  return s.AvgLatency() * static_cast<double>(NanosPerUnit(unit)) / kNanosPerSecond;
}

// Writes one family with a sample per run that has a value (`value` returns
// nullopt to skip a run); the family is left out when no run has one.
using RunValue = std::function<std::optional<std::string>(const RunMetrics&)>;
void Family(std::span<const RunMetrics> runs, PrometheusText& out, std::string_view name,
            MetricType type, std::string_view help, const RunValue& value,
            const std::function<Labels(const RunMetrics&)>& labels) {
  bool started = false;
  for (const RunMetrics& run : runs) {
    std::optional<std::string> v = value(run);
    if (!v) continue;
    if (!started) out.Family(name, type, help);
    started = true;
    out.Sample(labels(run), *v);
  }
}

Labels Identity(const RunMetrics& run) { return Labels().AddText(run.identity.text()); }

// A family of figures of the latest closed window (runs without one are left out).
void LatestFamily(std::span<const RunMetrics> runs, PrometheusText& out, std::string_view name,
                  std::string_view help,
                  const std::function<std::string(const ExpositionWindow&, TimeUnit)>& figure) {
  Family(
      runs, out, name, MetricType::kGauge, help,
      [&](const RunMetrics& r) -> std::optional<std::string> {
        if (!r.latest) return std::nullopt;
        return figure(*r.latest, r.unit);
      },
      Identity);
}

void Counter(std::span<const RunMetrics> runs, PrometheusText& out, std::string_view name,
             std::string_view help, const std::function<int64_t(const RunMetrics&)>& value) {
  Family(
      runs, out, name, MetricType::kCounter, help,
      [&](const RunMetrics& r) -> std::optional<std::string> { return Int(value(r)); }, Identity);
}

// A summary: quantiles of `window(run)` (none when it has none), _sum and
// _count from the run's total.
void Summary(std::span<const RunMetrics> runs, PrometheusText& out, std::string_view name,
             std::string_view help,
             const std::function<const LatencySnapshot*(const RunMetrics&)>& window) {
  out.Family(name, MetricType::kSummary, help);
  for (const RunMetrics& run : runs) {
    if (const LatencySnapshot* s = window(run)) {
      const size_t n = std::min(s->percents.size(), s->values.size());
      for (size_t i = 0; i < n; ++i) {
        out.Sample(Identity(run).Add("quantile", PercentToQuantileText(s->percents[i])),
                   UnitsToSecondsText(s->values[i], run.unit));
      }
    }
    const LatencySnapshot& total = run.total.snapshot;
    out.Sample("_sum", Identity(run), UnitsToSecondsText(total.total_latency, run.unit));
    out.Sample("_count", Identity(run), Int(Observed(total)));
  }
}

}  // namespace

const char* SbkAction(int writers, int readers) {
  if (writers > 0 && readers > 0) return "Write_Reading";
  return readers > 0 ? "Reading" : "Writing";
}

std::string SbkPercentileName(double percent) {
  char buf[64];
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), percent, std::chars_format::fixed, 2);
  std::string text(buf, r.ptr);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  std::replace(text.begin(), text.end(), '.', '_');
  return text;
}

std::pair<int64_t, int64_t> SlidingLatencyCoverage(const LatencySnapshot& s) {
  // SBK's LatencyWindow.getSLC, over the requested percentiles' latencies.
  const std::vector<int64_t>& v = s.values;
  if (v.size() < 2 || v.back() <= 0) return {0, 0};
  const double min_val = static_cast<double>(v[0]);
  const double mid_val = static_cast<double>(s.median);
  int64_t cnt1 = 0;
  int64_t cnt2 = 0;
  double factor1 = 0;
  double factor2 = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    const double x = static_cast<double>(v[i]);
    if (x <= mid_val && min_val > 0) {
      factor1 += (x - min_val) / min_val;
      ++cnt1;
    } else if (mid_val > 0) {
      factor2 += (x - mid_val) / mid_val;
      ++cnt2;
    }
  }
  const int64_t slc1 =
      cnt1 > 0 ? static_cast<int64_t>((factor1 + static_cast<double>(cnt1) - 1) / cnt1) : 0;
  const int64_t slc2 =
      cnt2 > 0 ? static_cast<int64_t>((factor2 + static_cast<double>(cnt2) - 1) / cnt2) : 0;
  return {slc1, slc2};
}

void WritePerldRunFamilies(std::span<const RunMetrics> runs, PrometheusText& out) {
  if (runs.empty()) return;
  Family(
      runs, out, "perld_run_info", MetricType::kGauge,
      "A run perld exports: its state, latency unit and SBK action as labels.",
      [](const RunMetrics&) -> std::optional<std::string> { return "1"; },
      [](const RunMetrics& r) {
        return Identity(r)
            .Add("state", r.state)
            .Add("unit", TimeUnitName(r.unit))
            .Add("action", r.action);
      });
  Family(
      runs, out, "perld_run_start_time_seconds", MetricType::kGauge,
      "Start of the run, Unix time in seconds.",
      [](const RunMetrics& r) -> std::optional<std::string> {
        return FormatSampleValue(r.start_unix_seconds);
      },
      Identity);
  Counter(runs, out, "perld_run_records_total",
          "Records of the run so far (valid, discarded and invalid).",
          [](const RunMetrics& r) { return r.total.snapshot.records; });
  Counter(runs, out, "perld_run_bytes_total", "Bytes of the run's records so far.",
          [](const RunMetrics& r) { return r.total.snapshot.bytes; });
  Counter(runs, out, "perld_run_invalid_latencies_total", "Records with a negative latency.",
          [](const RunMetrics& r) { return r.total.snapshot.invalid; });
  Counter(runs, out, "perld_run_lower_discards_total",
          "Records with a latency below the run's minimum latency.",
          [](const RunMetrics& r) { return r.total.snapshot.lower_discard; });
  Counter(runs, out, "perld_run_higher_discards_total",
          "Records with a latency above the run's maximum latency.",
          [](const RunMetrics& r) { return r.total.snapshot.higher_discard; });
  Counter(runs, out, "perld_run_dropped_timestamps_total",
          "Timestamps dropped at the pending bound (overflow: drop).",
          [](const RunMetrics& r) { return static_cast<int64_t>(r.dropped); });
  Counter(runs, out, "perld_run_blocked_timestamps_total",
          "Sends that waited at the pending bound (overflow: block).",
          [](const RunMetrics& r) { return static_cast<int64_t>(r.blocked); });
  Counter(runs, out, "perld_run_total_window_releases_total",
          "Total-window segments reported and released on their own memory or counter limit.",
          [](const RunMetrics& r) { return r.total_window_releases; });
  Counter(
      runs, out, "perld_run_full_window_closes_total",
      "Periodic windows closed before their interval by the memory policy (IsFull).",
      [](const RunMetrics& r) { return r.latest ? r.latest->snapshot.full_closes : int64_t{0}; });
  Summary(runs, out, "perld_run_latency_seconds",
          "Exact latency percentiles of the latest closed window (quantiles); _sum and _count "
          "cover every non-negative latency of the run.",
          [](const RunMetrics& r) { return r.latest ? &r.latest->snapshot : nullptr; });
  Summary(runs, out, "perld_run_total_latency_seconds",
          "Exact latency percentiles of the run's whole total so far; _sum and _count cover "
          "every non-negative latency of the run.",
          [](const RunMetrics& r) { return r.total_exact ? &r.total.snapshot : nullptr; });
  {
    bool started = false;
    for (const RunMetrics& run : runs) {
      if (!run.latest) continue;
      const LatencySnapshot& s = run.latest->snapshot;
      const size_t n = std::min(s.percents.size(), s.counts.size());
      for (size_t i = 0; i < n; ++i) {
        if (!started) {
          out.Family("perld_run_latency_quantile_records", MetricType::kGauge,
                     "Records of the latest closed window whose latency equals the latency at "
                     "the percentile (label: the percent, 99.9 for quantile 0.999).");
        }
        started = true;
        out.Sample(Identity(run).Add("percentile", FormatSampleValue(s.percents[i])),
                   Int(s.counts[i]));
      }
    }
  }
  LatestFamily(runs, out, "perld_run_window_seconds", "Length of the latest closed window.",
               [](const ExpositionWindow& w, TimeUnit) { return FormatSampleValue(w.seconds); });
  LatestFamily(runs, out, "perld_run_records_per_second",
               "Records per second over the latest closed window.",
               [](const ExpositionWindow& w, TimeUnit) {
                 return FormatSampleValue(Rate(static_cast<double>(w.snapshot.records), w.seconds));
               });
  LatestFamily(runs, out, "perld_run_bytes_per_second",
               "Bytes per second over the latest closed window.",
               [](const ExpositionWindow& w, TimeUnit) {
                 return FormatSampleValue(Rate(static_cast<double>(w.snapshot.bytes), w.seconds));
               });
  LatestFamily(runs, out, "perld_run_latency_average_seconds",
               "SBK's average latency of the latest closed window.",
               [](const ExpositionWindow& w, TimeUnit unit) {
                 return FormatSampleValue(AverageSeconds(w.snapshot, unit));
               });
  LatestFamily(runs, out, "perld_run_latency_min_seconds",
               "Smallest non-negative latency of the latest closed window, 0 if none.",
               [](const ExpositionWindow& w, TimeUnit unit) {
                 return UnitsToSecondsText(w.snapshot.min_latency, unit);
               });
  LatestFamily(runs, out, "perld_run_latency_max_seconds",
               "Largest non-negative latency of the latest closed window, 0 if none.",
               [](const ExpositionWindow& w, TimeUnit unit) {
                 return UnitsToSecondsText(w.snapshot.max_latency, unit);
               });
  const std::pair<const char*, int RunMetrics::*> workers[] = {
      {"perld_run_writers", &RunMetrics::writers},
      {"perld_run_readers", &RunMetrics::readers},
      {"perld_run_clients", &RunMetrics::connections}};
  const char* worker_help[] = {"Writers of the run.", "Readers of the run.",
                               "Remote clients connected to the run now."};
  for (size_t i = 0; i < std::size(workers); ++i) {
    const int RunMetrics::*field = workers[i].second;
    Family(
        runs, out, workers[i].first, MetricType::kGauge, worker_help[i],
        [field](const RunMetrics& r) -> std::optional<std::string> { return Int(r.*field); },
        Identity);
  }
}

namespace {

// SBK's labels: the run identity plus component, class and action.
Labels SbkLabels(const RunMetrics& r) {
  return Identity(r)
      .Add("component", r.component)
      .Add("class", r.sbk_class)
      .Add("action", r.action);
}

// The SBK action order of SBK's EnumAction; other actions after them.
int ActionRank(const std::string& action) {
  static const char* const kOrder[] = {"Writing",           "Reading",      "Write_Reading",
                                       "Write_OnlyReading", "Read_Writing", "Read_OnlyWriting"};
  for (size_t i = 0; i < std::size(kOrder); ++i) {
    if (action == kOrder[i]) return static_cast<int>(i);
  }
  return static_cast<int>(std::size(kOrder));
}

void SbkFamily(std::span<const RunMetrics> runs, PrometheusText& out, const std::string& name,
               MetricType type, std::string_view help, const RunValue& value) {
  Family(runs, out, name, type, help, value, SbkLabels);
}

// The families of one action's runs (prefix SBK_<action>).
void SbkActionFamilies(std::span<const RunMetrics> runs, const std::string& prefix,
                       PrometheusText& out) {
  auto total = [&](const char* suffix, const char* help, int64_t LatencySnapshot::*field) {
    SbkFamily(runs, out, absl::StrCat(prefix, suffix), MetricType::kCounter, help,
              [field](const RunMetrics& r) -> std::optional<std::string> {
                return Int(r.total.snapshot.*field);
              });
  };
  total("_Records_total", "Records of the run so far.", &LatencySnapshot::records);
  total("_Bytes_total", "Bytes of the run so far.", &LatencySnapshot::bytes);
  total("_InvalidLatencyRecords_total", "Records with a negative latency.",
        &LatencySnapshot::invalid);
  total("_LowerDiscardedLatencyRecords_total", "Records below the minimum latency.",
        &LatencySnapshot::lower_discard);
  total("_HigherDiscardLatencyRecords_total", "Records above the maximum latency.",
        &LatencySnapshot::higher_discard);
  using Figure = std::function<std::string(const RunMetrics&, const ExpositionWindow&)>;
  auto latest = [&](const std::string& suffix, const char* help, const Figure& figure) {
    SbkFamily(runs, out, absl::StrCat(prefix, suffix), MetricType::kGauge, help,
              [&figure](const RunMetrics& r) -> std::optional<std::string> {
                if (!r.latest) return std::nullopt;
                return figure(r, *r.latest);
              });
  };
  latest("_MBPerSec", "MB (2^20 bytes) per second of the latest window.",
         [](const RunMetrics&, const ExpositionWindow& w) {
           return FormatSampleValue(
               Rate(static_cast<double>(w.snapshot.bytes) / kBytesPerMebibyte, w.seconds));
         });
  latest("_RecordsPerSec", "Records per second of the latest window.",
         [](const RunMetrics&, const ExpositionWindow& w) {
           return FormatSampleValue(Rate(static_cast<double>(w.snapshot.records), w.seconds));
         });
  latest("_ns_AvgLatency", "Average latency of the latest window, ns.",
         [](const RunMetrics& r, const ExpositionWindow& w) {
           return FormatSampleValue(w.snapshot.AvgLatency() *
                                    static_cast<double>(NanosPerUnit(r.unit)));
         });
  latest("_ns_MinLatency", "Minimum latency of the latest window, ns.",
         [](const RunMetrics& r, const ExpositionWindow& w) {
           return Int(ToNanos(w.snapshot.min_latency, r.unit));
         });
  latest("_ns_MaxLatency", "Maximum latency of the latest window, ns.",
         [](const RunMetrics& r, const ExpositionWindow& w) {
           return Int(ToNanos(w.snapshot.max_latency, r.unit));
         });
  latest("_SLC_1", "Sliding latency coverage 1 of the latest window (SBK).",
         [](const RunMetrics&, const ExpositionWindow& w) {
           return Int(SlidingLatencyCoverage(w.snapshot).first);
         });
  latest("_SLC_2", "Sliding latency coverage 2 of the latest window (SBK).",
         [](const RunMetrics&, const ExpositionWindow& w) {
           return Int(SlidingLatencyCoverage(w.snapshot).second);
         });
  // Percentiles: the union of the runs' percents, ascending; a run without a
  // percent has no sample in its family.
  std::map<double, std::string> percents;
  for (const RunMetrics& r : runs) {
    if (!r.latest) continue;
    for (double p : r.latest->snapshot.percents) percents.emplace(p, SbkPercentileName(p));
  }
  for (const bool counts : {false, true}) {
    for (const auto& [percent, name] : percents) {
      const double p = percent;
      SbkFamily(runs, out, absl::StrCat(prefix, counts ? "_Count_" : "_ns_", name),
                MetricType::kGauge,
                counts ? "Records at exactly the latency of the percentile, latest window."
                       : "Exact latency at the percentile of the latest window, ns.",
                [p, counts](const RunMetrics& r) -> std::optional<std::string> {
                  if (!r.latest) return std::nullopt;
                  const LatencySnapshot& s = r.latest->snapshot;
                  for (size_t i = 0; i < s.percents.size() && i < s.values.size(); ++i) {
                    if (s.percents[i] != p) continue;
                    return counts ? Int(s.counts[i]) : Int(ToNanos(s.values[i], r.unit));
                  }
                  return std::nullopt;
                });
    }
  }
}

}  // namespace

void WriteSbkRunFamilies(std::span<const RunMetrics> runs, PrometheusText& out) {
  if (runs.empty()) return;
  // Runs grouped by action, each group's families together.
  std::vector<const RunMetrics*> order;
  for (const RunMetrics& r : runs) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const RunMetrics* a, const RunMetrics* b) {
    return std::make_pair(ActionRank(a->action), a->action) <
           std::make_pair(ActionRank(b->action), b->action);
  });
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    std::vector<RunMetrics> group;
    while (end < order.size() && order[end]->action == order[begin]->action) {
      group.push_back(*order[end]);
      ++end;
    }
    SbkActionFamilies(group, absl::StrCat("SBK_", order[begin]->action), out);
    begin = end;
  }
  const std::pair<const char*, int RunMetrics::*> gauges[] = {
      {"SBK_Writers", &RunMetrics::writers},
      {"SBK_Readers", &RunMetrics::readers},
      {"SBK_Max_Writers", &RunMetrics::max_writers},
      {"SBK_Max_Readers", &RunMetrics::max_readers},
      {"SBK_Connections", &RunMetrics::connections},
      {"SBK_Max_Connections", &RunMetrics::max_connections}};
  for (const auto& [name, field] : gauges) {
    const int RunMetrics::*f = field;
    SbkFamily(runs, out, name, MetricType::kGauge, "SBK worker and connection counts.",
              [f](const RunMetrics& r) -> std::optional<std::string> { return Int(r.*f); });
  }
  for (const bool write : {true, false}) {
    const std::string side = write ? "SBK_Write_Request" : "SBK_Read_Request";
    auto mine = [write](const RunMetrics& r) { return (r.action.rfind("Writ", 0) == 0) == write; };
    SbkFamily(runs, out, side + "_Records_total", MetricType::kCounter,
              "Records requested on this side (the run's records when its action starts here).",
              [mine](const RunMetrics& r) -> std::optional<std::string> {
                return Int(mine(r) ? r.total.snapshot.records : 0);
              });
    SbkFamily(runs, out, side + "_Bytes_total", MetricType::kCounter,
              "Bytes requested on this side (the run's bytes when its action starts here).",
              [mine](const RunMetrics& r) -> std::optional<std::string> {
                return Int(mine(r) ? r.total.snapshot.bytes : 0);
              });
    SbkFamily(runs, out, side + "_RecordsPerSec", MetricType::kGauge,
              "Requested records per second, latest window.",
              [mine](const RunMetrics& r) -> std::optional<std::string> {
                if (!r.latest) return std::nullopt;
                return FormatSampleValue(
                    mine(r)
                        ? Rate(static_cast<double>(r.latest->snapshot.records), r.latest->seconds)
                        : 0.0);
              });
    // SBK's own spelling differs by side (_Write_Request_Bytes_MBPerSec,
    // _Read_Request_MBPerSec); SBK's dashboard queries _Read_Request_Bytes_MBPerSec
    // as well, so the read side has both.
    std::vector<std::string> mb_names = {side + "_Bytes_MBPerSec"};
    if (!write) mb_names.insert(mb_names.begin(), side + "_MBPerSec");
    for (const std::string& mb_name : mb_names) {
      SbkFamily(runs, out, mb_name, MetricType::kGauge,
                "Requested MB (2^20 bytes) per second, latest window.",
                [mine](const RunMetrics& r) -> std::optional<std::string> {
                  if (!r.latest) return std::nullopt;
                  return FormatSampleValue(
                      mine(r)
                          ? Rate(static_cast<double>(r.latest->snapshot.bytes) / kBytesPerMebibyte,
                                 r.latest->seconds)
                          : 0.0);
                });
    }
  }
}

void WriteRunFamilies(std::span<const RunMetrics> runs, config::MetricNames names,
                      PrometheusText& out) {
  if (names != config::MetricNames::kSbk) WritePerldRunFamilies(runs, out);
  if (names != config::MetricNames::kPerld) WriteSbkRunFamilies(runs, out);
}

}  // namespace perld::http
