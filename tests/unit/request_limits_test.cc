// The caps on one request's input (limits.maxLabels, maxLabelKeyBytes,
// maxLabelValueBytes, maxNameBytes, maxPercentiles): at the cap accepted,
// one over refused with INVALID_ARGUMENT naming the field and the key; and
// ListRuns' page size and token.
#include "daemon/service/request_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "daemon/ingest/run_table.h"

namespace perld::service {
namespace {

using ::testing::HasSubstr;

config::LimitsConfig Small() {
  config::LimitsConfig limits;
  limits.max_labels = 2;
  limits.max_label_key_bytes = 4;
  limits.max_label_value_bytes = 6;
  limits.max_name_bytes = 8;
  limits.max_percentiles = 3;
  return limits;
}

void ExpectRefused(const absl::Status& s, const std::string& field, const std::string& key) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(field)) << s;
  EXPECT_THAT(s.message(), HasSubstr("(" + key + ")")) << s;
}

TEST(RequestLimitsTest, DefaultsAreTheDocumentedOnes) {
  const config::LimitsConfig d;
  EXPECT_EQ(d.max_labels, 32);
  EXPECT_EQ(d.max_label_key_bytes, 128);
  EXPECT_EQ(d.max_label_value_bytes, 1024);
  EXPECT_EQ(d.max_name_bytes, 256);
  EXPECT_EQ(d.max_percentiles, 1000);  // GetPercentiles' cap before it was a key
}

// The ingest domain checks an open's fields with the same caps.
TEST(RequestLimitsTest, IngestOpenEveryFieldAtAndOverItsCap) {
  const config::LimitsConfig limits = Small();
  ingest::OpenRequest open;
  open.run_name = "12345678";
  open.client_id = "abcdefgh";
  open.client_name = "hostname";
  open.labels["abcd"] = "123456";
  open.labels["b"] = "";
  open.percentiles = {50.0, 90.0, 99.0};
  EXPECT_TRUE(ingest::CheckOpenLimits(open, limits).ok());

  ingest::OpenRequest over = open;
  over.run_name = "123456789";
  ExpectRefused(ingest::CheckOpenLimits(over, limits), "open: run_name: 9 bytes, at most 8",
                "limits.maxNameBytes");
  over = open;
  over.client_id = std::string(1000, 'c');
  ExpectRefused(ingest::CheckOpenLimits(over, limits), "open: client_id", "limits.maxNameBytes");
  over = open;
  over.client_name = "hostname!";
  ExpectRefused(ingest::CheckOpenLimits(over, limits), "open: client_name", "limits.maxNameBytes");
  over = open;
  over.labels["c"] = "x";
  ExpectRefused(ingest::CheckOpenLimits(over, limits), "open: labels: 3 labels, at most 2",
                "limits.maxLabels");
  over = open;
  over.labels.erase("b");
  over.labels["abcde"] = "";
  ExpectRefused(ingest::CheckOpenLimits(over, limits), "the key \"abcde\" has 5 bytes, at most 4",
                "limits.maxLabelKeyBytes");
  over = open;
  over.labels["b"] = "1234567";
  ExpectRefused(ingest::CheckOpenLimits(over, limits), "the value of \"b\" has 7 bytes, at most 6",
                "limits.maxLabelValueBytes");
  over = open;
  over.percentiles.push_back(99.9);
  ExpectRefused(ingest::CheckOpenLimits(over, limits),
                "open: percentiles: 4 percentiles, at most 3", "limits.maxPercentiles");
}

TEST(RequestLimitsTest, StartBenchNameAndLabels) {
  const config::LimitsConfig limits = Small();
  v1::StartBenchRequest request;
  request.set_name("perlbnch");
  (*request.mutable_labels())["k"] = "v";
  EXPECT_TRUE(CheckStartBench(request, limits).ok());
  request.set_name("perlbench");
  ExpectRefused(CheckStartBench(request, limits), "name: 9 bytes", "limits.maxNameBytes");
  request.set_name("");
  (*request.mutable_labels())[std::string(100, '\x01')] = "v";
  const absl::Status s = CheckStartBench(request, limits);
  ExpectRefused(s, "labels: the key \"\\x01\\x01", "limits.maxLabelKeyBytes");
  EXPECT_THAT(s.message(), HasSubstr("...\" has 100 bytes"));  // shown escaped and cut
}

TEST(RequestLimitsTest, PercentileCountIsOneCap) {
  const config::LimitsConfig limits = Small();
  EXPECT_TRUE(CheckPercentileCount("percentiles", 3, limits).ok());
  ExpectRefused(CheckPercentileCount("percentiles", 500'000, limits),
                "percentiles: 500000 percentiles, at most 3", "limits.maxPercentiles");
}

TEST(RequestLimitsTest, ListPagesAndTokens) {
  absl::StatusOr<ListPage> page = ParseListPage(0, "");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->size, 100u);
  EXPECT_EQ(page->after, 0u);
  page = ParseListPage(5, ListPageToken(42));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->size, 5u);
  EXPECT_EQ(page->after, 42u);
  page = ParseListPage(1'000'000, "");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->size, 1000u);
  EXPECT_EQ(ParseListPage(-1, "").status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* bad : {"x", "-1", "1.5", " 3", "99999999999999999999999"}) {
    EXPECT_EQ(ParseListPage(0, bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace perld::service
