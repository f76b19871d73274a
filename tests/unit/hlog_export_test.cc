// `perlctl export --format hlog` (client/perlctl/hlog_export.h): HdrHistogram's
// bucket layout, ZigZag LEB128, the V2 encoding and its compressed form, Java's
// number and date text, and the log file.
//
// The expected values marked "Java" were printed once by the real library,
// Debian's libhdrhistogram-java 2.1.11 (/usr/share/java/hdrhistogram.jar) on
// openjdk-17: a probe class compiled into package org.HdrHistogram (to reach
// the package-private countsArrayIndex) printed h.countsArrayIndex(v),
// h.highestEquivalentValue(v), h.countsArrayLength, the bytes of
// encodeIntoByteBuffer (hex, or their length and java.util.zip.CRC32) and
// String.format(Locale.US, "%.3f", d).
#include "client/perlctl/hlog_export.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace perld::perlctl {
namespace {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

HdrLayout Layout(int64_t lowest, int64_t highest, int digits) {
  std::optional<HdrLayout> l = HdrLayout::Make(lowest, highest, digits);
  EXPECT_TRUE(l.has_value());
  return l.value_or(*HdrLayout::Make(1, 2, 0));
}

uint32_t BigEndian32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(b[at + i]);
  return v;
}

uint64_t BigEndian64(std::string_view b, size_t at) {
  return uint64_t{BigEndian32(b, at)} << 32 | BigEndian32(b, at + 4);
}

std::string Inflate(std::string_view deflated) {
  std::string out(1 << 20, '\0');
  uLongf length = out.size();
  const int rc = uncompress(reinterpret_cast<Bytef*>(out.data()), &length,
                            reinterpret_cast<const Bytef*>(deflated.data()), deflated.size());
  EXPECT_EQ(rc, Z_OK);
  out.resize(rc == Z_OK ? length : 0);
  return out;
}

// An independent decoder of a V2 encoding (AbstractHistogram
// decodeFromByteBuffer / fillCountsArrayFromSourceBuffer): the header's
// fields and the non-zero counts by index.
struct Decoded {
  uint32_t cookie = 0;
  int32_t digits = 0;
  int64_t lowest = 0;
  int64_t highest = 0;
  uint64_t ratio_bits = 0;
  std::map<int64_t, int64_t> counts;
  int64_t length = 0;  // indexes covered
};

Decoded DecodeV2(std::string_view v2) {
  Decoded d;
  EXPECT_GE(v2.size(), 40u);
  if (v2.size() < 40) return d;
  d.cookie = BigEndian32(v2, 0);
  const uint32_t payload_length = BigEndian32(v2, 4);
  EXPECT_EQ(BigEndian32(v2, 8), 0u);  // normalizingIndexOffset
  d.digits = static_cast<int32_t>(BigEndian32(v2, 12));
  d.lowest = static_cast<int64_t>(BigEndian64(v2, 16));
  d.highest = static_cast<int64_t>(BigEndian64(v2, 24));
  d.ratio_bits = BigEndian64(v2, 32);
  EXPECT_EQ(payload_length, v2.size() - 40);
  std::string_view payload = v2.substr(40);
  while (!payload.empty()) {
    int64_t word = 0;
    EXPECT_TRUE(GetZigZagLong(&payload, &word));
    if (word < 0) {
      d.length += -word;
    } else {
      if (word > 0) d.counts[d.length] = word;
      ++d.length;
    }
  }
  return d;
}

