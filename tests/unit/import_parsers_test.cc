// The parsers of `perlctl import` (client/perlctl/import_source.h): exact
// decimal scaling and its rounding rule, fio latency log lines (directions,
// refused lines), k6 JSON lines (Metric/Point, a metric that is not a trend
// of time refused, malformed JSON), and ReadSamples' FILE:LINE errors over
// real files. k6 is not installed here: its lines are built from k6's
// documented JSON output format (grafana.com/docs/k6, "Results output /
// JSON"), as the integration test's are.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "client/perlctl/decimal_scale.h"
#include "client/perlctl/fio_log.h"
#include "client/perlctl/import_source.h"
#include "client/perlctl/k6_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace perld::perlctl {
namespace {

using ::testing::HasSubstr;

ScaledValue Scaled(const char* text, int shift) {
  absl::StatusOr<ScaledValue> v = ScaleDecimal(text, shift);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status();
  return v.ok() ? *v : ScaledValue{-1, false};
}

TEST(DecimalScaleTest, ExactWhenTheUnitKeepsEveryDigit) {
  // k6's milliseconds with nanosecond digits, at ns: exact.
  EXPECT_EQ(Scaled("459.865729", 6).value, 459865729);
  EXPECT_FALSE(Scaled("459.865729", 6).rounded);
  EXPECT_EQ(Scaled("12.5", 3).value, 12500);
  EXPECT_FALSE(Scaled("12.500000", 3).rounded);  // trailing zeros drop nothing
  EXPECT_EQ(Scaled("0", 6).value, 0);
  EXPECT_EQ(Scaled("-0", 6).value, 0);
  EXPECT_EQ(Scaled("-0.000", 6).value, 0);
  EXPECT_EQ(Scaled("1e-06", 6).value, 1);  // Go's JSON spelling of 1 ns in ms
  EXPECT_EQ(Scaled("1.5E3", 0).value, 1500);
  EXPECT_EQ(Scaled("2e+2", 0).value, 200);
  EXPECT_EQ(Scaled("273531", 0).value, 273531);  // fio ns at ns
  EXPECT_EQ(Scaled("273000", -3).value, 273);
  EXPECT_FALSE(Scaled("273000", -3).rounded);
  EXPECT_EQ(Scaled("4611686018427387903", 0).value, kMaxScaledValue);
  EXPECT_EQ(Scaled("0.004611686018427387903", 21).value, kMaxScaledValue);
}

TEST(DecimalScaleTest, RoundsToTheNearestHalvesUpAndSaysSo) {
  const ScaledValue us = Scaled("459.865729", 3);
  EXPECT_EQ(us.value, 459866);
  EXPECT_TRUE(us.rounded);
  EXPECT_EQ(Scaled("459.865429", 3).value, 459865);
  EXPECT_EQ(Scaled("12.5", 0).value, 13);  // a half goes up
  EXPECT_TRUE(Scaled("12.5", 0).rounded);
  EXPECT_EQ(Scaled("12.4999999", 0).value, 12);
  EXPECT_EQ(Scaled("0.0005", 3).value, 1);
  EXPECT_EQ(Scaled("0.0004999", 3).value, 0);
  EXPECT_TRUE(Scaled("0.0004999", 3).rounded);
  EXPECT_EQ(Scaled("1e-07", 6).value, 0);
  EXPECT_TRUE(Scaled("1e-07", 6).rounded);
  EXPECT_EQ(Scaled("5e-07", 6).value, 1);
  EXPECT_EQ(Scaled("273531", -3).value, 274);  // fio ns at us
  EXPECT_EQ(Scaled("499", -3).value, 0);
  EXPECT_EQ(Scaled("500", -3).value, 1);
  EXPECT_EQ(Scaled("1e-999999999", 0).value, 0);
  // Rounding up into the next power of ten.
  EXPECT_EQ(Scaled("9.9999996", 6).value, 10000000);
}

TEST(DecimalScaleTest, RefusesWhatIsNotAnImportableNumber) {
  for (const char* bad : {"", "-", "abc", "01", "1.", ".5", "1e", "1e+", "+1", "1 ", "0x10",
                          "1.2.3", "NaN", "Infinity"}) {
    EXPECT_FALSE(ScaleDecimal(bad, 0).ok()) << "'" << bad << "'";
  }
  EXPECT_THAT(std::string(ScaleDecimal("-1.5", 0).status().message()), HasSubstr("negative"));
  EXPECT_THAT(std::string(ScaleDecimal("4611686018427387904", 0).status().message()),
              HasSubstr("too large"));
  EXPECT_FALSE(ScaleDecimal("1e30", 0).ok());
  EXPECT_FALSE(ScaleDecimal("1e999999999", 0).ok());
  // 2^62 - 1 rounded up would pass the bound.
  EXPECT_FALSE(ScaleDecimal("4611686018427387903.5", 0).ok());
}

TEST(FioLogTest, ParsesEachLayoutOfFio3) {
  // fio 3.33 without log_offset: time, value, direction, block size, priority.
  absl::StatusOr<FioLogEntry> e = ParseFioLogLine("2, 345418, 0, 4096, 0");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->time_ms, 2);
  EXPECT_EQ(e->latency_ns, 345418);
  EXPECT_EQ(std::string(e->latency), "345418");
  EXPECT_EQ(e->direction, 0);
  EXPECT_EQ(e->block_size, 4096);
  // log_offset=1: offset, then priority.
  e = ParseFioLogLine("3, 7384, 1, 4096, 1523712, 0\r");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->direction, 1);
  EXPECT_EQ(e->latency_ns, 7384);
  // The four columns the HOWTO requires, and a trim.
  e = ParseFioLogLine("10,99,2,65536");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->direction, 2);
  EXPECT_EQ(e->block_size, 65536);
  // A sync carries no block.
  e = ParseFioLogLine("10, 99, 3, 0, 0");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->direction, 3);
  EXPECT_STREQ(FioDirectionName(0), "read");
  EXPECT_STREQ(FioDirectionName(1), "write");
  EXPECT_STREQ(FioDirectionName(2), "trim");
  EXPECT_STREQ(FioDirectionName(3), "sync");
}

