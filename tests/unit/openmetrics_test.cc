// OpenMetrics for /metrics (daemon/http/openmetrics.h): Accept negotiation
// (Prometheus' own header, q values, wildcards, versions) and the conversion
// of 0.0.4 text -- counter suffixes and name clashes, # UNIT, _created from
// run and process start times, HELP escaping, empty HELP, NaN/Inf, timestamps,
// # EOF -- including a whole run exposition from perld's writer and from
// prometheus-cpp's (the A/B arm).
#include "daemon/http/openmetrics.h"

#include <gtest/gtest.h>

#include <string>

#include "daemon/http/metric_families.h"
#include "daemon/http/prometheus_text.h"
#include "daemon/http/run_metric_families.h"
#include "daemon/http/run_metrics.h"

namespace perld::http {
namespace {

constexpr char kPrometheusAccept[] =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

TEST(NegotiateExposition, PrometheusPrefersOpenMetrics) {
  EXPECT_EQ(NegotiateExposition(kPrometheusAccept), ExpositionFormat::kOpenMetrics100);
  EXPECT_EQ(NegotiateExposition("application/openmetrics-text"), ExpositionFormat::kOpenMetrics100);
  EXPECT_EQ(NegotiateExposition(" Application/OpenMetrics-Text ; Version=\"1.0.0\" ; q=0.9 , "
                                "text/plain;q=0.8"),
            ExpositionFormat::kOpenMetrics100);
}

TEST(NegotiateExposition, TextOtherwise) {
  EXPECT_EQ(NegotiateExposition(""), ExpositionFormat::kText004);
  EXPECT_EQ(NegotiateExposition("*/*"), ExpositionFormat::kText004);
  EXPECT_EQ(NegotiateExposition("text/plain;version=0.0.4"), ExpositionFormat::kText004);
  // Text preferred by q.
  EXPECT_EQ(NegotiateExposition("application/openmetrics-text;q=0.5,text/plain;q=0.9"),
            ExpositionFormat::kText004);
  // q=0: not acceptable.
  EXPECT_EQ(NegotiateExposition("application/openmetrics-text;q=0"), ExpositionFormat::kText004);
  // Another OpenMetrics version only.
  EXPECT_EQ(NegotiateExposition("application/openmetrics-text;version=0.0.1"),
            ExpositionFormat::kText004);
  EXPECT_EQ(NegotiateExposition("application/openmetrics-text;q=bad"), ExpositionFormat::kText004);
  // A tie goes to OpenMetrics.
  EXPECT_EQ(NegotiateExposition("text/plain,application/openmetrics-text"),
            ExpositionFormat::kOpenMetrics100);
}

TEST(ToOpenMetrics, CountersUnitsCreatedAndEof) {
  const std::string text =
      "# HELP perld_start_time_seconds Start.\n"
      "# TYPE perld_start_time_seconds gauge\n"
      "perld_start_time_seconds 1000.5\n"
      "# HELP perld_run_start_time_seconds Run start.\n"
      "# TYPE perld_run_start_time_seconds gauge\n"
      "perld_run_start_time_seconds{run_id=\"7\",run=\"a,b\",source=\"bench\"} 2000.25\n"
      "# HELP perld_run_bytes_total Bytes \"so far\" \\ x\\nnext.\n"
      "# TYPE perld_run_bytes_total counter\n"
      "perld_run_bytes_total{run_id=\"7\",run=\"a,b\",source=\"bench\"} 42\n"
      "# HELP SBK_Writing_Records_total Records.\n"
      "# TYPE SBK_Writing_Records_total counter\n"
      "SBK_Writing_Records_total{run_id=\"7\",run=\"a,b\",source=\"bench\",action=\"W\"} 3\n"
      "# HELP perld_events Events.\n"
      "# TYPE perld_events counter\n"
      "perld_events{kind=\"x\"} 5\n"
      "# HELP perld_omitted Omitted now.\n"
      "# TYPE perld_omitted gauge\n"
      "perld_omitted 0\n"
      "# HELP perld_omitted_total Omitted over scrapes.\n"
      "# TYPE perld_omitted_total counter\n"
      "perld_omitted_total 0\n"
      "# HELP perld_run_latency_seconds Latency.\n"
      "# TYPE perld_run_latency_seconds summary\n"
      "perld_run_latency_seconds{run_id=\"7\",run=\"a,b\",source=\"bench\",quantile=\"0.5\"} "
      "0.001\n"
      "perld_run_latency_seconds_sum{run_id=\"7\",run=\"a,b\",source=\"bench\"} 0.5\n"
      "perld_run_latency_seconds_count{run_id=\"7\",run=\"a,b\",source=\"bench\"} 10\n"
      "\n"
      "# a free comment\n"
      "# HELP perld_empty \n"
      "# TYPE perld_empty untyped\n"
      "perld_empty Nan 1500\n"
      "# TYPE perld_memory_bytes gauge\n"
      "perld_memory_bytes{l=\"q\\\"\\n\\\\\"} inf\n";
  const std::string expected =
      "# HELP perld_start_time_seconds Start.\n"
      "# TYPE perld_start_time_seconds gauge\n"
      "# UNIT perld_start_time_seconds seconds\n"
      "perld_start_time_seconds 1000.5\n"
      "# HELP perld_run_start_time_seconds Run start.\n"
      "# TYPE perld_run_start_time_seconds gauge\n"
      "# UNIT perld_run_start_time_seconds seconds\n"
      "perld_run_start_time_seconds{run_id=\"7\",run=\"a,b\",source=\"bench\"} 2000.25\n"
      "# HELP perld_run_bytes Bytes \\\"so far\\\" \\\\ x\\nnext.\n"
      "# TYPE perld_run_bytes counter\n"
      "# UNIT perld_run_bytes bytes\n"
      "perld_run_bytes_total{run_id=\"7\",run=\"a,b\",source=\"bench\"} 42\n"
      "perld_run_bytes_created{run_id=\"7\",run=\"a,b\",source=\"bench\"} 2000.25\n"
      "# HELP SBK_Writing_Records Records.\n"
      "# TYPE SBK_Writing_Records counter\n"
      "SBK_Writing_Records_total{run_id=\"7\",run=\"a,b\",source=\"bench\",action=\"W\"} 3\n"
      "SBK_Writing_Records_created{run_id=\"7\",run=\"a,b\",source=\"bench\",action=\"W\"} "
      "2000.25\n"
      "# HELP perld_events Events.\n"
      "# TYPE perld_events counter\n"
      "perld_events_total{kind=\"x\"} 5\n"
      "perld_events_created{kind=\"x\"} 1000.5\n"
      "# HELP perld_omitted Omitted now.\n"
      "# TYPE perld_omitted gauge\n"
      "perld_omitted 0\n"
      "# HELP perld_omitted_total Omitted over scrapes.\n"
      "# TYPE perld_omitted_total unknown\n"
      "perld_omitted_total 0\n"
      "# HELP perld_run_latency_seconds Latency.\n"
      "# TYPE perld_run_latency_seconds summary\n"
      "# UNIT perld_run_latency_seconds seconds\n"
      "perld_run_latency_seconds{run_id=\"7\",run=\"a,b\",source=\"bench\",quantile=\"0.5\"} "
      "0.001\n"
      "perld_run_latency_seconds_sum{run_id=\"7\",run=\"a,b\",source=\"bench\"} 0.5\n"
      "perld_run_latency_seconds_count{run_id=\"7\",run=\"a,b\",source=\"bench\"} 10\n"
      "perld_run_latency_seconds_created{run_id=\"7\",run=\"a,b\",source=\"bench\"} 2000.25\n"
      "# TYPE perld_empty unknown\n"
      "perld_empty NaN 1.5\n"
      "# TYPE perld_memory_bytes gauge\n"
      "# UNIT perld_memory_bytes bytes\n"
      "perld_memory_bytes{l=\"q\\\"\\n\\\\\"} +Inf\n"
      "# EOF\n";
  EXPECT_EQ(ToOpenMetrics(text), expected);
}

TEST(ToOpenMetrics, EmptyTextIsJustEof) { EXPECT_EQ(ToOpenMetrics(""), "# EOF\n"); }

TEST(ToOpenMetrics, NoStartTimesNoCreated) {
  EXPECT_EQ(ToOpenMetrics("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"),
            "# HELP a A.\n# TYPE a counter\na_total 1\n# EOF\n");
}

// A run with one window of 10 records and two percentiles.
RunMetrics SmallRun() {
  RunMetrics run;
  run.id = 3;
  run.identity.Add("run_id", "3").Add("run", "r\"1").Add("source", "bench");
  run.start_unix_seconds = 1700000000.5;
  LatencySnapshot s;
  s.records = 10;
  s.valid = 10;
  s.bytes = 1000;
  s.total_latency = 55;
  s.min_latency = 1;
  s.max_latency = 10;
  s.percents = {50, 99.9};
  s.values = {5, 10};
  s.counts = {1, 1};
  run.latest = ExpositionWindow{s, 2.0};
  run.total = ExpositionWindow{s, 2.0};
  return run;
}

// Every sample belongs to the family declared last before it; no counter
// family ends in _total.
void ExpectSamplesInFamilies(const std::string& om) {
  std::string family;
  size_t begin = 0;
  while (begin < om.size()) {
    const size_t end = om.find('\n', begin);
    const std::string line = om.substr(begin, end - begin);
    begin = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_EQ(line.find("_total counter"), std::string::npos) << line;
    } else if (!line.empty() && line[0] != '#') {
      EXPECT_EQ(line.rfind(family, 0), 0u) << line << " outside " << family;
    }
  }
}

// A whole run from perld's writer: every counter family is named without
// `_total`, every sample of it with; every family's metadata precedes its
// samples; one # EOF, last.
TEST(ToOpenMetrics, PerldRunExposition) {
  RunMetrics run = SmallRun();
  PrometheusText text;
  WriteRunFamilies({&run, 1}, config::MetricNames::kBoth, text);
  const std::string om = ToOpenMetrics(text.text());
  ASSERT_GE(om.size(), 6u);
  EXPECT_EQ(om.substr(om.size() - 6), "# EOF\n");
  EXPECT_EQ(om.find("# EOF"), om.size() - 6);
  EXPECT_NE(om.find("# TYPE perld_run_records counter\n"), std::string::npos);
  EXPECT_NE(om.find("perld_run_records_total{run_id=\"3\",run=\"r\\\"1\",source=\"bench\"} 10\n"
                    "perld_run_records_created{run_id=\"3\",run=\"r\\\"1\",source=\"bench\"} "
                    "1700000000.5\n"),
            std::string::npos);
  EXPECT_NE(om.find("# UNIT perld_run_latency_seconds seconds\n"), std::string::npos);
  EXPECT_NE(om.find("# TYPE SBK_Writing_Records counter\n"), std::string::npos);
  EXPECT_EQ(om.find("\n\n"), std::string::npos);
  EXPECT_EQ(om.find("_total counter"), std::string::npos);
  ExpectSamplesInFamilies(om);
}

// The prometheus-cpp arm of the A/B (RunsCollectable, TextSerializer's
// order: _count, _sum, then the quantiles) converts alike.
TEST(ToOpenMetrics, PrometheusCppRunExposition) {
  RunMetrics run = SmallRun();
  const std::string om = ToOpenMetrics(FamiliesText(RunsCollectable({&run, 1}).Collect()));
  EXPECT_EQ(om.find("# EOF"), om.size() - 6);
  EXPECT_NE(om.find("# TYPE perld_run_records counter\n"), std::string::npos);
  EXPECT_NE(om.find("perld_run_records_created{run_id=\"3\",run=\"r\\\"1\",source=\"bench\"} "
                    "1700000000.5\n"),
            std::string::npos);
  EXPECT_NE(om.find("perld_run_latency_seconds_created{"), std::string::npos);
  EXPECT_EQ(om.find("\n\n"), std::string::npos);
  ExpectSamplesInFamilies(om);
}

}  // namespace
}  // namespace perld::http
