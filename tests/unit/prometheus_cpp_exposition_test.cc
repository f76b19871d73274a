// prometheus-cpp as perld's exposition: http::RunsCollectable carries the
// same samples as perld's writer (run_metrics.h), and TextSerializer's number
// formatting -- the evidence for keeping perld's writer for the run families
// (tests/bench/PROMETHEUS.md). When prometheus-cpp changes how it prints
// numbers, the second test fails: re-run the A/B there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/http/metric_families.h"
#include "daemon/http/prometheus_text.h"
#include "daemon/http/run_metric_families.h"
#include "daemon/http/run_metrics.h"

namespace perld::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

RunMetrics NsRun(std::vector<double> percents, std::vector<int64_t> values) {
  RunMetrics run;
  run.identity.Add("run_id", "7").Add("run", "odd \"name\"\\ with\nnewline").Add("source", "bench");
  run.unit = TimeUnit::kNs;
  run.writers = 1;
  run.start_unix_seconds = 1700000000.5;
  LatencySnapshot s;
  s.records = s.valid = 10;
  s.bytes = 2048;
  s.total_latency = 55;
  s.min_latency = 1;
  s.max_latency = values.back();
  s.percents = std::move(percents);
  s.values = std::move(values);
  s.counts.assign(s.values.size(), 1);
  run.latest = ExpositionWindow{s, 2.0};
  run.total = ExpositionWindow{s, 2.0};
  return run;
}

std::string Writer(const RunMetrics& run) {
  PrometheusText out;
  WritePerldRunFamilies(std::span<const RunMetrics>(&run, 1), out);
  return out.Take();
}

std::string PrometheusCpp(const RunMetrics& run) {
  return FamiliesText(RunsCollectable(std::span<const RunMetrics>(&run, 1)).Collect());
}

// Series (name and labels, a quantile label as the double it parses to) -> value.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    std::string key = line.substr(0, space);
    if (const size_t q = key.find("quantile=\""); q != std::string::npos) {
      const size_t begin = q + 10;
      key.replace(begin, key.find('"', begin) - begin,
                  FormatSampleValue(std::strtod(&key[begin], nullptr)));
    }
    out[key] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

TEST(PrometheusCppExpositionTest, RunsCollectableCarriesTheWritersSamples) {
  const RunMetrics run = NsRun({50, 99.9}, {5, 10});
  const std::map<std::string, double> writer = Samples(Writer(run));
  EXPECT_GT(writer.size(), 20u);
  EXPECT_EQ(Samples(PrometheusCpp(run)), writer);
}

TEST(PrometheusCppExpositionTest, TextSerializerIsNotExactForPerldsIntegers) {
  RunMetrics run = NsRun({50, 99.75}, {997421, 4611686018427387904});
  run.total.snapshot.records = 12345678901234567;
  const std::string writer = Writer(run);
  const std::string cpp = PrometheusCpp(run);
  const std::string labels = R"(run_id="7",run="odd \"name\"\\ with\nnewline",source="bench")";
  // perld's writer: exact decimals of the integers, the quantile as configured.
  EXPECT_THAT(writer, HasSubstr("{" + labels + R"(,quantile="0.5"} 0.000997421)" + "\n"));
  EXPECT_THAT(writer,
              HasSubstr("{" + labels + R"(,quantile="0.9975"} 4611686018.427387904)" + "\n"));
  EXPECT_THAT(writer, HasSubstr("_records_total{" + labels + "} 12345678901234567\n"));
  // TextSerializer: 16 significant digits of a double.
  EXPECT_THAT(cpp, HasSubstr("{" + labels + R"(,quantile="0.5"} 0.0009974210000000001)" + "\n"));
  EXPECT_THAT(cpp, HasSubstr(R"(,quantile="0.9975000000000001"} 4611686018.427388)"
                             "\n"));
  EXPECT_THAT(cpp, HasSubstr("_records_total{" + labels + "} 1.234567890123457e+16\n"));
  EXPECT_THAT(cpp, Not(HasSubstr(R"(quantile="0.9975")")));
}

}  // namespace
}  // namespace perld::http