TEST(FioLogTest, RefusesLinesThatAreNotOneIo) {
  const auto why = [](const char* line) {
    absl::StatusOr<FioLogEntry> e = ParseFioLogLine(line);
    EXPECT_FALSE(e.ok()) << line;
    return std::string(e.status().message());
  };
  EXPECT_THAT(why("1, 2, 3"), HasSubstr("3 columns"));
  EXPECT_THAT(why("1, 2, 0, 4096, 0, 0, 0, 0, 0"), HasSubstr("9 columns"));
  EXPECT_THAT(why("1, 2.5, 0, 4096, 0"), HasSubstr("column 2 (latency)"));
  EXPECT_THAT(why("1, -2, 0, 4096, 0"), HasSubstr("column 2 (latency)"));
  EXPECT_THAT(why("x, 2, 0, 4096, 0"), HasSubstr("column 1 (time)"));
  EXPECT_THAT(why("1, 2, 4, 4096, 0"), HasSubstr("data direction"));
  EXPECT_THAT(why("1, 2, 0, 0, 0"), HasSubstr("log_avg_msec"));  // a windowed log
  EXPECT_THAT(why("1, 2, 0, 4096, z"), HasSubstr("column 5"));
  EXPECT_THAT(why("1, 2, 0, 4294967296, 0"), HasSubstr("2^31"));
  EXPECT_THAT(why(""), HasSubstr("columns"));
  EXPECT_TRUE(FioBlankLine(""));
  EXPECT_TRUE(FioBlankLine(" \r"));
  EXPECT_FALSE(FioBlankLine("0"));
}

TEST(FioLogTest, RefusesBandwidthAndIopsLogsByName) {
  EXPECT_FALSE(FioLogNameProblem("/tmp/job_lat.1.log").has_value());
  EXPECT_FALSE(FioLogNameProblem("job_clat.2.log").has_value());
  ASSERT_TRUE(FioLogNameProblem("/tmp/x/job_bw.1.log").has_value());
  EXPECT_THAT(*FioLogNameProblem("/tmp/x/job_bw.1.log"), HasSubstr("bw log"));
  EXPECT_THAT(*FioLogNameProblem("job_iops.1.log"), HasSubstr("iops log"));
}

