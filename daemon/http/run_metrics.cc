#include "daemon/http/run_metrics.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "absl/strings/str_cat.h"

namespace perld::http {
namespace {

constexpr double kBytesPerMebibyte = 1024.0 * 1024.0;
constexpr double kNanosPerSecond = 1e9;

double Rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

// Records whose latency is non-negative: the ones a summary observed.
int64_t Observed(const LatencySnapshot& s) { return s.valid + s.lower_discard + s.higher_discard; }

// A run's latency in its unit as ns (SBK's metrics are always in ns).
int64_t ToNanos(int64_t value, TimeUnit unit) { return value * NanosPerUnit(unit); }

double AverageSeconds(const LatencySnapshot& s, TimeUnit unit) {
  return s.AvgLatency() * static_cast<double>(NanosPerUnit(unit)) / kNanosPerSecond;
}

// Sample values are formatted into one reused buffer: no allocation per sample.
void SetInt(std::string* v, int64_t x) {
  char buf[24];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), x);
  v->assign(buf, r.ptr);
}
void SetDouble(std::string* v, double x) { *v = FormatSampleValue(x); }
void SetSeconds(std::string* v, int64_t units, TimeUnit unit) {
  *v = UnitsToSecondsText(units, unit);
}

// The runs of one rendering with their label text, computed once per scrape.
struct Scope {
  std::span<const RunMetrics> runs;
  std::vector<std::string> labels;  // labels[i]: the label text of runs[i]
};

// One family with a sample per run for which `value(run, &text)` returns
// true; the family is left out when no run has one.
template <typename Value>
void Family(const Scope& scope, PrometheusText& out, std::string_view name, MetricType type,
            std::string_view help, Value value) {
  std::string text;
  bool started = false;
  for (size_t i = 0; i < scope.runs.size(); ++i) {
    if (!value(scope.runs[i], &text)) continue;
    if (!started) out.Family(name, type, help);
    started = true;
    out.SampleText("", scope.labels[i], "", text);
  }
}

// A family of one figure of the latest closed window (runs without one are left out).
template <typename Figure>
void LatestFamily(const Scope& scope, PrometheusText& out, std::string_view name,
                  std::string_view help, Figure figure) {
  Family(scope, out, name, MetricType::kGauge, help, [&](const RunMetrics& r, std::string* v) {
    if (!r.latest) return false;
    figure(r, *r.latest, v);
    return true;
  });
}

template <typename Count>
void Counter(const Scope& scope, PrometheusText& out, std::string_view name, std::string_view help,
             Count count) {
  Family(scope, out, name, MetricType::kCounter, help, [&](const RunMetrics& r, std::string* v) {
    SetInt(v, count(r));
    return true;
  });
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
  // SBK: (long) ((factor + cnt - 1) / cnt), a rounded-up mean.
  auto mean_up = [](double factor, int64_t cnt) {
    const double n = static_cast<double>(cnt);
    return cnt > 0 ? static_cast<int64_t>((factor + n - 1) / n) : int64_t{0};
  };
  const int64_t slc1 = mean_up(factor1, cnt1);
  const int64_t slc2 = mean_up(factor2, cnt2);
  return {slc1, slc2};
}