TEST(HdrLayout, CountsArrayIndexAsJava) {
  // Java: new Histogram(1, 1000000000L, 5): {value, countsArrayIndex,
  // highestEquivalentValue}; countsArrayLength 1835008.
  const HdrLayout l = Layout(1, 1000000000, 5);
  EXPECT_EQ(l.counts_array_length(), 1835008);
  EXPECT_EQ(l.exact_below(), 262144);
  const int64_t java[][3] = {
      {0, 0, 0},
      {1, 1, 1},
      {2, 2, 2},
      {131071, 131071, 131071},
      {131072, 131072, 131072},
      {262143, 262143, 262143},
      {262144, 262144, 262145},
      {262145, 262144, 262145},
      {262146, 262145, 262147},
      {262147, 262145, 262147},
      {524287, 393215, 524287},
      {524288, 393216, 524291},
      {1000000, 512144, 1000003},
      {123456789, 1420774, 123457023},
      {999999999, 1817004, 1000001535},
  };
  for (const auto& [value, index, highest] : java) {
    EXPECT_EQ(l.CountsArrayIndex(value), index) << value;
    EXPECT_EQ(l.HighestEquivalentValue(value), highest) << value;
    EXPECT_EQ(l.LowestEquivalentValue(l.ValueFromIndex(index)), l.ValueFromIndex(index));
    EXPECT_EQ(l.CountsArrayIndex(l.ValueFromIndex(index)), index) << value;
    EXPECT_LE(l.ValueFromIndex(index), value);
  }
  // Every value below 2^18 is its own bucket; 2^18 starts buckets of 2.
  for (int64_t v : {0, 1, 77777, 262143}) EXPECT_EQ(l.SizeOfEquivalentValueRange(v), 1);
  EXPECT_EQ(l.SizeOfEquivalentValueRange(262144), 2);

  // Java: new Histogram(1, Long.MAX_VALUE, 5), countsArrayLength 6160384.
  const HdrLayout wide = Layout(1, std::numeric_limits<int64_t>::max(), 5);
  EXPECT_EQ(wide.counts_array_length(), 6160384);
  const int64_t java_wide[][3] = {
      {1099511627776LL, 3145728, 1099520016383LL},
      {1099511640121LL, 3145728, 1099520016383LL},
      {3074457345618258602LL, 5941930, 3074463209680273407LL},
      {9223372036854775807LL, 6160383, 9223372036854775807LL},
  };
  for (const auto& [value, index, highest] : java_wide) {
    EXPECT_EQ(wide.CountsArrayIndex(value), index) << value;
    EXPECT_EQ(wide.HighestEquivalentValue(value), highest) << value;
  }

  // Java: new Histogram(1, 1000000L, 3), countsArrayLength 11264.
  const HdrLayout d3 = Layout(1, 1000000, 3);
  EXPECT_EQ(d3.counts_array_length(), 11264);
  const int64_t java_d3[][2] = {{0, 0},       {2047, 2047}, {2048, 2048},   {2049, 2048},
                                {4095, 3071}, {4096, 3072}, {999999, 11169}};
  for (const auto& [value, index] : java_d3) EXPECT_EQ(d3.CountsArrayIndex(value), index) << value;

  // Java: new Histogram(1000, 1000000000L, 2): unitMagnitude 9,
  // countsArrayLength 1920.
  const HdrLayout u = Layout(1000, 1000000000, 2);
  EXPECT_EQ(u.counts_array_length(), 1920);
  EXPECT_EQ(u.exact_below(), 0);
  const int64_t java_u[][2] = {{0, 0},    {999, 1},      {1000, 1},     {1023, 1},
                               {1024, 2}, {255999, 377}, {256000, 378}, {1000000, 628}};
  for (const auto& [value, index] : java_u) EXPECT_EQ(u.CountsArrayIndex(value), index) << value;
}

TEST(HdrLayout, RefusesWhatJavaRefuses) {
  EXPECT_FALSE(HdrLayout::Make(0, 100, 3));
  EXPECT_FALSE(HdrLayout::Make(10, 19, 3));  // highest < 2 * lowest
  EXPECT_FALSE(HdrLayout::Make(1, 100, 6));
  EXPECT_FALSE(HdrLayout::Make(1, 100, -1));
  EXPECT_FALSE(HdrLayout::Make(int64_t{1} << 50, std::numeric_limits<int64_t>::max(), 5));
  EXPECT_TRUE(HdrLayout::Make(1, 2, 5));
}

