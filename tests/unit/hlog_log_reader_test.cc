// `perlctl import --format hlog` (client/perlctl/hlog_log_reader.h): the
// interval log reader and the V2 histogram decoder.
//
// The golden file tests/unit/hlog/java_2.1.11.hlog was written by the REAL
// HdrHistogram Java library (Debian's libhdrhistogram-java 2.1.11,
// HistogramLogWriter) by tests/unit/hlog/HlogFixture.java, which also
// printed java_2.1.11.expected: each interval's tag, start, length, total
// count and its recordedValues() as (getValueIteratedTo(),
// getCountAtValueIteratedTo()) -- the bucket's highest equivalent value
// and count, as Java reports them. The reader must give exactly those.
// It holds 3-, 5- and 2-digit histograms, one with lowestDiscernibleValue
// 1000, an auto-resizing one, a tagged interval, an empty one and a count
// over 2^31 - 1.
#include "client/perlctl/hlog_log_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/perlctl/hlog_export.h"

namespace perld::perlctl {
namespace {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Expected {
  std::string tag;
  double start = 0;
  double length = 0;
  int64_t total = 0;
  Pairs pairs;
};

std::vector<Expected> ReadExpected(const std::string& path) {
  std::vector<Expected> out;
  std::istringstream in(Slurp(path));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f[0] == "interval") {
      out.push_back(
          {f[1] == "-" ? "" : f[1], std::stod(f[2]), std::stod(f[3]), std::stoll(f[4]), {}});
    } else {
      out.back().pairs.emplace_back(std::stoll(f[0]), std::stoll(f[1]));
    }
  }
  return out;
}

// Every interval of `text` a reader for `tag` selects, or the first error.
absl::StatusOr<std::vector<HlogInterval>> ReadWith(HlogReader& reader, const std::string& text) {
  std::vector<HlogInterval> out;
  int64_t number = 0;
  for (const absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (line.empty()) continue;
    absl::StatusOr<std::optional<HlogInterval>> i = reader.Line(line);
    if (!i.ok()) {
      return absl::Status(i.status().code(),
                          absl::StrCat("line ", number, ": ", i.status().message()));
    }
    if (i->has_value()) out.push_back(**i);
  }
  return out;
}

absl::StatusOr<std::vector<HlogInterval>> ReadAll(const std::string& text,
                                                  std::optional<std::string> tag = std::nullopt) {
  HlogReader reader(std::move(tag));
  return ReadWith(reader, text);
}

const std::string kDir = std::string(PERLD_SOURCE_DIR) + "/tests/unit/hlog/";