const PerldFamilyInfo kPerldFamilyInfo[kPerldFamilies] = {
    {"perld_run_info", MetricType::kGauge,
     "A run perld exports: its state, latency unit and SBK action as labels."},
    {"perld_run_start_time_seconds", MetricType::kGauge, "Start of the run, Unix time in seconds."},
    {"perld_run_records_total", MetricType::kCounter,
     "Records of the run so far (valid, discarded and invalid)."},
    {"perld_run_bytes_total", MetricType::kCounter, "Bytes of the run's records so far."},
    {"perld_run_invalid_latencies_total", MetricType::kCounter, "Records with a negative latency."},
    {"perld_run_lower_discards_total", MetricType::kCounter,
     "Records with a latency below the run's minimum latency."},
    {"perld_run_higher_discards_total", MetricType::kCounter,
     "Records with a latency above the run's maximum latency."},
    {"perld_run_dropped_timestamps_total", MetricType::kCounter,
     "Timestamps dropped at the pending bound (overflow: drop)."},
    {"perld_run_blocked_timestamps_total", MetricType::kCounter,
     "Sends that waited at the pending bound (overflow: block)."},
    {"perld_run_total_window_releases_total", MetricType::kCounter,
     "Total-window segments reported and released on their own memory or counter limit."},
    {"perld_run_full_window_closes_total", MetricType::kCounter,
     "Periodic windows closed before their interval by the memory policy (IsFull)."},
    {"perld_run_latency_seconds", MetricType::kSummary,
     "Exact latency percentiles of the latest closed window (quantiles); _sum and _count cover "
     "every non-negative latency of the run."},
    {"perld_run_total_latency_seconds", MetricType::kSummary,
     "Exact latency percentiles of the run's whole total so far; _sum and _count cover every "
     "non-negative latency of the run."},
    {"perld_run_latency_quantile_records", MetricType::kGauge,
     "Records of the latest closed window whose latency equals the latency at the percentile "
     "(label: the percent, 99.9 for quantile 0.999)."},
    {"perld_run_window_seconds", MetricType::kGauge, "Length of the latest closed window."},
    {"perld_run_records_per_second", MetricType::kGauge,
     "Records per second over the latest closed window."},
    {"perld_run_bytes_per_second", MetricType::kGauge,
     "Bytes per second over the latest closed window."},
    {"perld_run_latency_average_seconds", MetricType::kGauge,
     "SBK's average latency of the latest closed window."},
    {"perld_run_latency_min_seconds", MetricType::kGauge,
     "Smallest non-negative latency of the latest closed window, 0 if none."},
    {"perld_run_latency_max_seconds", MetricType::kGauge,
     "Largest non-negative latency of the latest closed window, 0 if none."},
    {"perld_run_writers", MetricType::kGauge, "Writers of the run."},
    {"perld_run_readers", MetricType::kGauge, "Readers of the run."},
    {"perld_run_clients", MetricType::kGauge, "Remote clients connected to the run now."},
    {"perld_run_recorder_memory_bytes", MetricType::kGauge,
     "Memory the running run's periodic and total recorders retained at its latest window."},
    {"perld_run_cache_releases_total", MetricType::kCounter,
     "Times the run's recorders released their retained cache over its memory cap, each after "
     "the window it held was reported."},
    {"perld_run_remote_reports_total", MetricType::kCounter,
     "Remote client windows merged into the run (ingest windows mode, SBP)."},
    {"perld_run_late_reports_total", MetricType::kCounter,
     "Remote windows merged into a later interval than the one their client window ended in."},
    {"perld_run_window_clients", MetricType::kGauge,
     "Remote clients whose windows were merged into the latest closed window."},
};

namespace {

// The `quantile="..."` and `percentile="..."` label texts, per percent,
// shared by every run a thread renders (bounded: cleared past 4096 percents).
std::string_view PercentLabel(double percent, bool quantile) {
  thread_local std::map<std::pair<double, bool>, std::string> cache;
  if (cache.size() > 4096) cache.clear();
  auto [it, added] = cache.try_emplace({percent, quantile});
  if (added) {
    it->second = quantile ? absl::StrCat("quantile=\"", PercentToQuantileText(percent), "\"")
                          : absl::StrCat("percentile=\"", FormatSampleValue(percent), "\"");
  }
  return it->second;
}

// Writes one run's lines of each family into its own fragment.
class RunWriter {
 public:
  RunWriter(const RunMetrics& run, RunFragments* fragments)
      : run_(run), labels_(run.identity.text()), fragments_(fragments) {
    fragments_->resize(kPerldFamilies);
    for (std::string& f : *fragments_) f.clear();  // capacity kept for the next render
  }

  // `value` of family f, optionally with one more label pair and a suffix.
  void Line(PerldFamily f, std::string_view value, std::string_view extra = {},
            std::string_view suffix = {}) {
    AppendSampleLine(&(*fragments_)[f], kPerldFamilyInfo[f].name, suffix, labels_, extra, value);
  }
  void Int(PerldFamily f, int64_t v) {
    SetInt(&value_, v);
    Line(f, value_);
  }
  void Double(PerldFamily f, double v) {
    SetDouble(&value_, v);
    Line(f, value_);
  }
  void Seconds(PerldFamily f, int64_t units) {
    SetSeconds(&value_, units, run_.unit);
    Line(f, value_);
  }
  // A summary's quantiles of `s` (none when null), then _sum and _count of the total.
  void Summary(PerldFamily f, const LatencySnapshot* s) {
    if (s != nullptr) {
      const size_t n = std::min(s->percents.size(), s->values.size());
      for (size_t k = 0; k < n; ++k) {
        SetSeconds(&value_, s->values[k], run_.unit);
        Line(f, value_, PercentLabel(s->percents[k], /*quantile=*/true));
      }
    }
    const LatencySnapshot& total = run_.total.snapshot;
    SetSeconds(&value_, total.total_latency, run_.unit);
    Line(f, value_, {}, "_sum");
    SetInt(&value_, Observed(total));
    Line(f, value_, {}, "_count");
  }