TEST(FioLogTest, OtherBlanksAndEdgeValuesAsBefore) {
  // What fio writes and what only the general path takes (other ASCII
  // blanks, a '\r' inside a column) give the same entry.
  for (const char* line : {"3, 7384, 1, 4096", "3,\v7384 ,\f1,4096\t", "3\r, 7384,1 ,4096\r"}) {
    absl::StatusOr<FioLogEntry> e = ParseFioLogLine(line);
    ASSERT_TRUE(e.ok()) << line << ": " << e.status();
    EXPECT_EQ(e->time_ms, 3) << line;
    EXPECT_EQ(e->latency_ns, 7384) << line;
    EXPECT_EQ(std::string(e->latency), "7384") << line;
    EXPECT_EQ(e->direction, 1) << line;
    EXPECT_EQ(e->block_size, 4096) << line;
  }
  // 18 digits, 8 columns, the largest block size, a sync of block size 0.
  absl::StatusOr<FioLogEntry> e =
      ParseFioLogLine("1, 123456789012345678, 0, 2147483647, 0, 0, 0, 0");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->latency_ns, 123456789012345678);
  EXPECT_EQ(e->block_size, 2147483647);
  EXPECT_TRUE(ParseFioLogLine("\t1\t,\t2\t,\t3\t,\t0\t").ok());
}

TEST(FioLogTest, RefusesEveryMalformedColumnByName) {
  const auto why = [](const char* line) {
    absl::StatusOr<FioLogEntry> e = ParseFioLogLine(line);
    EXPECT_FALSE(e.ok()) << line;
    return std::string(e.status().message());
  };
  EXPECT_THAT(why("1,,0,4096"), HasSubstr("column 2 (latency): '' is not"));
  EXPECT_THAT(why("1, 2 3, 0, 4096"), HasSubstr("column 2 (latency): '2 3' is not"));
  EXPECT_THAT(why("1, 1234567890123456789, 0, 4096"), HasSubstr("column 2 (latency)"));
  EXPECT_THAT(why("1, 2, 0, 4096,"), HasSubstr("column 5: '' is not"));
  EXPECT_THAT(why("1, 2, 0, 4096, 0, 0, 0, 0,"), HasSubstr("9 columns"));
  EXPECT_THAT(why("1, 2, 0, 4096, 0, 0, 0, 0, 0, 0, 0"), HasSubstr("11 columns"));
  EXPECT_THAT(why("1, 2, 0, 2147483648"), HasSubstr("2^31"));
  EXPECT_THAT(why("1, 2, 1, 0"), HasSubstr("log_avg_msec"));
  EXPECT_THAT(why("1, 2, 9, 0"), HasSubstr("column 3 (data direction): 9"));
  EXPECT_THAT(why("1, 2, 0, +4096"), HasSubstr("column 4 (block size)"));
  EXPECT_THAT(why("1, 2\n, 0, 4096, x"), HasSubstr("column 5"));  // '\n' is a blank there
}

TEST(JsonTest, ParsesStrictJson) {
  absl::StatusOr<JsonValue> v =
      ParseJson(R"( {"a":[1,-2.5e3,true,false,null],"s":"\u00e9\ud83d\ude00\n\"","o":{}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_NE(v->Find("a"), nullptr);
  ASSERT_EQ(v->Find("a")->items.size(), 5u);
  EXPECT_EQ(v->Find("a")->items[1].text, "-2.5e3");  // numbers keep their text
  EXPECT_EQ(v->Find("s")->text, "\xc3\xa9\xf0\x9f\x98\x80\n\"");
  EXPECT_EQ(v->Find("o")->type, JsonValue::Type::kObject);
  EXPECT_EQ(v->Find("missing"), nullptr);
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\" 1}", "[1,]", "{\"a\":1,}", "01", "1.",
                          "\"\\x\"", "\"\\ud800\"", "tru", "{} x", "\"a\tb\"", "[1 2]"}) {
    EXPECT_FALSE(ParseJson(bad).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseJson("{\"a\":1,}").status().message()), HasSubstr("column 8"));
  EXPECT_FALSE(ParseJson(std::string(65, '[') + std::string(65, ']')).ok());
  EXPECT_TRUE(ParseJson(std::string(64, '[') + std::string(64, ']')).ok());
}

