#include "client/perlctl/hlog_log_reader.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/perlctl/hlog_export.h"

namespace perld::perlctl {
namespace {

// AbstractHistogram's cookie bases (the word-size nibble 0xf0 masked off).
constexpr uint32_t kV2Encoding = 0x1c849303;
constexpr uint32_t kV2Compressed = 0x1c849304;
constexpr uint32_t kV1Encoding = 0x1c849301;
constexpr uint32_t kV1Compressed = 0x1c849302;
constexpr uint32_t kV0Encoding = 0x1c849308;
constexpr uint32_t kV0Compressed = 0x1c849309;
// DoubleHistogram's.
constexpr uint32_t kDoubleEncoding = 0x0c72124e;
constexpr uint32_t kDoubleCompressed = 0x0c72124f;
constexpr size_t kV2HeaderBytes = 40;
constexpr double kYearSeconds = 365 * 24 * 3600.0;

uint32_t CookieBase(uint32_t cookie) { return cookie & ~uint32_t{0xf0}; }

uint32_t GetInt32(absl::string_view b, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(b[at + i]);
  return v;
}

uint64_t GetInt64(absl::string_view b, size_t at) {
  return uint64_t{GetInt32(b, at)} << 32 | GetInt32(b, at + 4);
}

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("the histogram ", why));
}

// Inflates `deflated` into exactly `out->size()` bytes. False when the
// stream is corrupt or ends first -- or, with `must_end`, goes on after
// them or fails its Adler-32 check (Java stops reading once it has the
// bytes; a corrupted log is refused here instead).
bool InflateExactly(absl::string_view deflated, std::string* out, bool must_end) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return false;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(deflated.data()));
  z.avail_in = static_cast<uInt>(deflated.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  int rc = Z_OK;
  while (z.avail_out > 0 && rc == Z_OK) rc = inflate(&z, Z_NO_FLUSH);
  bool ok = z.avail_out == 0 && (rc == Z_OK || rc == Z_STREAM_END);
  if (ok && must_end && rc != Z_STREAM_END) {
    char extra = 0;
    z.next_out = reinterpret_cast<Bytef*>(&extra);
    z.avail_out = 1;
    ok = inflate(&z, Z_FINISH) == Z_STREAM_END && z.avail_out == 1;
  }
  inflateEnd(&z);
  return ok;
}

// A double field of a data line (Java's Scanner.nextDouble: finite here).
std::optional<double> Number(absl::string_view text) {
  double d = 0;
  if (text.empty() || !absl::SimpleAtod(text, &d) || !std::isfinite(d)) return std::nullopt;
  // SimpleAtod takes "inf", "nan", hex: only a decimal is a log's number.
  for (const char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '+' &&
        c != 'e' && c != 'E') {
      return std::nullopt;
    }
  }
  return d;
}

// The number after `prefix` in a "#[StartTime: N (...)]" comment.
absl::StatusOr<double> CommentTime(absl::string_view line, absl::string_view prefix) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(prefix.size()));
  const size_t end = rest.find_first_of(" ]");
  const std::optional<double> v = Number(rest.substr(0, end));
  if (!v) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", prefix, "' is not followed by seconds since the epoch"));
  }
  return *v;
}

}  // namespace