 private:
  const RunMetrics& run_;
  std::string_view labels_;
  RunFragments* fragments_;
  std::string value_;
};

}  // namespace

void RenderPerldRun(const RunMetrics& run, RunFragments* fragments) {
  RunWriter w(run, fragments);
  const LatencySnapshot& total = run.total.snapshot;
  w.Line(kInfo, "1",
         Labels()
             .Add("state", run.state)
             .Add("unit", TimeUnitName(run.unit))
             .Add("action", run.action)
             .text());
  w.Double(kStartTime, run.start_unix_seconds);
  w.Int(kRecords, total.records);
  w.Int(kBytes, total.bytes);
  w.Int(kInvalid, total.invalid);
  w.Int(kLowerDiscards, total.lower_discard);
  w.Int(kHigherDiscards, total.higher_discard);
  w.Int(kDropped, static_cast<int64_t>(run.dropped));
  w.Int(kBlocked, static_cast<int64_t>(run.blocked));
  w.Int(kTotalReleases, run.total_window_releases);
  w.Int(kFullCloses, run.latest ? run.latest->snapshot.full_closes : 0);
  w.Summary(kLatency, run.latest ? &run.latest->snapshot : nullptr);
  w.Summary(kTotalLatency, run.total_exact ? &total : nullptr);
  if (run.latest) {
    const LatencySnapshot& s = run.latest->snapshot;
    const double seconds = run.latest->seconds;
    const double rate_seconds = run.latest->RateSeconds();
    std::string count;
    for (size_t k = 0; k < std::min(s.percents.size(), s.counts.size()); ++k) {
      SetInt(&count, s.counts[k]);
      w.Line(kQuantileRecords, count, PercentLabel(s.percents[k], /*quantile=*/false));
    }
    w.Double(kWindowSeconds, seconds);
    w.Double(kRecordsPerSecond, Rate(static_cast<double>(s.records), rate_seconds));
    w.Double(kBytesPerSecond, Rate(static_cast<double>(s.bytes), rate_seconds));
    w.Double(kAverage, AverageSeconds(s, run.unit));
    w.Seconds(kMin, s.min_latency);
    w.Seconds(kMax, s.max_latency);
  }
  w.Int(kWriters, run.writers);
  w.Int(kReaders, run.readers);
  w.Int(kClients, run.connections);
  if (run.state == "running" && run.latest) w.Int(kRecorderMemory, run.recorder_bytes);
  w.Int(kCacheReleases, run.cache_releases);
  if (run.component == "sbm") {
    w.Int(kRemoteReports, run.remote_reports);
    w.Int(kLateReports, run.late_reports);
    if (run.latest) w.Int(kWindowClients, run.window_clients);
  }
}

void WritePerldFamilies(std::span<const RunFragments* const> runs, PrometheusText& out) {
  for (size_t f = 0; f < kPerldFamilies; ++f) {
    bool started = false;
    for (const RunFragments* run : runs) {
      const std::string& lines = (*run)[f];
      if (lines.empty()) continue;
      if (!started)
        out.Family(kPerldFamilyInfo[f].name, kPerldFamilyInfo[f].type, kPerldFamilyInfo[f].help);
      started = true;
      out.AppendText(lines);
    }
  }
}

void WritePerldRunFamilies(std::span<const RunMetrics> runs, PrometheusText& out) {
  std::vector<RunFragments> fragments(runs.size());
  std::vector<const RunFragments*> views;
  for (size_t i = 0; i < runs.size(); ++i) {
    RenderPerldRun(runs[i], &fragments[i]);
    views.push_back(&fragments[i]);
  }
  WritePerldFamilies(views, out);
}

