#include "daemon/core/latency_config.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace perld {
namespace {

void ExpectKeyError(const LatencyConfig& c, const std::string& key) {
  const absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key;
  EXPECT_EQ(std::string(s.message()).rfind(key + ":", 0), 0u) << s.message();
}

TEST(LatencyConfigTest, DefaultsAreSbks) {
  const LatencyConfig c;
  EXPECT_EQ(c.time_unit, TimeUnit::kMs);
  EXPECT_EQ(c.min_latency, 0);
  EXPECT_EQ(c.max_latency, 180'000);
  EXPECT_EQ(c.max_array_size_mb, 64);
  EXPECT_EQ(c.max_hash_map_size_mb, 192);
  EXPECT_EQ(c.total_max_hash_map_size_mb, 256);
  EXPECT_EQ(c.exact_latency_page_bits, 8);
  EXPECT_EQ(c.exact_latency_sparse_page_entries, 32);
  EXPECT_EQ(c.exact_latency_max_memory_mb, 1024);
  EXPECT_EQ(c.exact_total_latency_max_memory_mb, 2048);
  const std::vector<double> want = {5,    10, 15,    20,   25,    30,   35,    40,   45,   50,
                                    55,   60, 65,    70,   75,    80,   85,    90,   92.5, 95,
                                    97.5, 99, 99.25, 99.5, 99.75, 99.9, 99.95, 99.99};
  EXPECT_EQ(c.percentiles, want);
  EXPECT_TRUE(c.Validate().ok());
}

TEST(LatencyConfigTest, ForUnitConvertsTheThreeMinuteCeiling) {
  EXPECT_EQ(LatencyConfig::ForUnit(TimeUnit::kMs).max_latency, 180'000);
  EXPECT_EQ(LatencyConfig::ForUnit(TimeUnit::kUs).max_latency, 180'000'000);
  EXPECT_EQ(LatencyConfig::ForUnit(TimeUnit::kNs).max_latency, 180'000'000'000);
  EXPECT_EQ(LatencyConfig::ForUnit(TimeUnit::kNs).time_unit, TimeUnit::kNs);
  EXPECT_EQ(LatencyConfig::ForUnit(TimeUnit::kUs).min_latency, 0);
}

TEST(LatencyConfigTest, ValidateNamesTheBadKey) {
  LatencyConfig c;
  c.min_latency = -1;
  ExpectKeyError(c, "minLatency");
  c = {};
  c.max_latency = -5;
  ExpectKeyError(c, "maxLatency");
  c = {};
  c.min_latency = 10;
  c.max_latency = 9;
  ExpectKeyError(c, "maxLatency");
  c = {};
  c.percentiles = {50, -0.5};
  ExpectKeyError(c, "percentiles");
  c = {};
  c.percentiles = {50, 101};
  ExpectKeyError(c, "percentiles");
  c = {};
  c.percentiles = {99, 50, 99};
  ExpectKeyError(c, "percentiles");
  c = {};
  c.max_array_size_mb = 0;
  ExpectKeyError(c, "maxArraySizeMB");
  c = {};
  c.max_hash_map_size_mb = -1;
  ExpectKeyError(c, "maxHashMapSizeMB");
  c = {};
  c.total_max_hash_map_size_mb = 0;
  ExpectKeyError(c, "totalMaxHashMapSizeMB");
  c = {};
  c.exact_latency_page_bits = 0;
  ExpectKeyError(c, "exactLatencyPageBits");
  c = {};
  c.exact_latency_page_bits = 17;
  ExpectKeyError(c, "exactLatencyPageBits");
  c = {};
  c.exact_latency_sparse_page_entries = 256;
  ExpectKeyError(c, "exactLatencySparsePageEntries");
  c = {};
  c.exact_latency_sparse_page_entries = 0;
  ExpectKeyError(c, "exactLatencySparsePageEntries");
  c = {};
  c.exact_latency_max_memory_mb = 0;
  ExpectKeyError(c, "exactLatencyMaxMemoryMB");
  c = {};
  c.exact_total_latency_max_memory_mb = 0;
  ExpectKeyError(c, "exactTotalLatencyMaxMemoryMB");
}

TEST(LatencyConfigTest, NormalizeSortsPercentiles) {
  LatencyConfig c;
  c.percentiles = {99.9, 50, 10};
  ASSERT_TRUE(c.Normalize().ok());
  EXPECT_EQ(c.percentiles, (std::vector<double>{10, 50, 99.9}));
  c.percentiles = {50, std::nan("")};
  EXPECT_FALSE(c.Normalize().ok());
}

}  // namespace
}  // namespace perld
