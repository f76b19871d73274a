#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "daemon/core/run_total.h"
#include "daemon/state/json_columns.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace perld::state {
namespace {

using ::testing::HasSubstr;

TEST(StateJsonColumnsTest, LabelsRoundTripWithEscapes) {
  const std::map<std::string, std::string> labels = {
      {"", ""},
      {"host", "node-7"},
      {"q\"uote", "back\\slash"},
      {"ctl", std::string("nl\n tab\t nul\0 del\x7f", 18)},
      {"utf8", "ünïcødé 測試 🙂"},
  };
  const std::string json = LabelsToJson(labels);
  EXPECT_THAT(json, HasSubstr(R"("q\"uote":"back\\slash")"));
  EXPECT_THAT(json, HasSubstr(R"(nl\u000a tab\u0009 nul\u0000 del)"));
  absl::StatusOr<std::map<std::string, std::string>> back = LabelsFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, labels);
  EXPECT_EQ(LabelsToJson({}), "{}");
  EXPECT_EQ(LabelsFromJson(" { } ")->size(), 0u);
}

TEST(StateJsonColumnsTest, LabelsAcceptEveryJsonStringEscape) {
  absl::StatusOr<std::map<std::string, std::string>> labels =
      LabelsFromJson(R"({"a":"\"\\\/\b\f\n\r\t", "b" : "\u00e9\u6e2c\ud83d\ude42"})");
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->at("a"), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(labels->at("b"), "é測🙂");
}

TEST(StateJsonColumnsTest, LabelsRejectMalformedJson) {
  for (const char* bad :
       {"", "[]", "{", "{\"a\"}", "{\"a\":1}", "{\"a\":\"b\",}", "{\"a\":\"b\"} x",
        "{\"a\":\"\\x\"}", "{\"a\":\"\\ud83d\"}", "{\"a\":\"\\ude42\"}", "{\"a\":\"\\u12\"}",
        "{\"a\":\"b\" \"c\":\"d\"}", "{\"a\":\"unterminated}", "{\"a\":\"raw\nnewline\"}"}) {
    EXPECT_EQ(LabelsFromJson(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(LabelsFromJson(R"({"a":"1","a":"2"})").status().message(),
              HasSubstr("duplicate key \"a\""));
  EXPECT_THAT(LabelsFromJson("{\"a\" 1}").status().message(),
              HasSubstr("labels JSON: expected ':' at offset 5"));
}

TEST(StateJsonColumnsTest, PercentsRoundTripBitExact) {
  const std::vector<double> percents = {
      0.1, 5, 33.333333333333336, 50, 99.9, 99.99, 99.999999999999, 100, 1e-300, 5e-324};
  const std::string json = PercentsToJson(percents);
  EXPECT_EQ(json.substr(0, 25), "[0.1,5,33.333333333333336");
  absl::StatusOr<std::vector<double>> back = PercentsFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), percents.size());
  for (size_t i = 0; i < percents.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint64_t>((*back)[i]), std::bit_cast<uint64_t>(percents[i])) << i;
  }
  EXPECT_EQ(PercentsToJson({}), "[]");
  EXPECT_TRUE(PercentsFromJson(" [ ] ")->empty());
  // Non-finite: null, read back as NaN.
  EXPECT_EQ(PercentsToJson(std::vector<double>{std::numeric_limits<double>::infinity()}), "[null]");
  EXPECT_TRUE(std::isnan((*PercentsFromJson("[null]"))[0]));
}

TEST(StateJsonColumnsTest, PercentsRejectNonJsonNumbers) {
  for (const char* bad : {"[01]", "[1.]", "[.5]", "[+1]", "[1e]", "[nan]", "[inf]", "[0x10]",
                          "[1,]", "[1 2]", "[1e999]", "5", "[\"5\"]"}) {
    EXPECT_EQ(PercentsFromJson(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ((*PercentsFromJson("[-0, 1E2, 2.5e-1]")), (std::vector<double>{-0.0, 100, 0.25}));
}

TEST(StateJsonColumnsTest, PercentileTriplesRoundTrip) {
  LatencySnapshot s;
  s.percents = {50, 99.9, 100};
  s.fractions = {50 / 100.0, 99.9 / 100.0, 100 / 100.0};
  s.values = {7, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  s.counts = {1, 2, 3};
  absl::StatusOr<std::string> json = PercentilesToJson(s);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, "[[50,7,1],[99.9,9223372036854775807,2],[100,-9223372036854775808,3]]");
  LatencySnapshot back;
  ASSERT_TRUE(PercentilesFromJson(*json, &back).ok());
  EXPECT_EQ(back.percents, s.percents);
  EXPECT_EQ(back.fractions, s.fractions);  // percent / 100.0, as PercentileSet
  EXPECT_EQ(back.values, s.values);
  EXPECT_EQ(back.counts, s.counts);
  EXPECT_EQ(*PercentilesToJson(LatencySnapshot{}), "[]");
  // A total without exact percentiles stays without them across a restart.
  LatencySnapshot inexact;
  ClearPercentiles(&inexact);
  EXPECT_EQ(*PercentilesToJson(inexact), "null");
  ASSERT_TRUE(PercentilesFromJson("null", &back).ok());
  EXPECT_FALSE(back.percentiles_exact);
  EXPECT_TRUE(back.values.empty() && back.percents.empty());
}

TEST(StateJsonColumnsTest, PercentileTriplesRejectBadShapes) {
  LatencySnapshot mismatched;
  mismatched.percents = {50};
  EXPECT_EQ(PercentilesToJson(mismatched).status().code(), absl::StatusCode::kInvalidArgument);
  LatencySnapshot out;
  for (const char* bad : {"[[50,1]]", "[[50,1,2,3]]", "[50,1,2]", "[[50,1.5,2]]",
                          "[[50,1,9223372036854775808]]", "[[\"50\",1,2]]", "[[50,1,2]"}) {
    EXPECT_EQ(PercentilesFromJson(bad, &out).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace perld::state