namespace {

// The SBK action order of SBK's EnumAction; other actions after them.
int ActionRank(const std::string& action) {
  static const char* const kOrder[] = {"Writing",           "Reading",      "Write_Reading",
                                       "Write_OnlyReading", "Read_Writing", "Read_OnlyWriting"};
  for (size_t i = 0; i < std::size(kOrder); ++i) {
    if (action == kOrder[i]) return static_cast<int>(i);
  }
  return static_cast<int>(std::size(kOrder));
}

// SBK's labels: the run identity plus component, class and action.
std::string SbkLabels(const RunMetrics& r) {
  return Labels()
      .AddText(r.identity.text())
      .Add("component", r.component)
      .Add("class", r.sbk_class)
      .Add("action", r.action)
      .text();
}

// The families of one action's runs (prefix SBK_<action>).
void SbkActionFamilies(const Scope& scope, const std::string& prefix, PrometheusText& out) {
  const struct {
    const char* suffix;
    const char* help;
    int64_t LatencySnapshot::*field;
  } totals[] = {{"_Records_total", "Records of the run so far.", &LatencySnapshot::records},
                {"_Bytes_total", "Bytes of the run so far.", &LatencySnapshot::bytes},
                {"_InvalidLatencyRecords_total", "Records with a negative latency.",
                 &LatencySnapshot::invalid},
                {"_LowerDiscardedLatencyRecords_total", "Records below the minimum latency.",
                 &LatencySnapshot::lower_discard},
                {"_HigherDiscardLatencyRecords_total", "Records above the maximum latency.",
                 &LatencySnapshot::higher_discard}};
  for (const auto& t : totals) {
    Counter(scope, out, absl::StrCat(prefix, t.suffix), t.help,
            [field = t.field](const RunMetrics& r) { return r.total.snapshot.*field; });
  }
  LatestFamily(scope, out, prefix + "_MBPerSec", "MB (2^20 bytes) per second of the latest window.",
               [](const RunMetrics&, const ExpositionWindow& w, std::string* v) {
                 SetDouble(v, Rate(static_cast<double>(w.snapshot.bytes) / kBytesPerMebibyte,
                                   w.RateSeconds()));
               });
  LatestFamily(scope, out, prefix + "_RecordsPerSec", "Records per second of the latest window.",
               [](const RunMetrics&, const ExpositionWindow& w, std::string* v) {
                 SetDouble(v, Rate(static_cast<double>(w.snapshot.records), w.RateSeconds()));
               });
  LatestFamily(scope, out, prefix + "_ns_AvgLatency", "Average latency of the latest window, ns.",
               [](const RunMetrics& r, const ExpositionWindow& w, std::string* v) {
                 SetDouble(v, w.snapshot.AvgLatency() * static_cast<double>(NanosPerUnit(r.unit)));
               });
  LatestFamily(scope, out, prefix + "_ns_MinLatency", "Minimum latency of the latest window, ns.",
               [](const RunMetrics& r, const ExpositionWindow& w, std::string* v) {
                 SetInt(v, ToNanos(w.snapshot.min_latency, r.unit));
               });
  LatestFamily(scope, out, prefix + "_ns_MaxLatency", "Maximum latency of the latest window, ns.",
               [](const RunMetrics& r, const ExpositionWindow& w, std::string* v) {
                 SetInt(v, ToNanos(w.snapshot.max_latency, r.unit));
               });
  LatestFamily(scope, out, prefix + "_SLC_1",
               "Sliding latency coverage 1 of the latest window (SBK).",
               [](const RunMetrics&, const ExpositionWindow& w, std::string* v) {
                 SetInt(v, SlidingLatencyCoverage(w.snapshot).first);
               });
  LatestFamily(scope, out, prefix + "_SLC_2",
               "Sliding latency coverage 2 of the latest window (SBK).",
               [](const RunMetrics&, const ExpositionWindow& w, std::string* v) {
                 SetInt(v, SlidingLatencyCoverage(w.snapshot).second);
               });
  // Percentiles: the union of the runs' percents, ascending; a run without a
  // percent has no sample in its family.
  std::map<double, std::string> percents;
  for (const RunMetrics& r : scope.runs) {
    if (!r.latest) continue;
    for (double p : r.latest->snapshot.percents) percents.emplace(p, SbkPercentileName(p));
  }
  for (const bool counts : {false, true}) {
    for (const auto& [percent, name] : percents) {
      Family(scope, out, absl::StrCat(prefix, counts ? "_Count_" : "_ns_", name),
             MetricType::kGauge,
             counts ? "Records at exactly the latency of the percentile, latest window."
                    : "Exact latency at the percentile of the latest window, ns.",
             [p = percent, counts](const RunMetrics& r, std::string* v) {
               if (!r.latest) return false;
               const LatencySnapshot& s = r.latest->snapshot;
               for (size_t i = 0; i < s.percents.size() && i < s.values.size(); ++i) {
                 if (s.percents[i] != p) continue;
                 SetInt(v, counts ? s.counts[i] : ToNanos(s.values[i], r.unit));
                 return true;
               }
               return false;
             });
    }
  }
}

}  // namespace