// k6's documented lines (grafana.com/docs/k6/latest/results-output/real-time/json).
constexpr char kVusMetric[] =
    R"({"type":"Metric","data":{"type":"gauge","contains":"default","tainted":null,)"
    R"("thresholds":[],"submetrics":null},"metric":"vus"})";
constexpr char kVusPoint[] =
    R"({"type":"Point","data":{"time":"2017-05-09T14:34:45.625742514+02:00","value":5,)"
    R"("tags":null},"metric":"vus"})";
constexpr char kDurationMetric[] =
    R"({"type":"Metric","data":{"type":"trend","contains":"time","tainted":null,)"
    R"("thresholds":["avg<1000"],"submetrics":null},"metric":"http_req_duration"})";
constexpr char kDurationPoint[] =
    R"({"type":"Point","data":{"time":"2017-05-09T14:34:45.239531499+02:00",)"
    R"("value":459.865729,"tags":{"group":"::my group::json","method":"GET",)"
    R"("status":"200","url":"https://httpbin.test.k6.io/get"}},"metric":"http_req_duration"})";

TEST(K6Test, KeepsThePointsOfTheTrend) {
  K6MetricReader r("http_req_duration");
  for (const char* line : {kVusMetric, kVusPoint}) {
    absl::StatusOr<std::optional<K6Point>> p = r.Line(line);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_FALSE(p->has_value());
  }
  EXPECT_FALSE(r.declared());
  ASSERT_TRUE(r.Line(kDurationMetric).ok());
  EXPECT_TRUE(r.declared());
  absl::StatusOr<std::optional<K6Point>> p = r.Line(kDurationPoint);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->has_value());
  EXPECT_EQ((*p)->value, "459.865729");
  // 2017-05-09T12:34:45.239531499Z.
  EXPECT_EQ((*p)->unix_ns, int64_t{1494333285} * 1'000'000'000 + 239531499);
  EXPECT_THAT(r.metrics_seen(), ::testing::ElementsAre("vus (gauge)", "http_req_duration (trend)"));
}

TEST(K6Test, RefusesAMetricThatIsNotATrendOfTime) {
  for (const char* type : {"counter", "rate", "gauge"}) {
    K6MetricReader r("http_reqs");
    const std::string line = std::string(R"({"type":"Metric","data":{"type":")") + type +
                             R"(","contains":"default"},"metric":"http_reqs"})";
    absl::StatusOr<std::optional<K6Point>> p = r.Line(line);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(p.status().message()),
                HasSubstr(std::string("'http_reqs' is a ") + type + ", not a trend"));
  }
  K6MetricReader plain("sizes");
  absl::StatusOr<std::optional<K6Point>> p = plain.Line(
      R"({"type":"Metric","data":{"type":"trend","contains":"default"},"metric":"sizes"})");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("not of time"));
}

TEST(K6Test, RefusesMalformedLines) {
  const auto why = [](const std::string& line) {
    K6MetricReader r("http_req_duration");
    EXPECT_TRUE(r.Line(kDurationMetric).ok());
    absl::StatusOr<std::optional<K6Point>> p = r.Line(line);
    EXPECT_FALSE(p.ok()) << line;
    return std::string(p.status().message());
  };
  EXPECT_THAT(why(R"({"type":"Point","data":{"time":)"), HasSubstr("malformed JSON at column"));
  EXPECT_THAT(why("[1]"), HasSubstr("not a k6 JSON object"));
  EXPECT_THAT(why(R"({"type":"Point","metric":"http_req_duration"})"), HasSubstr("\"data\""));
  EXPECT_THAT(why(R"({"type":"Sample","data":{},"metric":"x"})"), HasSubstr("Metric or Point"));
  EXPECT_THAT(why(R"({"type":"Point","data":{"time":"2024-01-01T00:00:00Z","value":"1"},)"
                  R"("metric":"http_req_duration"})"),
              HasSubstr("not a number"));
  EXPECT_THAT(why(R"({"type":"Point","data":{"time":"yesterday","value":1},)"
                  R"("metric":"http_req_duration"})"),
              HasSubstr("RFC 3339"));
  // A Point before its metric is declared.
  K6MetricReader r("http_req_duration");
  absl::StatusOr<std::optional<K6Point>> p = r.Line(kDurationPoint);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("before its Metric line"));
}

