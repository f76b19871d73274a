#include "daemon/state/distribution_codec.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "daemon/common/crc32c.h"
#include "gtest/gtest.h"

namespace perld::state {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::vector<LatencyBucket> RoundTrip(const std::vector<LatencyBucket>& buckets) {
  absl::StatusOr<std::string> blob = EncodeDistribution(buckets);
  EXPECT_TRUE(blob.ok()) << blob.status();
  if (!blob.ok()) {
    return {};
  }
  absl::StatusOr<std::vector<LatencyBucket>> decoded = DecodeDistribution(*blob);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  if (!decoded.ok()) {
    return {};
  }
  // Canonical: re-encoding gives the same bytes.
  absl::StatusOr<std::string> again = EncodeDistribution(*decoded);
  EXPECT_TRUE(again.ok() && *again == *blob);
  return *decoded;
}

TEST(DistributionCodecTest, RoundTripsEmptyAndOneBucket) {
  EXPECT_EQ(RoundTrip({}), std::vector<LatencyBucket>{});
  EXPECT_EQ(EncodeDistribution({})->size(), 10u);  // magic, version, count, crc
  const std::vector<LatencyBucket> zero = {{0, 1}};
  EXPECT_EQ(RoundTrip(zero), zero);
  const std::vector<LatencyBucket> one = {{12345, 678}};
  EXPECT_EQ(RoundTrip(one), one);
}

TEST(DistributionCodecTest, RoundTripsExtremes) {
  const int64_t big = int64_t{1} << 62;
  const std::vector<LatencyBucket> near_2_62 = {
      {0, 1}, {big - 2, 3}, {big - 1, kInt64Max - 10}, {big, 2}, {kInt64Max, 1}};
  EXPECT_EQ(RoundTrip(near_2_62), near_2_62);
  const std::vector<LatencyBucket> max_count = {{7, kInt64Max}};
  EXPECT_EQ(RoundTrip(max_count), max_count);
  const std::vector<LatencyBucket> max_latency = {{kInt64Max, kInt64Max}};
  EXPECT_EQ(RoundTrip(max_latency), max_latency);
}

TEST(DistributionCodecTest, RoundTripsRandomAndDenseIsCompact) {
  std::mt19937_64 rng(7);
  std::vector<LatencyBucket> sparse;
  int64_t latency = 0;
  for (int i = 0; i < 10'000; ++i) {
    latency += 1 + static_cast<int64_t>(rng() % 100'000);
    sparse.push_back({latency, 1 + static_cast<int64_t>(rng() % 1'000'000)});
  }
  EXPECT_EQ(RoundTrip(sparse), sparse);

  std::vector<LatencyBucket> dense;
  for (int64_t l = 1000; l < 101'000; ++l) {
    dense.push_back({l, 1 + (l % 100)});
  }
  EXPECT_EQ(RoundTrip(dense), dense);
  EXPECT_LE(EncodeDistribution(dense)->size(), 2 * dense.size() + 16);
}

TEST(DistributionCodecTest, EncodeRejectsBadInput) {
  const std::vector<std::vector<LatencyBucket>> bad = {
      {{5, 1}, {5, 1}},          // duplicate latency
      {{5, 1}, {4, 1}},          // descending
      {{5, 0}},                  // zero count
      {{5, -3}},                 // negative count
      {{-1, 1}},                 // negative latency
      {{1, kInt64Max}, {2, 1}},  // count sum overflows int64
  };
  for (const auto& buckets : bad) {
    absl::StatusOr<std::string> blob = EncodeDistribution(buckets);
    EXPECT_EQ(blob.status().code(), absl::StatusCode::kInvalidArgument) << blob.status();
  }
}

TEST(DistributionCodecTest, EverySingleByteCorruptionIsDetected) {
  const std::vector<LatencyBucket> buckets = {{3, 1}, {200, 70'000}, {1'000'000, 2}};
  const std::string blob = *EncodeDistribution(buckets);
  for (size_t i = 0; i < blob.size(); ++i) {
    for (int v = 0; v < 256; ++v) {
      if (static_cast<char>(v) == blob[i]) {
        continue;
      }
      std::string bad = blob;
      bad[i] = static_cast<char>(v);
      absl::StatusOr<std::vector<LatencyBucket>> decoded = DecodeDistribution(bad);
      ASSERT_FALSE(decoded.ok()) << "byte " << i << " = " << v;
      ASSERT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << decoded.status();
    }
  }
}

TEST(DistributionCodecTest, EveryTruncationAndTrailingByteIsDetected) {
  const std::string blob = *EncodeDistribution({{{3, 1}, {200, 70'000}, {1'000'000, 2}}});
  for (size_t n = 0; n < blob.size(); ++n) {
    EXPECT_FALSE(DecodeDistribution(blob.substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(DecodeDistribution(blob + '\0').ok());
  EXPECT_FALSE(DecodeDistribution("").ok());
}

// Blobs with a valid checksum that break the format: only a buggy encoder or
// a crafted input (a fuzzer) can make them.
std::string Sealed(std::string body) {
  const uint32_t crc = common::Crc32c(body);
  for (int i = 0; i < 4; ++i) {
    body.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  }
  return body;
}

std::string Header(const std::string& count_varint) {
  return std::string("PDST\x01", 5) + count_varint;
}

TEST(DistributionCodecTest, StructuralCorruptionIsInvalidArgument) {
  const std::string max_varint = "\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x7F";  // 2^63 - 1
  struct Case {
    const char* what;
    std::string blob;
    const char* message;
  };
  const Case cases[] = {
      {"version 2", Sealed(std::string("PDST\x02\x00", 6)), "version 2"},
      {"count varint too long", Sealed(Header("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01")),
       "varint"},
      {"10th varint byte > 1", Sealed(Header("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x02")),
       "varint"},
      {"non-canonical count", Sealed(Header(std::string("\x80\x00", 2))), "varint"},
      {"absurd count", Sealed(Header("\xFF\xFF\xFF\xFF\x0F") + "\x01\x01"), "does not fit"},
      {"truncated bucket", Sealed(Header("\x02") + "\x01\x01\x01"), "does not fit"},
      {"non-ascending", Sealed(Header("\x02") + std::string("\x05\x01\x00\x01", 4)),
       "not ascending"},
      {"zero count", Sealed(Header("\x01") + std::string("\x05\x00", 2)), "zero count"},
      {"latency overflow", Sealed(Header("\x02") + max_varint + "\x01\x01\x01"), "overflows"},
      {"count sum overflow", Sealed(Header("\x02") + "\x01" + max_varint + "\x01\x01"),
       "count sum"},
      {"trailing bytes", Sealed(Header("\x01") + std::string("\x05\x01\x00\x00", 4)),
       "unexpected bytes"},
      {"bad varint in bucket",
       Sealed(Header("\x01") + "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80"), "varint"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<LatencyBucket>> decoded = DecodeDistribution(c.blob);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(decoded.status().message().find(c.message), absl::string_view::npos)
        << c.what << ": " << decoded.status();
  }
  EXPECT_EQ(DecodeDistribution(Sealed(std::string("PDSX\x01\x00", 6))).status().code(),
            absl::StatusCode::kDataLoss);  // bad magic
}

TEST(DistributionCodecTest, BlobSourceStreamsALargeBlobInFixedMemory) {
  // ~1 MB of blob: varints straddle every 64 KiB read.
  std::mt19937_64 rng(27);
  std::vector<LatencyBucket> buckets;
  int64_t latency = 0;
  for (int i = 0; i < 200'000; ++i) {
    latency += 1 + static_cast<int64_t>(rng() % 100'000);
    buckets.push_back({latency, 1 + static_cast<int64_t>(rng() % 1'000'000)});
  }
  absl::StatusOr<std::string> blob = EncodeDistribution(buckets);
  ASSERT_TRUE(blob.ok());
  size_t largest_read = 0;
  absl::StatusOr<std::unique_ptr<DistributionBlobSource>> source = DistributionBlobSource::Open(
      static_cast<int64_t>(blob->size()), [&](int64_t offset, std::span<char> into) {
        largest_read = std::max(largest_read, into.size());
        blob->copy(into.data(), into.size(), static_cast<size_t>(offset));
        return absl::OkStatus();
      });
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->buckets(), buckets.size());
  std::vector<LatencyBucket> read;
  for (;;) {
    absl::StatusOr<std::span<const LatencyBucket>> chunk = (*source)->Next();
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    if (chunk->empty()) break;
    EXPECT_LE(chunk->size(), DistributionBlobSource::kChunk);
    read.insert(read.end(), chunk->begin(), chunk->end());
  }
  EXPECT_EQ(read, buckets);
  EXPECT_LE(largest_read, size_t{64} << 10);
  EXPECT_TRUE((*source)->Next().ok());  // stays at the end

  // A read error is the source's error.
  absl::StatusOr<std::unique_ptr<DistributionBlobSource>> failing = DistributionBlobSource::Open(
      static_cast<int64_t>(blob->size()),
      [](int64_t, std::span<char>) { return absl::UnavailableError("disk gone"); });
  EXPECT_EQ(failing.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace perld::state