TEST(ZigZag, RoundTripsAndLengths) {
  std::vector<int64_t> values = {0,
                                 1,
                                 -1,
                                 63,
                                 -64,
                                 64,
                                 -65,
                                 8191,
                                 8192,
                                 int64_t{1} << 31,
                                 -(int64_t{1} << 40),
                                 (int64_t{1} << 55) - 1,
                                 int64_t{1} << 55,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
  uint64_t x = 88172645463325252ULL;  // xorshift: more values across all magnitudes
  for (int i = 0; i < 2000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(static_cast<int64_t>(x) >> (i % 64));
  }
  std::string all;
  for (int64_t v : values) {
    std::string one;
    PutZigZagLong(v, &one);
    const uint64_t zz = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
    size_t want = 1;
    while (want < 9 && (zz >> (7 * want)) != 0) ++want;  // 7 bits a byte, the ninth 8
    EXPECT_EQ(one.size(), want) << v;
    all += one;
  }
  std::string_view in = all;
  for (int64_t v : values) {
    int64_t got = 0;
    ASSERT_TRUE(GetZigZagLong(&in, &got));
    EXPECT_EQ(got, v);
  }
  EXPECT_TRUE(in.empty());
  // Java's bytes (from the V2 encoding below): 2, -2, 300, 7, -281066.
  std::string bytes;
  for (int64_t v : {2, -2, 300, 7, -281066}) PutZigZagLong(v, &bytes);
  EXPECT_EQ(absl::BytesToHexString(bytes), "0403d8040ed3a722");
  // A value cut short reads nothing.
  std::string_view cut("\xd3\xa7", 2);
  int64_t v = 0;
  EXPECT_FALSE(GetZigZagLong(&cut, &v));
  EXPECT_EQ(cut.size(), 2u);
}

TEST(EncodeV2, BytesAsJava) {
  // Java: new Histogram(1, 1000000L, 5) with 0 x2, 3 x1, 5 x300, 300000 x7;
  // encodeIntoByteBuffer's bytes.
  const Pairs pairs = {{0, 2}, {3, 1}, {5, 300}, {300000, 7}};
  EXPECT_EQ(absl::BytesToHexString(EncodeV2(Layout(1, 1000000, 5), pairs)),
            "1c8493130000000a0000000000000005000000000000000100000000000f4240"
            "3ff000000000000004030200d804d3a7220e");
  // Java: new Histogram(1, 2L, 5), nothing recorded.
  EXPECT_EQ(absl::BytesToHexString(EncodeV2(Layout(1, 2, 5), {})),
            "1c849313000000010000000000000005000000000000000100000000000000023ff000000000000000");

  // Java: new Histogram(1, 10000000000L, 5) recording 5000 values from an
  // LCG (below): 12997 bytes, CRC32 7db01e1e, total count 19995.
  std::map<int64_t, int64_t> recorded;
  uint64_t x = 12345;
  for (int i = 0; i < 5000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t m = i % 3 == 0 ? 100000 : i % 3 == 1 ? 5000000 : 9000000000ULL;
    recorded[static_cast<int64_t>((x >> 20) % m)] += 1 + i % 7;
  }
  const Pairs medium(recorded.begin(), recorded.end());
  const HdrLayout layout = Layout(1, 10000000000, 5);
  const std::string v2 = EncodeV2(layout, medium);
  EXPECT_EQ(v2.size(), 12997u);
  EXPECT_EQ(crc32(0, reinterpret_cast<const Bytef*>(v2.data()), v2.size()), 0x7db01e1eu);

  // Decoded independently: the header and, by index, the values' counts.
  const Decoded d = DecodeV2(v2);
  EXPECT_EQ(d.cookie, 0x1c849313u);
  EXPECT_EQ(d.digits, 5);
  EXPECT_EQ(d.lowest, 1);
  EXPECT_EQ(d.highest, 10000000000);
  EXPECT_EQ(d.ratio_bits, 0x3ff0000000000000u);  // 1.0
  std::map<int64_t, int64_t> by_index;
  int64_t total = 0;
  for (const auto& [value, count] : medium) {
    by_index[layout.CountsArrayIndex(value)] += count;
    total += count;
  }
  EXPECT_EQ(total, 19995);
  EXPECT_EQ(d.counts, by_index);
  EXPECT_EQ(d.length, layout.CountsArrayIndex(medium.back().first) + 1);
}

TEST(CompressV2, InflatesToTheV2Encoding) {
  const Pairs pairs = {{1, 5}, {2, 1}, {262143, 3}, {262144, 1}, {262145, 2}, {999999, 4}};
  const std::string v2 = EncodeV2(Layout(1, 1000000, 5), pairs);
  const std::string compressed = CompressV2(v2);
  ASSERT_GT(compressed.size(), 8u);
  EXPECT_EQ(BigEndian32(compressed, 0), 0x1c849314u);
  EXPECT_EQ(BigEndian32(compressed, 4), compressed.size() - 8);
  EXPECT_EQ(Inflate(std::string_view(compressed).substr(8)), v2);
  const Decoded d = DecodeV2(v2);
  // 262144 and 262145 share a bucket (width 2 from 2^18 on).
  const std::map<int64_t, int64_t> want = {{1, 5},
                                           {2, 1},
                                           {262143, 3},
                                           {262144, 3},
                                           {Layout(1, 1000000, 5).CountsArrayIndex(999999), 4}};
  EXPECT_EQ(d.counts, want);
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64(std::string("\xff\xfe\x00", 3)), "//4A");
}