// A file in the test's temporary directory, removed with it.
class ReadSamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/import-parsers-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string rm = "rm -rf " + dir_;
    ASSERT_EQ(std::system(rm.c_str()), 0);  // NOLINT(concurrency-mt-unsafe): one thread
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static absl::Status Read(const ImportSource& src, std::vector<ImportSample>* out) {
    return ReadSamples(src, [&](const ImportSample& s) {
      out->push_back(s);
      return true;
    });
  }
  std::string dir_;
};

TEST_F(ReadSamplesTest, FioLogsBecomeRecordsPerDirection) {
  ImportSource src;
  src.files = {Write("a_lat.1.log", "0, 273531, 0, 4096, 0\n2, 16371, 1, 8192, 0\n\n"),
               Write("a_lat.2.log", "5, 1500, 2, 4096, 0\n")};
  src.ns_per_unit = 1000;  // us
  std::vector<ImportSample> got;
  ASSERT_TRUE(Read(src, &got).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].stream, 0);
  EXPECT_EQ(got[0].latency, 274);  // 273.531 us, rounded
  EXPECT_TRUE(got[0].rounded);
  EXPECT_EQ(got[0].end, 0);
  EXPECT_EQ(got[0].bytes, 4096);
  EXPECT_EQ(got[1].stream, 1);
  EXPECT_EQ(got[1].latency, 16);
  EXPECT_EQ(got[1].end, 2000);  // 2 ms in us
  EXPECT_EQ(got[1].bytes, 8192);
  EXPECT_EQ(got[2].stream, 2);
  EXPECT_EQ(got[2].latency, 2);  // 1.5 us: a half goes up
  EXPECT_EQ(got[2].end, 5000);
}

TEST_F(ReadSamplesTest, ErrorsNameFileAndLine) {
  ImportSource src;
  const std::string good = Write("g_lat.1.log", "0, 10, 0, 4096, 0\n");
  const std::string bad = Write("b_lat.1.log", "0, 10, 0, 4096, 0\n\n1, 11, 7, 4096, 0\n");
  src.files = {good, bad};
  std::vector<ImportSample> got;
  const absl::Status s = Read(src, &got);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(bad + ":3: column 3 (data direction)"));
  src.files = {Write("x_bw.1.log", "0, 10, 0, 4096, 0\n")};
  EXPECT_THAT(std::string(Read(src, &got).message()), HasSubstr("not a latency log"));
  src.files = {dir_ + "/missing.log"};
  EXPECT_EQ(Read(src, &got).code(), absl::StatusCode::kNotFound);
  src.files = {Write("z.log.gz", std::string("\x1f\x8b\x08\x00", 4))};
  EXPECT_THAT(std::string(Read(src, &got).message()), HasSubstr("gzip"));
}

TEST_F(ReadSamplesTest, FioValuesScaleAsScaleDecimalDoes) {
  const std::vector<std::string> values = {
      "0",      "1",      "499",     "500",     "501",
      "999",    "1000",   "1499",    "1500",    "999499",
      "999500", "999999", "1000000", "1500000", "123456789012345678"};
  std::string text;
  for (const std::string& v : values) text += "7, " + v + ", 0, 4096, 0\n";
  ImportSource src;
  src.files = {Write("v_lat.1.log", text)};
  for (const int shift : {0, -3, -6}) {
    src.ns_per_unit = shift == 0 ? 1 : shift == -3 ? 1000 : 1'000'000;
    std::vector<ImportSample> got;
    ASSERT_TRUE(Read(src, &got).ok());
    ASSERT_EQ(got.size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const ScaledValue want = Scaled(values[i].c_str(), shift);
      EXPECT_EQ(got[i].latency, want.value) << values[i] << " at 10^" << shift;
      EXPECT_EQ(got[i].rounded, want.rounded) << values[i] << " at 10^" << shift;
      EXPECT_EQ(got[i].end, int64_t{7'000'000} / src.ns_per_unit);
    }
  }
  // ScaleDecimal's refusal of a leading zero stays.
  src.files = {Write("z_lat.1.log", "0, 10, 0, 4096\n0, 012, 0, 4096\n")};
  std::vector<ImportSample> got;
  EXPECT_THAT(std::string(Read(src, &got).message()),
              HasSubstr("z_lat.1.log:2: latency '012' is not a number"));
}