TEST(HlogLogReader, JavaWrittenLogDecodesToJavasValues) {
  const std::string text = Slurp(kDir + "java_2.1.11.hlog");
  const std::vector<Expected> want = ReadExpected(kDir + "java_2.1.11.expected");
  ASSERT_EQ(want.size(), 6u);
  std::vector<Expected> untagged;
  for (const Expected& e : want) {
    if (e.tag.empty()) untagged.push_back(e);
  }
  HlogReader reader(std::nullopt);
  absl::StatusOr<std::vector<HlogInterval>> got = ReadWith(reader, text);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), untagged.size());
  for (size_t i = 0; i < got->size(); ++i) {
    const HlogInterval& g = (*got)[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(g.tag, "");
    EXPECT_DOUBLE_EQ(g.offset_s, untagged[i].start);
    EXPECT_DOUBLE_EQ(g.start_s, 1700000000.123 + untagged[i].start);
    EXPECT_DOUBLE_EQ(g.length_s, untagged[i].length);
    EXPECT_EQ(g.histogram.total, untagged[i].total);
    EXPECT_EQ(g.histogram.ascending, untagged[i].pairs);
  }
  EXPECT_EQ(reader.other_tag_lines(), 1);
  EXPECT_EQ(reader.tags_seen(), (std::vector<std::string>{"", "warmup"}));
  EXPECT_EQ(reader.version(), "1.3");
  // The parameters: 3 digits (2048 exact, 1/2^10), 5 (262144, 1/2^17),
  // lowestDiscernibleValue 1000 (nothing exact).
  EXPECT_EQ((*got)[0].histogram.significant_digits, 3);
  EXPECT_EQ((*got)[0].histogram.exact_below, 2048);
  EXPECT_EQ((*got)[0].histogram.relative_bits, 10);
  EXPECT_EQ((*got)[1].histogram.exact_below, 262144);
  EXPECT_EQ((*got)[1].histogram.relative_bits, 17);
  EXPECT_EQ((*got)[2].histogram.lowest_discernible_value, 1000);
  EXPECT_EQ((*got)[2].histogram.exact_below, 0);
  EXPECT_TRUE((*got)[3].histogram.ascending.empty());
  EXPECT_EQ((*got)[4].histogram.ascending.front(),
            std::make_pair(int64_t{7}, int64_t{3'000'000'000}));

  // -tag warmup: only the tagged one.
  got = ReadAll(text, "warmup");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].tag, "warmup");
  EXPECT_EQ((*got)[0].histogram.ascending, want[3].pairs);
}

TEST(HlogLogReader, OwnExportRoundTrips) {
  // perld's own writer (hlog_export.h) at 5 digits: values at or above
  // 2^18 come back as their bucket's top.
  const Pairs in = {{0, 2}, {1, 1}, {262143, 4}, {262144, 3}, {262145, 1}, {1'000'000'001, 9}};
  const HdrLayout layout = *HdrLayout::Make(1, 2'000'000'000, 5);
  const std::string line =
      absl::StrCat("0.000,1.000,1000.000,", Base64(CompressV2(EncodeV2(layout, in))));
  absl::StatusOr<HlogHistogram> h = DecodeHlogHistogram(line.substr(line.rfind(',') + 1));
  ASSERT_TRUE(h.ok()) << h.status();
  const Pairs want = {{0, 2},
                      {1, 1},
                      {262143, 4},
                      {layout.HighestEquivalentValue(262144), 4},
                      {layout.HighestEquivalentValue(1'000'000'001), 9}};
  EXPECT_EQ(h->ascending, want);
  EXPECT_EQ(h->total, 20);
  EXPECT_EQ(want[3].first, 262145);
}

TEST(HlogLogReader, TimesAsJavaDeducesThem) {
  const std::string payload = Base64(CompressV2(EncodeV2(*HdrLayout::Make(1, 1000, 3), {})));
  // No StartTime/BaseTime, absolute stamps: base 0.
  absl::StatusOr<std::vector<HlogInterval>> got =
      ReadAll(absl::StrCat("1700000000.500,2.000,0.0,", payload, "\n"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_DOUBLE_EQ((*got)[0].start_s, 1700000000.5);
  EXPECT_DOUBLE_EQ((*got)[0].offset_s, 0);
  // StartTime only, relative stamps (over a year before it): base StartTime.
  got = ReadAll(absl::StrCat("#[StartTime: 1700000000.000 (seconds since epoch), x]\n",
                             "3.250,1.000,0.0,", payload, "\r\n"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_DOUBLE_EQ((*got)[0].start_s, 1700000003.25);
  EXPECT_DOUBLE_EQ((*got)[0].offset_s, 3.25);
  // An explicit BaseTime.
  got = ReadAll(absl::StrCat("#[StartTime: 1700000001.000 (seconds since epoch), x]\n",
                             "#[BaseTime: 1700000000.000 (seconds since epoch)]\n",
                             "Tag=a,3.000,1.000,0.0,", payload, "\n", "4.000,1.000,0.0,", payload,
                             "\n"));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_DOUBLE_EQ((*got)[0].start_s, 1700000004.0);
  EXPECT_DOUBLE_EQ((*got)[0].offset_s, 3.0);
}

// The compressed form of `v2` under `cookie`.
std::string Wrap(uint32_t cookie, const std::string& v2) {
  std::string c = CompressV2(v2);
  for (int i = 0; i < 4; ++i) c[static_cast<size_t>(i)] = static_cast<char>(cookie >> (24 - 8 * i));
  return Base64(c);
}

TEST(HlogLogReader, RefusesWithReasons) {
  const HdrLayout layout = *HdrLayout::Make(1, 1000, 3);
  const std::string good = EncodeV2(layout, Pairs{{5, 1}});
  const auto error = [](absl::string_view payload) {
    absl::StatusOr<HlogHistogram> h = DecodeHlogHistogram(payload);
    return h.ok() ? std::string("ok") : std::string(h.status().message());
  };
  EXPECT_EQ(error(Base64(CompressV2(good))), "ok");
  EXPECT_EQ(error(Wrap(0x1c849304, good)), "ok");  // the word-size nibble is free
  EXPECT_NE(error("not base64!").find("not Base64"), std::string::npos);
  EXPECT_NE(error("AAAA").find("too short"), std::string::npos);
  EXPECT_NE(error(Wrap(0x1c849322, good)).find("V1 encoding"), std::string::npos);
  EXPECT_NE(error(Wrap(0x1c849309, good)).find("V0 encoding"), std::string::npos);
  EXPECT_NE(error(Wrap(0x0c72124f, good)).find("DoubleHistogram"), std::string::npos);
  EXPECT_NE(error(Wrap(0x12345678, good)).find("cookie 0x12345678"), std::string::npos);
  // The inner cookie.
  std::string bad_inner = good;
  bad_inner[3] = 0x01;
  EXPECT_NE(error(Base64(CompressV2(bad_inner))).find("V2 encoding's"), std::string::npos);
  // Cut zlib stream.
  std::string cut = CompressV2(good);
  cut.resize(cut.size() - 4);
  EXPECT_NE(error(Base64(cut)).find("compressed bytes"), std::string::npos);
  // A corrupted Adler-32 trailer, or a payload length short of the stream.
  std::string sum = CompressV2(good);
  sum.back() = static_cast<char>(sum.back() ^ 1);
  EXPECT_NE(error(Base64(sum)).find("fails its check"), std::string::npos);
  std::string shorter = good;
  shorter[7] = static_cast<char>(shorter[7] - 1);
  EXPECT_NE(error(Base64(CompressV2(shorter))).find("cut or corrupt"), std::string::npos);
  // A count past the counts array.
  std::string past = good.substr(0, 40);
  PutZigZagLong(-(layout.counts_array_length()), &past);
  PutZigZagLong(1, &past);
  const auto set_length = [](std::string* v2) {
    const auto n = static_cast<uint32_t>(v2->size() - 40);
    for (int i = 0; i < 4; ++i)
      (*v2)[4 + static_cast<size_t>(i)] = static_cast<char>(n >> (24 - 8 * i));
  };
  set_length(&past);
  EXPECT_NE(error(Base64(CompressV2(past))).find("past its"), std::string::npos);
  // Counts that overflow.
  std::string overflow = good.substr(0, 40);
  PutZigZagLong(INT64_MAX, &overflow);
  PutZigZagLong(1, &overflow);
  set_length(&overflow);
  EXPECT_NE(error(Base64(CompressV2(overflow))).find("overflows"), std::string::npos);
  // A zero run over 2^31 - 1.
  std::string zeros = good.substr(0, 40);
  PutZigZagLong(-(int64_t{1} << 31), &zeros);
  set_length(&zeros);
  EXPECT_NE(error(Base64(CompressV2(zeros))).find("zero counts"), std::string::npos);
  // Parameters Java refuses (6 digits).
  std::string digits = good;
  digits[15] = 6;
  EXPECT_NE(error(Base64(CompressV2(digits))).find("parameters"), std::string::npos);

  // Lines.
  const std::string payload = Base64(CompressV2(good));
  const auto line_error = [](const std::string& text) {
    absl::StatusOr<std::vector<HlogInterval>> got = ReadAll(text);
    return got.ok() ? std::string("ok") : std::string(got.status().message());
  };
  EXPECT_EQ(line_error("#[Histogram log format version 1.2]\n"), "ok");
  EXPECT_NE(line_error("#[Histogram log format version 1.01]\n").find("versions 1.2 and 1.3"),
            std::string::npos);
  EXPECT_NE(line_error("0.0,1.0," + payload + "\n").find("3 fields"), std::string::npos);
  EXPECT_NE(line_error("0.0,x,1.0," + payload + "\n").find("field 2 (Interval_Length)"),
            std::string::npos);
  EXPECT_NE(line_error("0.0,-1,1.0," + payload + "\n").find("negative"), std::string::npos);
  EXPECT_NE(line_error("0.0,1,1.0," + payload + ",x\n").find("more than 4"), std::string::npos);
  EXPECT_NE(line_error("#[StartTime: soon]\n").find("StartTime"), std::string::npos);
  EXPECT_EQ(line_error("1.5,1,1.0," + payload + "\n"), "ok");
  EXPECT_NE(line_error("1.5,1,1.0,AAAA" + payload + "\n").find("line 1"), std::string::npos);
}

}  // namespace
}  // namespace perld::perlctl
