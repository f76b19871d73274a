// RenderExposition: golden text, escaping, NaN/Inf, exact unit conversion, a
// non-C locale, the running total of LatestMetrics, and validity as judged by
// the real `promtool check metrics`.
#include "daemon/http/metrics_exposition.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <clocale>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <locale>
#include <sstream>
#include <string>

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

ExpositionInput SmallInput() {
  ExpositionInput in;
  in.labels = {"PerlBench", "Writing", 1, 0};
  in.unit = TimeUnit::kMs;
  in.interval = ExpositionWindow{SmallSnapshot(), 2.0};
  return in;
}

constexpr char kGolden[] =
    R"(# HELP perld_latency_resolution_seconds Latency time unit of the run; every latency is a multiple of it.
# TYPE perld_latency_resolution_seconds gauge
perld_latency_resolution_seconds{storage="PerlBench",action="Writing",writers="1",readers="0"} 0.001
# HELP perld_window_seconds Length of the window in seconds.
# TYPE perld_window_seconds gauge
perld_window_seconds{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 2
# HELP perld_records Records accepted in the window (valid, discarded and invalid).
# TYPE perld_records gauge
perld_records{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 10
# HELP perld_bytes Bytes of the records accepted in the window.
# TYPE perld_bytes gauge
perld_bytes{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 2097152
# HELP perld_records_per_second Records per second over the window.
# TYPE perld_records_per_second gauge
perld_records_per_second{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 5
# HELP perld_mebibytes_per_second Throughput in MiB (2^20 bytes) per second over the window.
# TYPE perld_mebibytes_per_second gauge
perld_mebibytes_per_second{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 1
# HELP perld_latency_average_seconds Average latency over valid and discarded records, in seconds.
# TYPE perld_latency_average_seconds gauge
perld_latency_average_seconds{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 0.0055
# HELP perld_latency_min_seconds Smallest non-negative latency in seconds, 0 if none.
# TYPE perld_latency_min_seconds gauge
perld_latency_min_seconds{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 0.001
# HELP perld_latency_max_seconds Largest non-negative latency in seconds, 0 if none.
# TYPE perld_latency_max_seconds gauge
perld_latency_max_seconds{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 0.01
# HELP perld_invalid_latencies Records with a negative latency.
# TYPE perld_invalid_latencies gauge
perld_invalid_latencies{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 0
# HELP perld_lower_discards Records with a latency below the minimum latency.
# TYPE perld_lower_discards gauge
perld_lower_discards{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 0
# HELP perld_higher_discards Records with a latency above the maximum latency.
# TYPE perld_higher_discards gauge
perld_higher_discards{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval"} 0
# HELP perld_latency_seconds Exact latency at the percentile, in seconds.
# TYPE perld_latency_seconds gauge
perld_latency_seconds{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval",percentile="50"} 0.005
perld_latency_seconds{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval",percentile="99.9"} 0.01
# HELP perld_latency_percentile_records Records whose latency equals the latency at the percentile.
# TYPE perld_latency_percentile_records gauge
perld_latency_percentile_records{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval",percentile="50"} 1
perld_latency_percentile_records{storage="PerlBench",action="Writing",writers="1",readers="0",window="interval",percentile="99.9"} 1
)";

TEST(MetricsExpositionTest, MatchesGoldenTextForSmallSnapshot) {
  EXPECT_EQ(RenderExposition(SmallInput()), kGolden);
}

TEST(MetricsExpositionTest, BeforeAnyWindowOnlyTheResolutionIsExposed) {
  ExpositionInput in = SmallInput();
  in.interval.reset();
  in.unit = TimeUnit::kNs;
  EXPECT_EQ(RenderExposition(in),
            "# HELP perld_latency_resolution_seconds Latency time unit of the run; "
            "every latency is a multiple of it.\n"
            "# TYPE perld_latency_resolution_seconds gauge\n"
            "perld_latency_resolution_seconds{storage=\"PerlBench\",action=\"Writing\",writers="
            "\"1\",readers=\"0\"} 0.000000001\n");
}

TEST(MetricsExpositionTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  ExpositionInput in = SmallInput();
  in.labels.storage = "my \"quoted\"\\store\nnext";
  const std::string text = RenderExposition(in);
  EXPECT_NE(text.find("storage=\"my \\\"quoted\\\"\\\\store\\nnext\""), std::string::npos);
  // No raw newline inside any sample line: every line starts with '#' or 'perld_'.
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("perld_", 0) == 0) << line;
  }
}

TEST(MetricsExpositionTest, FormatsNanAndInfinities) {
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(0.5), "0.5");
  EXPECT_EQ(FormatSampleValue(1e21), "1e+21");
  ExpositionInput in = SmallInput();
  in.interval->seconds = std::numeric_limits<double>::quiet_NaN();
  in.total = ExpositionWindow{SmallSnapshot(), std::numeric_limits<double>::infinity()};
  const std::string text = RenderExposition(in);
  EXPECT_NE(text.find("window=\"interval\"} NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("perld_window_seconds{storage=\"PerlBench\",action=\"Writing\",writers="
                      "\"1\",readers=\"0\",window=\"total\"} +Inf\n"),
            std::string::npos)
      << text;
}

TEST(MetricsExpositionTest, ConvertsTimeUnitsToSecondsExactly) {
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

TEST(MetricsExpositionTest, IgnoresANonCLocale) {
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
  const std::string text = RenderExposition(SmallInput());
  std::locale::global(std::locale::classic());
  std::setlocale(LC_ALL, "C");
  EXPECT_EQ(text, kGolden) << "rendered under " << chosen;
}

TEST(MetricsExpositionTest, LatestMetricsKeepsARunningTotalUntilTheTotalWindowCloses) {
  LatestMetrics latest({"PerlBench", "Reading", 0, 2}, TimeUnit::kUs);
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
  const std::string prefix =
      "{storage=\"PerlBench\",action=\"Reading\",writers=\"0\",readers=\"2\",window=";
  EXPECT_NE(running.find("perld_records" + prefix + "\"interval\"} 4\n"), std::string::npos);
  EXPECT_NE(running.find("perld_records" + prefix + "\"total\"} 14\n"), std::string::npos);
  EXPECT_NE(running.find("perld_window_seconds" + prefix + "\"total\"} 3\n"), std::string::npos);
  EXPECT_NE(running.find("perld_latency_min_seconds" + prefix + "\"total\"} 0\n"),
            std::string::npos);
  EXPECT_NE(running.find("perld_latency_max_seconds" + prefix + "\"total\"} 0.00002\n"),
            std::string::npos);
  EXPECT_NE(running.find("perld_lower_discards" + prefix + "\"total\"} 1\n"), std::string::npos);
  // (55 + 45) us over 14 records.
  EXPECT_NE(running.find("perld_latency_average_seconds" + prefix + "\"total\"} " +
                         FormatSampleValue(100.0 / 14 * 1e3 / 1e9) + "\n"),
            std::string::npos)
      << running;
  // No exact whole-run percentiles yet.
  EXPECT_EQ(running.find("perld_latency_seconds" + prefix + "\"total\""), std::string::npos);
  EXPECT_NE(running.find("perld_latency_seconds" + prefix + "\"interval\",percentile=\"99.9\"}"),
            std::string::npos);

  LatencySnapshot total = SmallSnapshot();
  total.records = 14;
  latest.Publish(total, 3.5, /*total=*/true);
  const std::string closed = latest.Render();
  EXPECT_NE(closed.find("perld_window_seconds" + prefix + "\"total\"} 3.5\n"), std::string::npos);
  EXPECT_NE(
      closed.find("perld_latency_seconds" + prefix + "\"total\",percentile=\"50\"} 0.000005\n"),
      std::string::npos)
      << closed;
}

TEST(MetricsExpositionTest, PromtoolAcceptsTheText) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  ExpositionInput in = SmallInput();
  in.labels.storage = "odd \"name\"\\ with\nnewline";
  in.total = ExpositionWindow{SmallSnapshot(), std::numeric_limits<double>::infinity()};
  in.interval->seconds = std::numeric_limits<double>::quiet_NaN();
  for (const ExpositionInput& input : {SmallInput(), in, ExpositionInput{}}) {
    std::string report;
    EXPECT_EQ(PromtoolCheck(RenderExposition(input), &report), 0) << report;
    EXPECT_EQ(report, "");
  }
}

}  // namespace
}  // namespace perld::http
