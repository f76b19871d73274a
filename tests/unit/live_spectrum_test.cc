// The live page's percentile spectrum (daemon/http/live_api.h): the ladder
// of percents (SpectrumPercents) and GET /api/spectrum's answers over a
// registry -- exact latencies by the index rule, trimmed to the records'
// precision, a range through a reader, no point from an inexact total, and
// the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/json_writer.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/run_total.h"
#include "daemon/http/live_api.h"
#include "daemon/runs/run_registry.h"

namespace perld::http {
namespace {

using runs::RunId;
using runs::RunInfo;
using runs::RunRegistry;
using runs::RunState;
using runs::WindowRecord;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(SpectrumPercentsTest, NoRecordsNoPercents) {
  EXPECT_TRUE(SpectrumPercents(0).empty());
  EXPECT_TRUE(SpectrumPercents(-5).empty());
  EXPECT_EQ(SpectrumPercents(1), (std::vector<double>{0, 100}));
}

TEST(SpectrumPercentsTest, TenShortDecimalsADecadeWhileOneOverTailFits) {
  const std::vector<double> ten = {0, 20, 37.5, 50, 60, 68.75, 75, 80, 84.375, 87.5, 90, 100};
  EXPECT_EQ(SpectrumPercents(10), ten);
  EXPECT_EQ(SpectrumPercents(11), ten);
  std::vector<double> nine(ten.begin(), ten.end() - 2);
  nine.push_back(100);
  EXPECT_EQ(SpectrumPercents(9), nine) << "1/(1-0.9) = 10 > 9 records";
  // 10^k records: 10 rungs a decade, the last at 1/(1-p) = 10^k, then 100.
  for (int k = 1; k <= 12; ++k) {
    const auto valid = static_cast<int64_t>(std::pow(10.0, k));
    const std::vector<double> p = SpectrumPercents(valid);
    ASSERT_EQ(p.size(), static_cast<size_t>(10 * k + 2)) << k;
    EXPECT_EQ(p.back(), 100);
    EXPECT_NEAR(1 / (1 - p[p.size() - 2] / 100), static_cast<double>(valid), valid * 1e-3) << k;
  }
  const std::vector<double> p = SpectrumPercents(10'000);
  EXPECT_EQ(p[p.size() - 2], 99.99);
  EXPECT_EQ(p[p.size() - 3], 99.9875);
  EXPECT_EQ(p[p.size() - 4], 99.984375);
}

TEST(SpectrumPercentsTest, TheFullLadderIsValidAscendingAndExactDecimals) {
  const std::vector<double> full = SpectrumPercents(kMax);
  ASSERT_EQ(full.size(), 131u);  // 13 decades, then 100
  EXPECT_EQ(full, SpectrumPercents(1'000'000'000'000'000));
  for (size_t i = 1; i < full.size(); ++i) EXPECT_LT(full[i - 1], full[i]) << i;
  EXPECT_TRUE(PercentileSet::Create(full).ok());
  // The double nearest each short decimal: what perlctl --p parses.
  for (double want : {50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 99.84375, 99.99984375, 99.9999999999,
                      99.9999999999875}) {
    EXPECT_NE(std::find(full.begin(), full.end(), want), full.end()) << want;
  }
  const double m[] = {1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.4, 8};
  for (size_t i = 0; i + 1 < full.size(); ++i) {
    const size_t decade = i / 10;
    const double x = m[i % 10] * std::pow(10.0, static_cast<double>(decade));
    EXPECT_NEAR(1 / (1 - full[i] / 100), x, x * 1e-3) << i;
  }
}

RunInfo Info(RunId id, const std::string& name, RunState state = RunState::kRunning) {
  RunInfo info;
  info.id = id;
  info.spec.name = name;
  info.spec.latency = LatencyConfig::ForUnit(TimeUnit::kUs);
  info.spec.latency.percentiles = {50, 99};
  info.state = state;
  info.start_unix_ms = 1000;
  return info;
}

// A periodic window with one record at each latency lo..hi.
WindowRecord Window(RunId id, int64_t seq, int64_t lo, int64_t hi) {
  WindowRecord w;
  w.run_id = id;
  w.kind = WindowRecord::Kind::kPeriodic;
  w.seq = seq;
  w.seconds = 1;
  w.start_unix_ms = 1000 * seq;
  w.end_unix_ms = 1000 * (seq + 1);
  LatencySnapshot& s = w.snapshot;
  s.records = s.valid = hi - lo + 1;
  for (int64_t v = lo; v <= hi; ++v) {
    s.total_latency += v;
    w.distribution.push_back({v, 1});
  }
  s.min_latency = lo;
  s.max_latency = hi;
  return w;
}

HttpRequest Get(std::map<std::string, std::string> params) {
  HttpRequest r;
  r.method = "GET";
  r.path = "/api/spectrum";
  r.params = std::move(params);
  return r;
}

bool Has(const std::string& body, const std::string& part) {
  return body.find(part) != std::string::npos;
}

TEST(SpectrumJsonTest, TheTotalsExactLatencyAtEachRung) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(1, "one"));
  registry.AddWindow(Window(1, 1, 1, 600));
  registry.AddWindow(Window(1, 2, 601, 1000));
  const HttpResponse r = SpectrumJson(registry, nullptr, Get({{"run", "one"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string& b = r.body;
  EXPECT_TRUE(Has(b, R"("run":1,"name":"one","unit":"us","scope":"total","final":false)")) << b;
  EXPECT_TRUE(Has(b, R"("records":1000,"validLatencyRecords":1000,"exact":true,"reason":"")")) << b;
  EXPECT_TRUE(Has(b, R"("min":1,"max":1000,"avg":500.5)")) << b;
  // Latencies 1..1000 once each: index floor(1000 p / 100), latency index + 1.
  EXPECT_TRUE(Has(b, R"("percentiles":{"50":501,"90":901,"99":991,"99.9":1000,"99.99":1000})"))
      << b;
  std::string points = R"("points":[)";
  const std::vector<double> ladder = SpectrumPercents(1000);
  ASSERT_EQ(ladder.size(), 32u);
  for (size_t i = 0; i < ladder.size(); ++i) {
    const int64_t index = std::min<int64_t>(static_cast<int64_t>(1000 * (ladder[i] / 100.0)), 999);
    absl::StrAppend(&points, i ? "," : "", R"({"percent":)", json::ShortestDouble(ladder[i]),
                    R"(,"latency":)", index + 1, "}");
  }
  EXPECT_TRUE(Has(b, points + "]}")) << b << "\nwant " << points;
  EXPECT_TRUE(Has(b, R"({"percent":99.9,"latency":1000},{"percent":100,"latency":1000}]})")) << b;
  // By id too.
  EXPECT_EQ(SpectrumJson(registry, nullptr, Get({{"id", "1"}})).body, b);
}

TEST(SpectrumJsonTest, ARangeFromTheReaderAndItsErrors) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(2, "two"));
  registry.AddWindow(Window(2, 1, 1, 100));
  registry.AddWindow(Window(2, 2, 101, 110));
  SpectrumRange asked;
  int calls = 0;
  WindowRangeReader reader =
      [&](RunId id, const SpectrumRange& range) -> absl::StatusOr<std::vector<WindowRecord>> {
    ++calls;
    asked = range;
    if (id != 2) return absl::NotFoundError("no such run");
    if (range.first_window > 2) return std::vector<WindowRecord>{};
    return std::vector<WindowRecord>{Window(2, 2, 101, 110)};
  };
  HttpResponse r = SpectrumJson(registry, reader, Get({{"run", "2"}, {"windows", "2-2"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(asked.first_window, 2);
  EXPECT_EQ(asked.last_window, 2);
  EXPECT_TRUE(Has(r.body, R"("scope":"range","final":false,"firstWindow":2,"lastWindow":2,)"
                          R"("windows":1,"startUnixMs":2000,"endUnixMs":3000,"seconds":1,)"
                          R"("records":10,"validLatencyRecords":10,"exact":true)"))
      << r.body;
  EXPECT_TRUE(Has(r.body, R"("min":101,"max":110,)")) << r.body;
  EXPECT_TRUE(Has(r.body, R"({"percent":90,"latency":110},{"percent":100,"latency":110}]})"))
      << r.body;

  r = SpectrumJson(registry, reader, Get({{"run", "2"}, {"from", "1500"}, {"to", "9000"}}));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(asked.first_window, 0);
  EXPECT_EQ(asked.last_window, 0);
  EXPECT_EQ(asked.from_unix_ms, 1500);
  EXPECT_EQ(asked.to_unix_ms, 9000);
  r = SpectrumJson(registry, reader, Get({{"run", "2"}, {"windows", "2-"}}));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(asked.last_window, 0);

  const int before = calls;
  for (const char* bad : {"x", "0-3", "3-1", "-", "1-2-3", "-0"}) {
    r = SpectrumJson(registry, reader, Get({{"run", "2"}, {"windows", bad}}));
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_TRUE(Has(r.body, R"({"error":")")) << r.body;
  }
  EXPECT_EQ(SpectrumJson(registry, reader, Get({{"run", "2"}, {"from", "-1"}})).status, 400);
  EXPECT_EQ(SpectrumJson(registry, reader, Get({{"run", "2"}, {"from", "9"}, {"to", "5"}})).status,
            400);
  EXPECT_EQ(calls, before) << "malformed ranges never reach the store";
  // Nothing stored in the range: 404; no state directory: 409.
  EXPECT_EQ(SpectrumJson(registry, reader, Get({{"run", "2"}, {"windows", "5-"}})).status, 404);
  r = SpectrumJson(registry, nullptr, Get({{"run", "2"}, {"windows", "1-2"}}));
  EXPECT_EQ(r.status, 409);
  EXPECT_TRUE(Has(r.body, "state directory")) << r.body;
}

TEST(SpectrumJsonTest, UnknownMalformedEmptyAndInexact) {
  RunRegistry registry(config::RetentionConfig{});
  EXPECT_EQ(SpectrumJson(registry, nullptr, Get({{"run", "nope"}})).status, 404);
  EXPECT_EQ(SpectrumJson(registry, nullptr, Get({{"id", "9"}})).status, 404);
  EXPECT_EQ(SpectrumJson(registry, nullptr, Get({{"id", "x"}})).status, 400);
  EXPECT_EQ(SpectrumJson(registry, nullptr, Get({})).status, 400);

  registry.AddRunning(Info(3, "empty"));
  HttpResponse r = SpectrumJson(registry, nullptr, Get({{"run", "3"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Has(r.body, R"("validLatencyRecords":0,"exact":true)")) << r.body;
  EXPECT_TRUE(Has(r.body, R"("points":[]})")) << r.body;

  // A final total that is not exact: its counters, the reason, no point.
  WindowRecord total = Window(4, 1, 1, 100);
  total.kind = WindowRecord::Kind::kTotal;
  total.exact_total = false;
  registry.Restore(Info(4, "wide", RunState::kFinished), {}, total);
  r = SpectrumJson(registry, nullptr, Get({{"run", "wide"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Has(r.body, R"("final":true)")) << r.body;
  EXPECT_TRUE(Has(r.body, absl::StrCat(R"("exact":false,"reason":")", kInexactTotalReason)))
      << r.body;
  EXPECT_TRUE(Has(r.body, R"("min":1,"max":100,)")) << r.body;
  EXPECT_TRUE(Has(r.body, R"("percentiles":null,"points":[]})")) << r.body;
}

}  // namespace
}  // namespace perld::http