TEST(JavaText, Fixed3AsJavaFormatter) {
  // Java: String.format(Locale.US, "%.3f", d).
  const std::pair<double, const char*> java[] = {
      {0.0, "0.000"},
      {1.0E-4, "0.000"},
      {4.999E-4, "0.000"},
      {5.0E-4, "0.001"},
      {0.0045, "0.005"},
      {0.0625, "0.063"},
      {0.0015, "0.002"},
      {2.0005, "2.001"},
      {1234.5678, "1234.568"},
      {999.9995, "1000.000"},
      {9.9999, "10.000"},
      {0.123456, "0.123"},
      {1.700000000123E9, "1700000000.123"},
      {3.0000000000000004, "3.000"},
      {0.30000000000000004, "0.300"},
      {1.0E20, "100000000000000000000.000"},
      {1.234567890005E8, "123456789.001"},
      {0.9995, "1.000"},
  };
  for (const auto& [d, text] : java) EXPECT_EQ(JavaFixed3(d), text) << d;
  EXPECT_EQ(JavaFixed3(-1.5), "-1.500");
}

TEST(JavaText, DateAsJavaDate) {
  // NOLINTBEGIN(concurrency-mt-unsafe): the test's only thread
  const char* tz = std::getenv("TZ");
  const std::string saved = tz != nullptr ? tz : "";
  setenv("TZ", "UTC", 1);
  tzset();
  // Java (TZ=UTC): new java.util.Date(1700000000123L).toString().
  EXPECT_EQ(JavaDateString(1700000000123), "Tue Nov 14 22:13:20 UTC 2023");
  if (tz != nullptr) {
    setenv("TZ", saved.c_str(), 1);
  } else {
    unsetenv("TZ");
  }
  tzset();
  // NOLINTEND(concurrency-mt-unsafe)
}

