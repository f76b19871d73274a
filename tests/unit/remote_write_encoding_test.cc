// Remote write's pure parts: the /metrics text turned into samples as a
// Prometheus scrape stores them, the hand-written WriteRequest decoded by the
// message generated from proto/prometheus/remote_write.proto after
// snappy::Uncompress, the bounded queue's drops, and the retry policy.
#include "daemon/remote_write/remote_write_encoding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <snappy.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "daemon/remote_write/exposition_samples.h"
#include "daemon/remote_write/retry_policy.h"
#include "daemon/remote_write/sample_queue.h"
#include "prometheus/remote_write.pb.h"

namespace perld::remote_write {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

constexpr char kText[] =
    "# HELP perld_run_latency_seconds Exact percentiles.\n"
    "# TYPE perld_run_latency_seconds summary\n"
    "perld_run_latency_seconds{run_id=\"7\",run=\"a \\\"b\\\"\\\\c\\nd\",source=\"bench\","
    "quantile=\"0.999\"} 0.000000997\n"
    "perld_run_latency_seconds_sum{run_id=\"7\",run=\"a \\\"b\\\"\\\\c\\nd\",source=\"bench\"} "
    "12.5\n"
    "perld_run_latency_seconds_count{run_id=\"7\",run=\"a \\\"b\\\"\\\\c\\nd\",source=\"bench\"} "
    "200000\n"
    "# TYPE perld_run_records_total counter\n"
    "perld_run_records_total{run_id=\"7\",run=\"x\",source=\"bench\"} 18446744073709551615\n"
    "\n"
    "perld_uptime_seconds 3.25\n"
    "perld_nan_gauge NaN\n"
    "perld_cpp_nan Nan\n"
    "perld_inf{le=\"+Inf\"} +Inf\n"
    "perld_minus_inf -inf\n"
    "not a sample line\n"
    "perld_bad_value{a=\"b\"} 12x\n";

std::map<std::string, std::string> LabelsOf(const prometheus::TimeSeries& ts) {
  std::map<std::string, std::string> out;
  for (const prometheus::Label& l : ts.labels()) out[l.name()] = l.value();
  return out;
}

prometheus::WriteRequest Decode(const std::string& body) {
  std::string raw;
  EXPECT_TRUE(snappy::Uncompress(body.data(), body.size(), &raw));
  prometheus::WriteRequest request;
  EXPECT_TRUE(request.ParseFromString(raw));
  return request;
}

TEST(RemoteWriteEncodingTest, ScrapeTextRoundTripsThroughTheGeneratedMessage) {
  ExpositionSamples series;
  std::vector<QueuedSample> samples;
  EXPECT_EQ(series.Collect(kText, 1'780'000'000'123, &samples), 2);  // two malformed lines
  ASSERT_EQ(samples.size(), 9u);
  const prometheus::WriteRequest request = Decode(SnappyBlock(EncodeWriteRequest(samples)));
  ASSERT_EQ(request.timeseries_size(), 9);
  const prometheus::TimeSeries& q = request.timeseries(0);
  // Sorted by name, __name__ included; escapes undone; quantile kept.
  std::vector<std::string> names;
  for (const prometheus::Label& l : q.labels()) names.push_back(l.name());
  EXPECT_THAT(names, ElementsAre("__name__", "quantile", "run", "run_id", "source"));
  EXPECT_THAT(LabelsOf(q), ElementsAre(Pair("__name__", "perld_run_latency_seconds"),
                                       Pair("quantile", "0.999"), Pair("run", "a \"b\"\\c\nd"),
                                       Pair("run_id", "7"), Pair("source", "bench")));
  ASSERT_EQ(q.samples_size(), 1);
  EXPECT_EQ(q.samples(0).value(), 0.000000997);  // the decimal, correctly rounded
  EXPECT_EQ(q.samples(0).timestamp(), 1'780'000'000'123);
  EXPECT_EQ(LabelsOf(request.timeseries(1)).at("__name__"), "perld_run_latency_seconds_sum");
  EXPECT_EQ(request.timeseries(1).samples(0).value(), 12.5);
  EXPECT_EQ(LabelsOf(request.timeseries(2)).at("__name__"), "perld_run_latency_seconds_count");
  EXPECT_EQ(request.timeseries(2).samples(0).value(), 200000);
  EXPECT_EQ(LabelsOf(request.timeseries(3)).at("__name__"), "perld_run_records_total");
  EXPECT_EQ(request.timeseries(3).samples(0).value(), 18446744073709551615.0);
  EXPECT_THAT(LabelsOf(request.timeseries(4)),
              ElementsAre(Pair("__name__", "perld_uptime_seconds")));
  EXPECT_TRUE(std::isnan(request.timeseries(5).samples(0).value()));
  EXPECT_TRUE(std::isnan(request.timeseries(6).samples(0).value()));
  EXPECT_EQ(request.timeseries(7).samples(0).value(), INFINITY);
  EXPECT_EQ(LabelsOf(request.timeseries(7)).at("le"), "+Inf");
  EXPECT_EQ(request.timeseries(8).samples(0).value(), -INFINITY);
}

TEST(RemoteWriteEncodingTest, SamplesOfOneSeriesShareItsTimeSeriesInOrder) {
  ExpositionSamples series;
  std::vector<QueuedSample> samples;
  series.Collect("a 1\nb{x=\"1\"} 2\n", 1000, &samples);
  series.Collect("a 0\nb{x=\"1\"} 4\n", 2000, &samples);
  // Interned: the same labels object for the same series.
  EXPECT_EQ(samples[0].series, samples[2].series);
  EXPECT_EQ(samples[1].series, samples[3].series);
  const prometheus::WriteRequest request = Decode(SnappyBlock(EncodeWriteRequest(samples)));
  ASSERT_EQ(request.timeseries_size(), 2);
  const prometheus::TimeSeries& a = request.timeseries(0);
  ASSERT_EQ(a.samples_size(), 2);
  EXPECT_EQ(a.samples(0).value(), 1);
  EXPECT_EQ(a.samples(0).timestamp(), 1000);
  EXPECT_EQ(a.samples(1).value(), 0);  // zero: the field is left out, decodes as 0
  EXPECT_EQ(a.samples(1).timestamp(), 2000);
  EXPECT_EQ(request.timeseries(1).samples(1).value(), 4);
}

TEST(RemoteWriteEncodingTest, SeriesNoLongerExposedLeaveTheInternTable) {
  ExpositionSamples series;
  std::vector<QueuedSample> samples;
  series.Collect("a 1\nb 2\n", 1, &samples);
  EXPECT_EQ(series.series(), 2u);
  series.Collect("b 3\n", 2, &samples);
  EXPECT_EQ(series.series(), 1u);
  // Queued samples keep their labels alive.
  EXPECT_EQ(Decode(SnappyBlock(EncodeWriteRequest(samples))).timeseries_size(), 2);
}

TEST(RemoteWriteEncodingTest, LabelsAreSortedByName) {
  const std::string labels = EncodeLabels({{"zeta", "1"}, {"__name__", "m"}, {"Alpha", "2"}});
  const std::string body = SnappyBlock(EncodeWriteRequest(
      std::vector<QueuedSample>{{std::make_shared<const std::string>(labels), 1.5, 5}}));
  const prometheus::WriteRequest request = Decode(body);
  ASSERT_EQ(request.timeseries_size(), 1);
  std::vector<std::string> names;
  for (const prometheus::Label& l : request.timeseries(0).labels()) names.push_back(l.name());
  EXPECT_THAT(names, ElementsAre("Alpha", "__name__", "zeta"));
}

TEST(RemoteWriteEncodingTest, ValuesParseAsPrometheusParsesThem) {
  double v = 0;
  EXPECT_TRUE(ParseSampleValue("0.1", &v));
  EXPECT_EQ(v, 0.1);
  EXPECT_TRUE(ParseSampleValue("1e-9", &v));
  EXPECT_EQ(v, 1e-9);
  EXPECT_TRUE(ParseSampleValue("+Inf", &v));
  EXPECT_EQ(v, INFINITY);
  EXPECT_TRUE(ParseSampleValue("-Inf", &v));
  EXPECT_EQ(v, -INFINITY);
  EXPECT_TRUE(ParseSampleValue("-3", &v));
  EXPECT_EQ(v, -3);
  for (const char* bad : {"", "x", "1.2.3", "--1", "0x10", "1 2"}) {
    EXPECT_FALSE(ParseSampleValue(bad, &v)) << bad;
  }
}

std::vector<QueuedSample> Numbered(int from, int n) {
  auto labels = std::make_shared<const std::string>(EncodeLabels({{"__name__", "x"}}));
  std::vector<QueuedSample> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back({labels, static_cast<double>(from + i), from + i});
  return out;
}

TEST(SampleQueueTest, FullQueueDropsTheOldestAndCountsThem) {
  SampleQueue queue(10);
  EXPECT_EQ(queue.Push(Numbered(0, 6)), 0u);
  EXPECT_EQ(queue.Push(Numbered(6, 6)), 2u);  // 0 and 1 go
  EXPECT_EQ(queue.size(), 10u);
  std::vector<QueuedSample> batch = queue.TakeBatch(4);
  ASSERT_EQ(batch.size(), 4u);
  EXPECT_EQ(batch.front().value, 2);
  EXPECT_EQ(queue.in_flight(), 4u);
  // The batch in flight keeps its room: new samples push out waiting ones.
  EXPECT_EQ(queue.Push(Numbered(12, 3)), 3u);
  EXPECT_EQ(queue.size(), 10u);
  queue.FinishBatch();
  batch = queue.TakeBatch(100);
  ASSERT_EQ(batch.size(), 6u);
  EXPECT_EQ(batch.front().value, 9);
  EXPECT_EQ(batch.back().value, 14);
  // More new samples than room: the oldest of them go too.
  EXPECT_EQ(queue.Push(Numbered(20, 7)), 3u);
  EXPECT_EQ(queue.waiting(), 4u);
  queue.FinishBatch();
  EXPECT_EQ(queue.Clear(), 4u);
  EXPECT_EQ(queue.size(), 0u);
}

TEST(RetryPolicyTest, ClassifiesStatuses) {
  EXPECT_EQ(Classify(200), Outcome::kSent);
  EXPECT_EQ(Classify(204), Outcome::kSent);
  EXPECT_EQ(Classify(0), Outcome::kRetry);
  EXPECT_EQ(Classify(429), Outcome::kRetry);
  EXPECT_EQ(Classify(500), Outcome::kRetry);
  EXPECT_EQ(Classify(503), Outcome::kRetry);
  EXPECT_EQ(Classify(400), Outcome::kDrop);
  EXPECT_EQ(Classify(401), Outcome::kDrop);
  EXPECT_EQ(Classify(404), Outcome::kDrop);
  EXPECT_EQ(Classify(301), Outcome::kDrop);
}

TEST(RetryPolicyTest, BackoffDoublesWithJitterUpToTheCapAndHonoursRetryAfter) {
  RetryBackoff backoff(100, 1000, 42);
  const int64_t expected_max[] = {100, 200, 400, 800, 1000, 1000};
  for (int64_t max : expected_max) {
    const int64_t d = backoff.NextDelayMs();
    EXPECT_GE(d, max / 2);
    EXPECT_LE(d, max);
  }
  EXPECT_GE(backoff.NextDelayMs(30'000), 30'000);
  EXPECT_EQ(backoff.NextDelayMs(10 * kMaxRetryAfterMs), kMaxRetryAfterMs);
  backoff.Reset();
  EXPECT_LE(backoff.NextDelayMs(), 100);
  EXPECT_EQ(ParseRetryAfterMs("7"), 7000);
  EXPECT_EQ(ParseRetryAfterMs(" 2 "), 2000);
  EXPECT_EQ(ParseRetryAfterMs("Wed, 21 Oct 2026 07:28:00 GMT"), -1);
  EXPECT_EQ(ParseRetryAfterMs("-1"), -1);
  EXPECT_EQ(ParseRetryAfterMs(""), -1);
}

}  // namespace
}  // namespace perld::remote_write