TEST_F(ReadSamplesTest, EveryLineOfLargeFilesOnceWithItsNumber) {
  // Over several read blocks (1 MiB): lines across block ends, CRLF ends, a
  // blank line longer than a block, a last line without a newline.
  std::string text;
  int64_t lines = 0;
  int64_t sum = 0;
  for (int64_t i = 0; i < 200'000; ++i) {
    if (i == 100'000) {
      text += std::string(3 << 20, ' ') + "\n";
      ++lines;
    }
    const int64_t latency = 1000 + i * 7 % 100'003;
    text += std::to_string(i / 1000) + ", " + std::to_string(latency) + ", " +
            std::to_string(i % 4) + ", 4096, " + std::to_string(i * 4096) +
            (i % 3 == 0 ? "\r\n" : "\n");
    ++lines;
    sum += latency;
  }
  text.pop_back();  // the last line without its newline
  ImportSource src;
  src.files = {Write("big_lat.1.log", text)};
  std::vector<ImportSample> got;
  ASSERT_TRUE(Read(src, &got).ok());
  ASSERT_EQ(got.size(), 200'000u);
  int64_t got_sum = 0;
  for (const ImportSample& s : got) got_sum += s.latency;
  EXPECT_EQ(got_sum, sum);
  EXPECT_EQ(got.back().end, int64_t{199'000'000});
  EXPECT_EQ(got.back().stream, 199'999 % 4);
  // A malformed line deep in the file names its own line.
  text += "\n5, 6, 7, 8\n";
  src.files = {Write("bad_lat.1.log", text)};
  got.clear();
  EXPECT_THAT(std::string(Read(src, &got).message()),
              HasSubstr("bad_lat.1.log:" + std::to_string(lines + 1) + ": column 3"));
  // An empty file and one of blank lines hold no record.
  src.files = {Write("e_lat.1.log", ""), Write("b_lat.1.log", "\n \r\n\t\n")};
  got.clear();
  EXPECT_TRUE(Read(src, &got).ok());
  EXPECT_TRUE(got.empty());
}

TEST_F(ReadSamplesTest, K6PointsOfTheMetricOnly) {
  ImportSource src;
  src.format = ImportFormat::kK6;
  src.ns_per_unit = 1000;
  src.files = {Write("k6.json", std::string(kVusMetric) + "\n" + kVusPoint + "\n" +
                                    kDurationMetric + "\n" + kDurationPoint + "\n" +
                                    R"({"type":"Point","data":{"time":"2017-05-09T12:34:46Z",)"
                                    R"("value":12,"tags":{}},"metric":"http_req_duration"})" +
                                    "\n")};
  std::vector<ImportSample> got;
  ASSERT_TRUE(Read(src, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].latency, 459866);
  EXPECT_TRUE(got[0].rounded);
  EXPECT_EQ(got[0].end, int64_t{1494333285} * 1'000'000 + 239531);
  EXPECT_EQ(got[1].latency, 12000);
  EXPECT_FALSE(got[1].rounded);
  EXPECT_EQ(got[1].bytes, 0);
  // A negative duration and a malformed line name their line.
  src.files = {Write("neg.json", std::string(kDurationMetric) + "\n" +
                                     R"({"type":"Point","data":{"time":"2017-05-09T12:34:46Z",)"
                                     R"("value":-1},"metric":"http_req_duration"})" +
                                     "\n")};
  EXPECT_THAT(std::string(Read(src, &got).message()),
              HasSubstr(":2: the Point's value '-1' is negative"));
  src.files = {Write("bad.json", std::string(kDurationMetric) + "\n{\"type\":\n")};
  EXPECT_THAT(std::string(Read(src, &got).message()), HasSubstr("bad.json:2: malformed JSON"));
  src.metric = "vus";
  src.files = {Write("vus.json", std::string(kVusMetric) + "\n")};
  const absl::Status s = Read(src, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("vus.json:1: metric 'vus' is a gauge"));
}

}  // namespace
}  // namespace perld::perlctl
