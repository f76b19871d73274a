// The Prometheus serializer (prometheus_text.h, run_metrics.h and the bench's
// LatestMetrics): golden text for perld's names, SBK's names and their
// spelling rules, escaping, ordering, NaN/Inf, empty windows, exact unit
// conversion, quantile text, a non-C locale, the running total, and validity
// as judged by the real `promtool check metrics`.
#include "daemon/http/metrics_exposition.h"

#include <gtest/gtest.h>

#include <clocale>
#include <cmath>
#include <limits>
#include <locale>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/http/prometheus_text.h"
#include "daemon/http/run_metrics.h"
#include "tests/promtool_check.h"

namespace perld::http {
namespace {

using ::perld::test_support::HavePromtool;
using ::perld::test_support::PromtoolCheck;

// 10 records in 2 s, 2 MiB, latencies 1..10 ms (sum 55), two percentiles.
LatencySnapshot SmallSnapshot() {
  LatencySnapshot s;
  s.start_time = 1000;
  s.end_time = 3000;
  s.records = 10;
  s.bytes = 2 * 1024 * 1024;
  s.total_latency = 55;
  s.min_latency = 1;
  s.max_latency = 10;
  s.valid = 10;
  s.percents = {50, 99.9};
  s.fractions = {0.5, 0.999};
  s.values = {5, 10};
  s.counts = {1, 1};
  s.median = 6;
  return s;
}

RunMetrics SmallRun() {
  RunMetrics run;
  run.identity.Add("run_id", "7").Add("run", "nightly").Add("source", "bench");
  run.state = "running";
  run.unit = TimeUnit::kMs;
  run.action = "Writing";
  run.writers = run.max_writers = 1;
  run.start_unix_seconds = 1700000000.5;
  run.latest = ExpositionWindow{SmallSnapshot(), 2.0};
  run.total = ExpositionWindow{SmallSnapshot(), 2.0};
  run.recorder_bytes = 4096;
  return run;
}

std::string Render(const std::vector<RunMetrics>& runs, config::MetricNames names) {
  PrometheusText out;
  WriteRunFamilies(runs, names, out);
  return out.Take();
}

constexpr char kGolden[] =
    R"(# HELP perld_run_info A run perld exports: its state, latency unit and SBK action as labels.
# TYPE perld_run_info gauge
perld_run_info{run_id="7",run="nightly",source="bench",state="running",unit="ms",action="Writing"} 1
# HELP perld_run_start_time_seconds Start of the run, Unix time in seconds.
# TYPE perld_run_start_time_seconds gauge
perld_run_start_time_seconds{run_id="7",run="nightly",source="bench"} 1700000000.5
# HELP perld_run_records_total Records of the run so far (valid, discarded and invalid).
# TYPE perld_run_records_total counter
perld_run_records_total{run_id="7",run="nightly",source="bench"} 10
# HELP perld_run_bytes_total Bytes of the run's records so far.
# TYPE perld_run_bytes_total counter
perld_run_bytes_total{run_id="7",run="nightly",source="bench"} 2097152
# HELP perld_run_invalid_latencies_total Records with a negative latency.
# TYPE perld_run_invalid_latencies_total counter
perld_run_invalid_latencies_total{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_lower_discards_total Records with a latency below the run's minimum latency.
# TYPE perld_run_lower_discards_total counter
perld_run_lower_discards_total{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_higher_discards_total Records with a latency above the run's maximum latency.
# TYPE perld_run_higher_discards_total counter
perld_run_higher_discards_total{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_dropped_timestamps_total Timestamps dropped at the pending bound (overflow: drop).
# TYPE perld_run_dropped_timestamps_total counter
perld_run_dropped_timestamps_total{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_blocked_timestamps_total Sends that waited at the pending bound (overflow: block).
# TYPE perld_run_blocked_timestamps_total counter
perld_run_blocked_timestamps_total{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_total_window_releases_total Total-window segments reported and released on their own memory or counter limit.
# TYPE perld_run_total_window_releases_total counter
perld_run_total_window_releases_total{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_full_window_closes_total Periodic windows closed before their interval by the memory policy (IsFull).
# TYPE perld_run_full_window_closes_total counter
perld_run_full_window_closes_total{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_latency_seconds Exact latency percentiles of the latest closed window (quantiles); _sum and _count cover every non-negative latency of the run.
# TYPE perld_run_latency_seconds summary
perld_run_latency_seconds{run_id="7",run="nightly",source="bench",quantile="0.5"} 0.005
perld_run_latency_seconds{run_id="7",run="nightly",source="bench",quantile="0.999"} 0.01
perld_run_latency_seconds_sum{run_id="7",run="nightly",source="bench"} 0.055
perld_run_latency_seconds_count{run_id="7",run="nightly",source="bench"} 10
# HELP perld_run_total_latency_seconds Exact latency percentiles of the run's whole total so far; _sum and _count cover every non-negative latency of the run.
# TYPE perld_run_total_latency_seconds summary
perld_run_total_latency_seconds{run_id="7",run="nightly",source="bench",quantile="0.5"} 0.005
perld_run_total_latency_seconds{run_id="7",run="nightly",source="bench",quantile="0.999"} 0.01
perld_run_total_latency_seconds_sum{run_id="7",run="nightly",source="bench"} 0.055
perld_run_total_latency_seconds_count{run_id="7",run="nightly",source="bench"} 10
# HELP perld_run_latency_quantile_records Records of the latest closed window whose latency equals the latency at the percentile (label: the percent, 99.9 for quantile 0.999).
# TYPE perld_run_latency_quantile_records gauge
perld_run_latency_quantile_records{run_id="7",run="nightly",source="bench",percentile="50"} 1
perld_run_latency_quantile_records{run_id="7",run="nightly",source="bench",percentile="99.9"} 1
# HELP perld_run_window_seconds Length of the latest closed window.
# TYPE perld_run_window_seconds gauge
perld_run_window_seconds{run_id="7",run="nightly",source="bench"} 2
# HELP perld_run_records_per_second Records per second over the latest closed window.
# TYPE perld_run_records_per_second gauge
perld_run_records_per_second{run_id="7",run="nightly",source="bench"} 5
# HELP perld_run_bytes_per_second Bytes per second over the latest closed window.
# TYPE perld_run_bytes_per_second gauge
perld_run_bytes_per_second{run_id="7",run="nightly",source="bench"} 1048576
# HELP perld_run_latency_average_seconds SBK's average latency of the latest closed window.
# TYPE perld_run_latency_average_seconds gauge
perld_run_latency_average_seconds{run_id="7",run="nightly",source="bench"} 0.0055
# HELP perld_run_latency_min_seconds Smallest non-negative latency of the latest closed window, 0 if none.
# TYPE perld_run_latency_min_seconds gauge
perld_run_latency_min_seconds{run_id="7",run="nightly",source="bench"} 0.001
# HELP perld_run_latency_max_seconds Largest non-negative latency of the latest closed window, 0 if none.
# TYPE perld_run_latency_max_seconds gauge
perld_run_latency_max_seconds{run_id="7",run="nightly",source="bench"} 0.01
# HELP perld_run_writers Writers of the run.
# TYPE perld_run_writers gauge
perld_run_writers{run_id="7",run="nightly",source="bench"} 1
# HELP perld_run_readers Readers of the run.
# TYPE perld_run_readers gauge
perld_run_readers{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_clients Remote clients connected to the run now.
# TYPE perld_run_clients gauge
perld_run_clients{run_id="7",run="nightly",source="bench"} 0
# HELP perld_run_recorder_memory_bytes Memory the running run's periodic and total recorders retained at its latest window.
# TYPE perld_run_recorder_memory_bytes gauge
perld_run_recorder_memory_bytes{run_id="7",run="nightly",source="bench"} 4096
# HELP perld_run_cache_releases_total Times the run's recorders released their retained cache over its memory cap, each after the window it held was reported.
# TYPE perld_run_cache_releases_total counter
perld_run_cache_releases_total{run_id="7",run="nightly",source="bench"} 0
)";

TEST(RunMetricsTest, MatchesGoldenTextForASmallRun) {
  EXPECT_EQ(Render({SmallRun()}, config::MetricNames::kPerld), kGolden);
}

// Every sample line of `text` that starts with `name` followed by '{' or ' '.
std::vector<std::string> SamplesOf(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) == 0 && line.size() > name.size() &&
        (line[name.size()] == '{' || line[name.size()] == ' ')) {
      out.push_back(line);
    }
  }
  return out;
}

TEST(RunMetricsTest, BeforeTheFirstWindowOnlyCountersAndEmptySummariesAppear) {
  RunMetrics run = SmallRun();
  run.latest.reset();
  run.total = ExpositionWindow{};
  const std::string text = Render({run}, config::MetricNames::kPerld);
  EXPECT_EQ(SamplesOf(text, "perld_run_records_total").size(), 1u);
  EXPECT_EQ(SamplesOf(text, "perld_run_records_per_second").size(), 0u);
  EXPECT_EQ(text.find("# TYPE perld_run_records_per_second"), std::string::npos);
  // The summaries keep their _sum and _count (0), without quantiles.
  EXPECT_EQ(SamplesOf(text, "perld_run_latency_seconds").size(), 0u);
  EXPECT_EQ(
      SamplesOf(text, "perld_run_latency_seconds_count"),
      std::vector<std::string>{
          "perld_run_latency_seconds_count{run_id=\"7\",run=\"nightly\",source=\"bench\"} 0"});
}

TEST(RunMetricsTest, FamiliesAreWrittenOnceWithRunsInTheGivenOrder) {
  RunMetrics a = SmallRun();
  RunMetrics b = SmallRun();
  b.identity = Labels().Add("run_id", "3").Add("run", "older").Add("source", "ingest");
  const std::string text = Render({a, b}, config::MetricNames::kPerld);
  size_t types = 0;
  for (size_t at = text.find("# TYPE perld_run_records_total"); at != std::string::npos;
       at = text.find("# TYPE perld_run_records_total", at + 1)) {
    ++types;
  }
  EXPECT_EQ(types, 1u);
  const std::vector<std::string> records = SamplesOf(text, "perld_run_records_total");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_NE(records[0].find("run_id=\"7\""), std::string::npos);
  EXPECT_NE(records[1].find("run_id=\"3\""), std::string::npos);
  EXPECT_EQ(text, Render({a, b}, config::MetricNames::kPerld)) << "stable from scrape to scrape";
}

TEST(RunMetricsTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  RunMetrics run = SmallRun();
  run.identity = Labels().Add("run", "my \"quoted\"\\run\nnext");
  run.sbk_class = "odd\nclass";
  const std::string text = Render({run}, config::MetricNames::kBoth);
  EXPECT_NE(text.find("run=\"my \\\"quoted\\\"\\\\run\\nnext\""), std::string::npos);
  EXPECT_NE(text.find("class=\"odd\\nclass\""), std::string::npos);
  // No raw newline inside a sample: every line is a comment or starts with a name.
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("perld_", 0) == 0 ||
                line.rfind("SBK_", 0) == 0)
        << line;
  }
}

TEST(RunMetricsTest, FormatsNanAndInfinities) {
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(0.5), "0.5");
  EXPECT_EQ(FormatSampleValue(1e21), "1e+21");
  RunMetrics run = SmallRun();
  run.latest->seconds = std::numeric_limits<double>::quiet_NaN();
  run.start_unix_seconds = std::numeric_limits<double>::infinity();
  const std::string text = Render({run}, config::MetricNames::kPerld);
  EXPECT_NE(text.find("perld_run_window_seconds{run_id=\"7\",run=\"nightly\",source=\"bench\"} "
                      "NaN\n"),
            std::string::npos);
  EXPECT_NE(text.find("perld_run_start_time_seconds{run_id=\"7\",run=\"nightly\",source=\"bench\"}"
                      " +Inf\n"),
            std::string::npos);
}

TEST(RunMetricsTest, ConvertsTimeUnitsToSecondsExactly) {
  EXPECT_EQ(UnitsToSecondsText(0, TimeUnit::kMs), "0");
  EXPECT_EQ(UnitsToSecondsText(1500, TimeUnit::kMs), "1.5");
  EXPECT_EQ(UnitsToSecondsText(180'000, TimeUnit::kMs), "180");
  EXPECT_EQ(UnitsToSecondsText(1234, TimeUnit::kUs), "0.001234");
  EXPECT_EQ(UnitsToSecondsText(7, TimeUnit::kNs), "0.000000007");
  EXPECT_EQ(UnitsToSecondsText(1'000'000'001, TimeUnit::kNs), "1.000000001");
  EXPECT_EQ(UnitsToSecondsText(INT64_MAX, TimeUnit::kNs), "9223372036.854775807");
  EXPECT_EQ(UnitsToSecondsText(INT64_MAX, TimeUnit::kMs), "9223372036854775.807");
  EXPECT_EQ(UnitsToSecondsText(-5, TimeUnit::kMs), "-0.005");
}

TEST(RunMetricsTest, QuantileTextShiftsThePercentExactly) {
  EXPECT_EQ(PercentToQuantileText(50), "0.5");
  EXPECT_EQ(PercentToQuantileText(99.9), "0.999");
  EXPECT_EQ(PercentToQuantileText(99.99), "0.9999");
  EXPECT_EQ(PercentToQuantileText(5), "0.05");
  EXPECT_EQ(PercentToQuantileText(0.1), "0.001");
  EXPECT_EQ(PercentToQuantileText(0), "0");
  EXPECT_EQ(PercentToQuantileText(100), "1");
  EXPECT_EQ(PercentToQuantileText(92.5), "0.925");
}

TEST(RunMetricsTest, AggregatedRunsExportRemoteReportCounters) {
  RunMetrics run = SmallRun();
  run.component = "sbm";
  run.remote_reports = 40;
  run.late_reports = 3;
  run.window_clients = 4;
  run.cache_releases = 2;
  const std::string text = Render({run}, config::MetricNames::kPerld);
  const std::string labels = "{run_id=\"7\",run=\"nightly\",source=\"bench\"}";
  for (const std::string& line :
       {"perld_run_remote_reports_total" + labels + " 40",
        "perld_run_late_reports_total" + labels + " 3", "perld_run_window_clients" + labels + " 4",
        "perld_run_cache_releases_total" + labels + " 2"}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line;
  }
  // An in-process run has no remote clients: no remote families.
  EXPECT_EQ(Render({SmallRun()}, config::MetricNames::kPerld).find("remote_reports"),
            std::string::npos);
}

TEST(RunMetricsTest, SbkNamesFollowSbksSpelling) {
  EXPECT_EQ(SbkPercentileName(99.9), "99_9");
  EXPECT_EQ(SbkPercentileName(92.5), "92_5");
  EXPECT_EQ(SbkPercentileName(99.99), "99_99");
  EXPECT_EQ(SbkPercentileName(50), "50");
  EXPECT_EQ(SbkPercentileName(99.999), "100");  // DecimalFormat("0.##") rounds, as SBK does
  EXPECT_EQ(SbkAction(1, 0), std::string("Writing"));
  EXPECT_EQ(SbkAction(0, 2), std::string("Reading"));
  EXPECT_EQ(SbkAction(1, 1), std::string("Write_Reading"));

  RunMetrics run = SmallRun();
  run.component = "sbm";
  run.connections = 2;
  run.max_connections = 3;
  const std::string text = Render({run}, config::MetricNames::kSbk);
  EXPECT_EQ(text.find("perld_run_"), std::string::npos) << "sbk only";
  const std::string labels =
      "{run_id=\"7\",run=\"nightly\",source=\"bench\",component=\"sbm\",class=\"PerlBench\","
      "action=\"Writing\"}";
  for (const std::string& line :
       {"SBK_Writing_Records_total" + labels + " 10",
        "SBK_Writing_Bytes_total" + labels + " 2097152",
        "SBK_Writing_MBPerSec" + labels + " 1",
        "SBK_Writing_RecordsPerSec" + labels + " 5",
        "SBK_Writing_ns_AvgLatency" + labels + " 5500000",
        "SBK_Writing_ns_MinLatency" + labels + " 1000000",
        "SBK_Writing_ns_MaxLatency" + labels + " 10000000",
        "SBK_Writing_ns_50" + labels + " 5000000",
        "SBK_Writing_ns_99_9" + labels + " 10000000",
        "SBK_Writing_Count_99_9" + labels + " 1",
        "SBK_Connections" + labels + " 2",
        "SBK_Max_Connections" + labels + " 3",
        "SBK_Writers" + labels + " 1",
        "SBK_Write_Request_Records_total" + labels + " 10",
        "SBK_Read_Request_Records_total" + labels + " 0",
        "SBK_Write_Request_Bytes_MBPerSec" + labels + " 1",
        "SBK_Read_Request_MBPerSec" + labels + " 0",
        "SBK_Writing_InvalidLatencyRecords_total" + labels + " 0",
        "SBK_Writing_LowerDiscardedLatencyRecords_total" + labels + " 0",
        "SBK_Writing_HigherDiscardLatencyRecords_total" + labels + " 0"}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE SBK_Writing_Records_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE SBK_Writing_ns_99_9 gauge\n"), std::string::npos);
}

TEST(RunMetricsTest, SbkFamiliesGroupRunsByAction) {
  RunMetrics writing = SmallRun();
  RunMetrics reading = SmallRun();
  reading.action = "Reading";
  RunMetrics writing2 = SmallRun();
  writing2.identity = Labels().Add("run_id", "9");
  const std::string text = Render({reading, writing, writing2}, config::MetricNames::kSbk);
  EXPECT_EQ(SamplesOf(text, "SBK_Writing_Records_total").size(), 2u);
  EXPECT_EQ(SamplesOf(text, "SBK_Reading_Records_total").size(), 1u);
  // Writing (SBK's first action) before Reading, whatever the run order.
  EXPECT_LT(text.find("SBK_Writing_Records_total"), text.find("SBK_Reading_Records_total"));
  // A reading run's records are read requests, a writing run's write requests.
  for (const char* side : {"SBK_Read_Request_Records_total", "SBK_Write_Request_Records_total"}) {
    for (const std::string& line : SamplesOf(text, side)) {
      const bool is_reading = line.find("action=\"Reading\"") != std::string::npos;
      const bool read_side = side[4] == 'R';
      EXPECT_EQ(line.substr(line.rfind(' ') + 1), is_reading == read_side ? "10" : "0") << line;
    }
  }
}

TEST(RunMetricsTest, SlidingLatencyCoverageIsSbks) {
  LatencySnapshot s;
  s.values = {10, 20, 40, 100};
  s.median = 20;
  // slc1 over {20}: (20-10)/10 = 1 -> (1 + 1 - 1) / 1 = 1; slc2 over {40, 100}:
  // (1 + 4) = 5 -> (5 + 2 - 1) / 2 = 3.
  EXPECT_EQ(SlidingLatencyCoverage(s), std::make_pair(int64_t{1}, int64_t{3}));
  EXPECT_EQ(SlidingLatencyCoverage(LatencySnapshot{}), std::make_pair(int64_t{0}, int64_t{0}));
}

TEST(RunMetricsTest, IgnoresANonCLocale) {
  const char* chosen = nullptr;
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8",
                           "nl_NL.UTF-8", "pt_BR.UTF-8"}) {
    if (std::setlocale(LC_ALL, name) != nullptr) {
      chosen = name;
      break;
    }
  }
  if (chosen == nullptr) {
    std::setlocale(LC_ALL, "C");
    GTEST_SKIP() << "no decimal-comma locale installed (e.g. de_DE.UTF-8)";
  }
  ASSERT_EQ(std::string(std::localeconv()->decimal_point), ",") << chosen;
  std::locale::global(std::locale(chosen));
  const std::string text = Render({SmallRun()}, config::MetricNames::kPerld);
  std::locale::global(std::locale::classic());
  std::setlocale(LC_ALL, "C");
  EXPECT_EQ(text, kGolden) << "rendered under " << chosen;
}

TEST(LatestMetricsTest, KeepsARunningTotalUntilTheTotalWindowCloses) {
  RunMetrics described;
  described.identity.Add("run", "perlbench");
  described.unit = TimeUnit::kUs;
  described.action = "Reading";
  described.readers = 2;
  LatestMetrics latest(described, config::MetricNames::kPerld);
  LatencySnapshot first = SmallSnapshot();
  LatencySnapshot second = SmallSnapshot();
  second.records = 4;
  second.bytes = 400;
  second.valid = 3;
  second.lower_discard = 1;
  second.min_latency = 0;  // the discarded record
  second.max_latency = 20;
  second.total_latency = 45;
  latest.Publish(first, 2.0, /*total=*/false);
  latest.Publish(second, 1.0, /*total=*/false);
  const std::string running = latest.Render();
  const std::string labels = "{run=\"perlbench\"}";
  EXPECT_NE(running.find("perld_run_records_total" + labels + " 14\n"), std::string::npos)
      << running;
  EXPECT_NE(running.find("perld_run_lower_discards_total" + labels + " 1\n"), std::string::npos);
  EXPECT_NE(running.find("perld_run_window_seconds" + labels + " 1\n"), std::string::npos);
  // (55 + 45) us over 14 observed records.
  EXPECT_NE(running.find("perld_run_latency_seconds_sum" + labels + " 0.0001\n"),
            std::string::npos);
  EXPECT_NE(running.find("perld_run_latency_seconds_count" + labels + " 14\n"), std::string::npos);
  // The latest window's quantiles; no whole-run percentiles before the total closes.
  EXPECT_NE(
      running.find("perld_run_latency_seconds{run=\"perlbench\",quantile=\"0.999\"} 0.00001\n"),
      std::string::npos);
  EXPECT_EQ(running.find("perld_run_total_latency_seconds{"), std::string::npos);

  LatencySnapshot total = SmallSnapshot();
  total.records = 14;
  latest.Publish(total, 3.5, /*total=*/true);
  const std::string closed = latest.Render();
  EXPECT_NE(closed.find("perld_run_total_latency_seconds{run=\"perlbench\",quantile=\"0.5\"} "
                        "0.000005\n"),
            std::string::npos)
      << closed;
  EXPECT_NE(closed.find("perld_run_records_total" + labels + " 14\n"), std::string::npos);
}

// SBK's own names break Prometheus' naming lint (camelCase, "ns"); that is
// the compatibility mode's price and the only thing promtool may report.
bool OnlyNamingLint(const std::string& report) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("SBK_", 0) != 0) return false;
    if (line.find("should be written in 'snake_case'") == std::string::npos &&
        line.find("should not contain abbreviated units") == std::string::npos) {
      return false;
    }
  }
  return true;
}

TEST(RunMetricsTest, PromtoolAcceptsTheText) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  RunMetrics odd = SmallRun();
  odd.identity = Labels().Add("run", "odd \"name\"\\ with\nnewline");
  odd.latest->seconds = std::numeric_limits<double>::quiet_NaN();
  RunMetrics empty = SmallRun();
  empty.identity = Labels().Add("run_id", "8");
  empty.latest.reset();
  empty.total = ExpositionWindow{};
  const std::vector<std::vector<RunMetrics>> cases = {{SmallRun()}, {odd, empty}, {}};
  for (const std::vector<RunMetrics>& runs : cases) {
    std::string report;
    EXPECT_EQ(PromtoolCheck(Render(runs, config::MetricNames::kPerld), &report), 0) << report;
    EXPECT_EQ(report, "");
    const int status = PromtoolCheck(Render(runs, config::MetricNames::kBoth), &report);
    EXPECT_TRUE(status == 0 || OnlyNamingLint(report)) << report;
  }
}

}  // namespace
}  // namespace perld::http