absl::StatusOr<HlogHistogram> DecodeHlogHistogram(absl::string_view base64) {
  std::string bytes;
  if (base64.empty() || base64.size() % 4 != 0 || !absl::Base64Unescape(base64, &bytes)) {
    return Bad("is not Base64 text (RFC 4648, padded)");
  }
  if (bytes.size() < 8) return Bad(absl::StrCat("is ", bytes.size(), " bytes: too short"));
  const uint32_t cookie = GetInt32(bytes, 0);
  const uint32_t base = CookieBase(cookie);
  if (cookie == kDoubleEncoding || cookie == kDoubleCompressed) {
    return Bad(
        "is a DoubleHistogram: its values are not integers (perlctl imports Histogram, "
        "IntCountsHistogram, ShortCountsHistogram logs)");
  }
  if (base == kV1Compressed || base == kV0Compressed || base == kV1Encoding ||
      base == kV0Encoding) {
    return Bad(absl::StrFormat(
        "has cookie 0x%08x: HdrHistogram's %s encoding (before 2.1, log format before 1.2), "
        "which perlctl does not read; rewrite the log with HdrHistogram 2.1 or later",
        cookie, base == kV1Compressed || base == kV1Encoding ? "V1" : "V0"));
  }
  if (base == kV2Encoding) {
    return Bad(
        absl::StrFormat("has cookie 0x%08x: an uncompressed V2 encoding, not the "
                        "compressed one a log line holds",
                        cookie));
  }
  if (base != kV2Compressed) {
    return Bad(absl::StrFormat(
        "has cookie 0x%08x: not an HdrHistogram compressed histogram (0x1c849314)", cookie));
  }
  const uint32_t deflated_length = GetInt32(bytes, 4);
  if (deflated_length > bytes.size() - 8) {
    return Bad(
        absl::StrCat("says ", deflated_length, " compressed bytes; it has ", bytes.size() - 8));
  }
  const absl::string_view deflated = absl::string_view(bytes).substr(8, deflated_length);
  std::string header(kV2HeaderBytes, '\0');
  if (!InflateExactly(deflated, &header, /*must_end=*/false)) {
    return Bad("is not a zlib stream holding a V2 header (corrupt or cut)");
  }
  const uint32_t inner = GetInt32(header, 0);
  if (CookieBase(inner) != kV2Encoding) {
    return Bad(
        absl::StrFormat("holds cookie 0x%08x where the V2 encoding's (0x1c849313) is due", inner));
  }
  const uint32_t payload_length = GetInt32(header, 4);
  const auto digits = static_cast<int32_t>(GetInt32(header, 12));
  const auto lowest = static_cast<int64_t>(GetInt64(header, 16));
  const auto highest = static_cast<int64_t>(GetInt64(header, 24));
  const std::optional<HdrLayout> layout = HdrLayout::Make(lowest, highest, digits);
  if (!layout) {
    return Bad(absl::StrCat("has parameters HdrHistogram refuses: lowestDiscernibleValue ", lowest,
                            ", highestTrackableValue ", highest, ", ", digits,
                            " significant digits"));
  }
  // Every count takes 1 to 9 bytes (a zero run less): a longer payload
  // cannot fit the counts array.
  if (uint64_t{payload_length} > 9 * static_cast<uint64_t>(layout->counts_array_length())) {
    return Bad(absl::StrCat("says a ", payload_length, "-byte payload: more than ",
                            layout->counts_array_length(), " counts can take"));
  }
  std::string all(kV2HeaderBytes + payload_length, '\0');
  if (!InflateExactly(deflated, &all, /*must_end=*/true)) {
    return Bad(absl::StrCat("payload is cut or corrupt (", payload_length,
                            " bytes said; the zlib stream does not hold exactly them, or fails "
                            "its check)"));
  }
  HlogHistogram h;
  h.lowest_discernible_value = lowest;
  h.highest_trackable_value = highest;
  h.significant_digits = digits;
  h.exact_below = layout->exact_below();
  h.relative_bits = std::countr_zero(static_cast<uint64_t>(layout->sub_bucket_count())) - 1;
  std::string_view in = std::string_view(all).substr(kV2HeaderBytes);
  int64_t index = 0;
  while (!in.empty()) {
    int64_t count = 0;
    if (!GetZigZagLong(&in, &count)) return Bad("payload ends inside a count");
    if (count < 0) {
      if (count < -int64_t{std::numeric_limits<int32_t>::max()}) {
        return Bad("has a run of over 2^31 - 1 zero counts (HdrHistogram refuses it)");
      }
      index += -count;
      continue;
    }
    if (index >= layout->counts_array_length()) {
      return Bad(absl::StrCat("has a count at index ", index, ", past its ",
                              layout->counts_array_length(), " buckets (highestTrackableValue ",
                              highest, ")"));
    }
    if (count > 0) {
      const int64_t low = layout->ValueFromIndex(index);
      const int64_t width = layout->SizeOfEquivalentValueRange(std::max<int64_t>(low, 0));
      if (low < 0 || low > std::numeric_limits<int64_t>::max() - (width - 1)) {
        return Bad(absl::StrCat("has a count in a bucket above 2^63 - 1 (index ", index, ")"));
      }
      if (__builtin_add_overflow(h.total, count, &h.total)) {
        return Bad("has counts whose sum overflows a 64-bit integer");
      }
      h.ascending.emplace_back(low + (width - 1), count);
    }
    ++index;
  }
  return h;
}