TEST(HistogramLog, WritesHistogramLogWriterLines) {
  HlogRun run;
  run.id = 7;
  run.name = "nightly";
  run.unit = "ns";
  run.start_unix_ms = 1700000000123;
  run.highest_trackable_value = 500000;
  HistogramLog log(run);
  const Pairs first = {{100, 3}, {262143, 1}};
  const Pairs second = {{5, 1}, {262144, 2}, {400001, 1}};
  log.Add({.seq = 1,
           .start_unix_ms = 1700000000123,
           .end_unix_ms = 1700000001123,
           .warmup = true,
           .ascending = first});
  log.Add(
      {.seq = 2, .start_unix_ms = 1700000001123, .end_unix_ms = 1700000002124, .ascending = {}});
  log.Skip(3);
  log.Add({.seq = 4,
           .start_unix_ms = 1700000003123,
           .end_unix_ms = 1700000004123,
           .ascending = second});
  EXPECT_EQ(log.windows(), 3);
  EXPECT_EQ(log.records(), 8);
  EXPECT_EQ(log.inexact_records(), 3);
  EXPECT_EQ(log.ExactnessNote(),
            "3 of 8 records are at or above 262144 ns: not exact, each counted in its "
            "HdrHistogram bucket (at most 1/131072 of its value wide; HdrHistogram reports the "
            "bucket's highest value); the others are exact");

  const std::vector<std::string> lines = absl::StrSplit(log.Text(), '\n');
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[0], "#[Histogram log format version 1.3]");
  size_t legend = 0;
  while (
      legend < lines.size() &&
      lines[legend] !=
          R"("StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram")") {
    ++legend;
  }
  ASSERT_LT(legend + 4, lines.size());
  EXPECT_TRUE(lines[legend - 2].starts_with("#[StartTime: 1700000000.123 (seconds since epoch), "))
      << lines[legend - 2];
  EXPECT_EQ(lines[legend - 1], "#[BaseTime: 1700000000.123 (seconds since epoch)]");
  for (size_t i = 1; i + 2 < legend; ++i) {
    EXPECT_TRUE(lines[i].starts_with("#[") && lines[i].ends_with("]")) << lines[i];
  }
  const std::string comments = log.Text().substr(0, log.Text().find("#[StartTime"));
  EXPECT_NE(comments.find("1 warm-up window(s)"), std::string::npos) << comments;
  EXPECT_NE(comments.find("window(s) 3, whose distribution"), std::string::npos) << comments;
  EXPECT_NE(comments.find("3 of 8 records are at or above 262144 ns"), std::string::npos);

  // Lines: [Tag=,]start,length,max in ms,base64 of the compressed V2.
  const auto fields = [&](size_t i) -> std::vector<std::string> {
    return absl::StrSplit(lines[legend + 1 + i], ',');
  };
  ASSERT_EQ(fields(0).size(), 5u);
  EXPECT_EQ(fields(0)[0], "Tag=warmup");
  EXPECT_EQ(fields(0)[1], "0.000");
  EXPECT_EQ(fields(0)[2], "1.000");
  EXPECT_EQ(fields(0)[3], "0.262");  // 262143 ns
  ASSERT_EQ(fields(1).size(), 4u);
  EXPECT_EQ(fields(1)[0], "1.000");
  EXPECT_EQ(fields(1)[1], "1.001");
  EXPECT_EQ(fields(1)[2], "0.000");  // empty
  ASSERT_EQ(fields(2).size(), 4u);
  EXPECT_EQ(fields(2)[0], "3.000");
  EXPECT_EQ(fields(2)[2], "0.400");  // highest equivalent of 400001: 400001
  EXPECT_EQ(lines[legend + 4], "");  // the text ends with the last line's "\n"

  const auto decode = [](const std::string& base64) {
    std::string bytes;
    EXPECT_TRUE(absl::Base64Unescape(base64, &bytes));
    EXPECT_EQ(BigEndian32(bytes, 0), 0x1c849314u);
    return DecodeV2(Inflate(std::string_view(bytes).substr(8)));
  };
  const Decoded d0 = decode(fields(0)[4]);
  EXPECT_EQ(d0.highest, 500000);
  EXPECT_EQ(d0.counts, (std::map<int64_t, int64_t>{{100, 3}, {262143, 1}}));
  const Decoded d1 = decode(fields(1)[3]);
  EXPECT_TRUE(d1.counts.empty());
  EXPECT_EQ(d1.length, 1);
  const HdrLayout l = Layout(1, 500000, 5);
  const Decoded d2 = decode(fields(2)[3]);
  EXPECT_EQ(d2.counts,
            (std::map<int64_t, int64_t>{
                {5, 1}, {l.CountsArrayIndex(262144), 2}, {l.CountsArrayIndex(400001), 1}}));
}

TEST(HistogramLog, LargerValuesThanTheRunsHighestGetTheirOwnLayout) {
  HlogRun run;
  run.unit = "us";
  run.highest_trackable_value = 0;  // raised to 2
  HistogramLog log(run);
  const Pairs values = {{1, 1}, {5000000, 2}};
  log.Add({.seq = 1, .start_unix_ms = 0, .end_unix_ms = 1000, .ascending = values});
  EXPECT_EQ(log.inexact_records(), 2);
  const std::string text = log.Text();
  EXPECT_NE(text.find("highestTrackableValue 2,"), std::string::npos);
  EXPECT_NE(text.find("#[Interval_Max in ms (the max in us / 1000)"), std::string::npos);
  const std::vector<std::string> last =
      absl::StrSplit(text.substr(text.rfind('\n', text.size() - 2) + 1), ',');
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[2], "5000.031");  // highest equivalent of 5000000 (bucket 32 wide) / 1000
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(absl::StripSuffix(last[3], "\n"), &bytes));
  EXPECT_EQ(DecodeV2(Inflate(std::string_view(bytes).substr(8))).highest, 5000000);
}

TEST(HistogramLog, EveryRecordExact) {
  HlogRun run;
  run.highest_trackable_value = 1000;
  HistogramLog log(run);
  const Pairs values = {{0, 4}, {262143, 1}};
  log.Add({.seq = 1, .ascending = values});
  EXPECT_EQ(log.inexact_records(), 0);
  EXPECT_EQ(log.ExactnessNote(), "every one of the 5 records is exact (all below 262144 ns)");
}

}  // namespace
}  // namespace perld::perlctl