void WriteSbkRunFamilies(std::span<const RunMetrics> runs, PrometheusText& out) {
  if (runs.empty()) return;
  // Runs grouped by action, each group's families together.
  std::vector<RunMetrics> sorted(runs.begin(), runs.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const RunMetrics& a, const RunMetrics& b) {
    return std::make_pair(ActionRank(a.action), a.action) <
           std::make_pair(ActionRank(b.action), b.action);
  });
  Scope all{sorted, {}};
  for (const RunMetrics& r : sorted) all.labels.push_back(SbkLabels(r));
  for (size_t begin = 0; begin < sorted.size();) {
    size_t end = begin;
    while (end < sorted.size() && sorted[end].action == sorted[begin].action) ++end;
    Scope group{std::span<const RunMetrics>(sorted).subspan(begin, end - begin),
                std::vector<std::string>(all.labels.begin() + static_cast<ptrdiff_t>(begin),
                                         all.labels.begin() + static_cast<ptrdiff_t>(end))};
    SbkActionFamilies(group, absl::StrCat("SBK_", sorted[begin].action), out);
    begin = end;
  }
  const struct {
    const char* name;
    int RunMetrics::*field;
  } gauges[] = {{"SBK_Writers", &RunMetrics::writers},
                {"SBK_Readers", &RunMetrics::readers},
                {"SBK_Max_Writers", &RunMetrics::max_writers},
                {"SBK_Max_Readers", &RunMetrics::max_readers},
                {"SBK_Connections", &RunMetrics::connections},
                {"SBK_Max_Connections", &RunMetrics::max_connections}};
  for (const auto& g : gauges) {
    Family(all, out, g.name, MetricType::kGauge, "SBK worker and connection counts.",
           [field = g.field](const RunMetrics& r, std::string* v) {
             SetInt(v, r.*field);
             return true;
           });
  }
  for (const bool write : {true, false}) {
    const std::string side = write ? "SBK_Write_Request" : "SBK_Read_Request";
    // The run's records are requests of the side its action starts with.
    auto mine = [write](const RunMetrics& r) { return (r.action.rfind("Writ", 0) == 0) == write; };
    Counter(all, out, side + "_Records_total",
            "Records requested on this side (the run's records when its action starts here).",
            [&](const RunMetrics& r) { return mine(r) ? r.total.snapshot.records : 0; });
    Counter(all, out, side + "_Bytes_total",
            "Bytes requested on this side (the run's bytes when its action starts here).",
            [&](const RunMetrics& r) { return mine(r) ? r.total.snapshot.bytes : 0; });
    LatestFamily(all, out, side + "_RecordsPerSec", "Requested records per second, latest window.",
                 [&](const RunMetrics& r, const ExpositionWindow& w, std::string* v) {
                   SetDouble(v, mine(r)
                                    ? Rate(static_cast<double>(w.snapshot.records), w.RateSeconds())
                                    : 0.0);
                 });
    // SBK's own spelling differs by side (_Write_Request_Bytes_MBPerSec,
    // _Read_Request_MBPerSec); SBK's dashboard queries _Read_Request_Bytes_MBPerSec
    // as well, so the read side has both.
    std::vector<std::string> mb_names = {side + "_Bytes_MBPerSec"};
    if (!write) mb_names.insert(mb_names.begin(), side + "_MBPerSec");
    for (const std::string& mb_name : mb_names) {
      LatestFamily(
          all, out, mb_name, "Requested MB (2^20 bytes) per second, latest window.",
          [&](const RunMetrics& r, const ExpositionWindow& w, std::string* v) {
            SetDouble(v, mine(r) ? Rate(static_cast<double>(w.snapshot.bytes) / kBytesPerMebibyte,
                                        w.RateSeconds())
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