absl::StatusOr<std::optional<HlogInterval>> HlogReader::Line(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (absl::StartsWith(line, "#")) {
    static constexpr absl::string_view kVersion = "#[Histogram log format version ";
    static constexpr absl::string_view kStart = "#[StartTime:";
    static constexpr absl::string_view kBase = "#[BaseTime:";
    if (absl::StartsWith(line, kVersion)) {
      absl::string_view v = line.substr(kVersion.size());
      v = v.substr(0, v.find(']'));
      if (v != "1.2" && v != "1.3") {
        return absl::InvalidArgumentError(
            absl::StrCat("log format version '", v,
                         "': perlctl reads versions 1.2 and 1.3 (V2-encoded histograms)"));
      }
      version_ = std::string(v);
    } else if (absl::StartsWith(line, kStart)) {
      absl::StatusOr<double> t = CommentTime(line, kStart);
      if (!t.ok()) return t.status();
      start_time_s_ = *t;
    } else if (absl::StartsWith(line, kBase)) {
      absl::StatusOr<double> t = CommentTime(line, kBase);
      if (!t.ok()) return t.status();
      base_time_s_ = *t;
    }
    return std::nullopt;
  }
  if (absl::StartsWith(line, "\"StartTimestamp\"")) return std::nullopt;  // the legend
  std::string tag;
  if (absl::StartsWith(line, "Tag=")) {
    const size_t comma = line.find(',');
    if (comma == absl::string_view::npos) {
      return absl::InvalidArgumentError("a Tag= without the interval's fields after it");
    }
    tag = std::string(line.substr(4, comma - 4));
    if (tag.empty()) return absl::InvalidArgumentError("an empty Tag=");
    line.remove_prefix(comma + 1);
  }
  absl::string_view fields[4];
  size_t n = 0;
  for (size_t from = 0;;) {
    const size_t comma = line.find(',', from);
    if (n == 4) {
      n = 5;
      break;
    }
    fields[n++] = absl::StripAsciiWhitespace(line.substr(from, comma - from));
    if (comma == absl::string_view::npos) break;
    from = comma + 1;
  }
  if (n != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        n > 4 ? "more than 4" : absl::StrCat(n).c_str(),
        " fields, not an interval line ([Tag=NAME,]StartTimestamp,Interval_Length,Interval_Max,"
        "Interval_Compressed_Histogram)"));
  }
  static constexpr const char* kNames[] = {"StartTimestamp", "Interval_Length", "Interval_Max"};
  double v[3] = {};
  for (int i = 0; i < 3; ++i) {
    const std::optional<double> d = Number(fields[i]);
    if (!d) {
      return absl::InvalidArgumentError(
          absl::StrCat("field ", i + 1, " (", kNames[i], "): '", fields[i], "' is not a number"));
    }
    v[i] = *d;
  }
  if (v[1] < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 2 (Interval_Length): ", fields[1], " is negative"));
  }
  if (std::find(tags_seen_.begin(), tags_seen_.end(), tag) == tags_seen_.end()) {
    tags_seen_.push_back(tag);
  }
  // HistogramLogReader's deductions at the first interval.
  if (!start_time_s_) start_time_s_ = v[0];
  if (!base_time_s_) base_time_s_ = v[0] < *start_time_s_ - kYearSeconds ? *start_time_s_ : 0.0;
  if (tag != tag_.value_or("")) {
    ++other_tag_lines_;
    return std::nullopt;
  }
  absl::StatusOr<HlogHistogram> h = DecodeHlogHistogram(fields[3]);
  if (!h.ok()) return h.status();
  HlogInterval out;
  out.tag = std::move(tag);
  out.start_s = v[0] + *base_time_s_;
  out.length_s = v[1];
  out.offset_s = out.start_s - *start_time_s_;
  out.histogram = *std::move(h);
  return out;
}

}  // namespace perld::perlctl
