#include "client/perlctl/hlog_export.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "daemon/core/contract.h"

namespace perld::perlctl {
namespace {

// AbstractHistogram's V2 cookies, with the 0x10 of "TLZE" (ZigZag LEB128)
// words that Java ors in when it encodes.
constexpr uint32_t kV2EncodingCookie = 0x1c849303 | 0x10;
constexpr uint32_t kV2CompressedEncodingCookie = 0x1c849304 | 0x10;

void PutInt32(uint32_t v, std::string* out) {  // big-endian, as Java's ByteBuffer
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void PutInt64(uint64_t v, std::string* out) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

}  // namespace

std::optional<HdrLayout> HdrLayout::Make(int64_t lowest_discernible_value,
                                         int64_t highest_trackable_value, int significant_digits) {
  // The checks and arithmetic of AbstractHistogram's constructor and init().
  if (lowest_discernible_value < 1 || lowest_discernible_value > INT64_MAX / 2 ||
      highest_trackable_value < 2 * lowest_discernible_value || significant_digits < 0 ||
      significant_digits > 5) {
    return std::nullopt;
  }
  HdrLayout l;
  l.lowest_ = lowest_discernible_value;
  l.highest_ = highest_trackable_value;
  l.digits_ = significant_digits;
  const int64_t largest_value_with_single_unit_resolution =
      2 * static_cast<int64_t>(std::pow(10.0, significant_digits));
  l.unit_magnitude_ =
      static_cast<int>(std::log(static_cast<double>(lowest_discernible_value)) / std::log(2.0));
  l.sub_bucket_count_magnitude_ = static_cast<int>(std::ceil(
      std::log(static_cast<double>(largest_value_with_single_unit_resolution)) / std::log(2.0)));
  l.sub_bucket_half_count_magnitude_ = l.sub_bucket_count_magnitude_ - 1;
  l.sub_bucket_half_count_ = l.sub_bucket_count() / 2;
  l.sub_bucket_mask_ = (l.sub_bucket_count() - 1) << l.unit_magnitude_;
  if (l.sub_bucket_count_magnitude_ + l.unit_magnitude_ > 62) return std::nullopt;
  // getBucketsNeededToCoverValue, getLengthForNumberOfBuckets.
  int64_t smallest_untrackable_value = l.sub_bucket_count() << l.unit_magnitude_;
  int64_t buckets_needed = 1;
  while (smallest_untrackable_value <= highest_trackable_value) {
    if (smallest_untrackable_value > INT64_MAX / 2) {
      ++buckets_needed;
      break;
    }
    smallest_untrackable_value <<= 1;
    ++buckets_needed;
  }
  l.counts_array_length_ = (buckets_needed + 1) * l.sub_bucket_half_count_;
  l.leading_zero_count_base_ = 64 - l.unit_magnitude_ - l.sub_bucket_count_magnitude_;
  return l;
}

int HdrLayout::BucketIndex(int64_t value) const {
  return leading_zero_count_base_ -
         std::countl_zero(static_cast<uint64_t>(value) | static_cast<uint64_t>(sub_bucket_mask_));
}

int64_t HdrLayout::SubBucketIndex(int64_t value, int bucket_index) const {
  return static_cast<int64_t>(static_cast<uint64_t>(value) >> (bucket_index + unit_magnitude_));
}

int64_t HdrLayout::CountsArrayIndex(int64_t value) const {
  PERLD_CONTRACT(value >= 0, "HdrLayout::CountsArrayIndex of a negative value");
  const int bucket_index = BucketIndex(value);
  const int64_t sub_bucket_index = SubBucketIndex(value, bucket_index);
  const int64_t bucket_base_index = int64_t{bucket_index + 1} << sub_bucket_half_count_magnitude_;
  return bucket_base_index + (sub_bucket_index - sub_bucket_half_count_);
}

int64_t HdrLayout::ValueFromIndex(int64_t index) const {
  int64_t bucket_index = (index >> sub_bucket_half_count_magnitude_) - 1;
  int64_t sub_bucket_index = (index & (sub_bucket_half_count_ - 1)) + sub_bucket_half_count_;
  if (bucket_index < 0) {
    sub_bucket_index -= sub_bucket_half_count_;
    bucket_index = 0;
  }
  return sub_bucket_index << (bucket_index + unit_magnitude_);
}

int64_t HdrLayout::SizeOfEquivalentValueRange(int64_t value) const {
  return int64_t{1} << (unit_magnitude_ + BucketIndex(value));
}

int64_t HdrLayout::LowestEquivalentValue(int64_t value) const {
  const int bucket_index = BucketIndex(value);
  return SubBucketIndex(value, bucket_index) << (bucket_index + unit_magnitude_);
}

int64_t HdrLayout::HighestEquivalentValue(int64_t value) const {
  return LowestEquivalentValue(value) + (SizeOfEquivalentValueRange(value) - 1);
}

void PutZigZagLong(int64_t value, std::string* out) {
  uint64_t z = (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
  for (int i = 0; i < 8; ++i) {
    if ((z >> 7) == 0) {
      out->push_back(static_cast<char>(z));
      return;
    }
    out->push_back(static_cast<char>((z & 0x7f) | 0x80));
    z >>= 7;
  }
  out->push_back(static_cast<char>(z));  // the ninth byte: 8 bits, no continuation
}

bool GetZigZagLong(std::string_view* in, int64_t* value) {
  uint64_t z = 0;
  size_t i = 0;
  for (;; ++i) {
    if (i >= in->size()) return false;
    const auto byte = static_cast<uint8_t>((*in)[i]);
    if (i == 8) {
      z |= uint64_t{byte} << 56;
      break;
    }
    z |= uint64_t{byte & 0x7fu} << (7 * i);
    if ((byte & 0x80) == 0) break;
  }
  in->remove_prefix(i + 1);
  *value = static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  return true;
}

std::string EncodeV2(const HdrLayout& layout,
                     std::span<const std::pair<int64_t, int64_t>> ascending) {
  std::string out;
  PutInt32(kV2EncodingCookie, &out);
  PutInt32(0, &out);  // the payload length, set below
  PutInt32(0, &out);  // normalizingIndexOffset
  PutInt32(static_cast<uint32_t>(layout.significant_digits()), &out);
  PutInt64(static_cast<uint64_t>(layout.lowest_discernible_value()), &out);
  PutInt64(static_cast<uint64_t>(layout.highest_trackable_value()), &out);
  PutInt64(std::bit_cast<uint64_t>(1.0), &out);  // integerToDoubleValueConversionRatio
  const size_t payload_start = out.size();
  // fillBufferFromCountsArray over indexes 0..countsArrayIndex(max): a count
  // as itself, a single zero as 0, a run of n > 1 zeros as -n. The counts
  // array is implicit: values ascend, so their indexes do too.
  int64_t next_index = 0;  // the first index not yet written
  int64_t pending_index = -1;
  int64_t pending_count = 0;
  const auto flush = [&] {
    const int64_t zeros = pending_index - next_index;
    if (zeros == 1) PutZigZagLong(0, &out);
    if (zeros > 1) PutZigZagLong(-zeros, &out);
    PutZigZagLong(pending_count, &out);
    next_index = pending_index + 1;
  };
  for (const auto& [value, count] : ascending) {
    const int64_t index = layout.CountsArrayIndex(value);
    PERLD_CONTRACT(index < layout.counts_array_length(), "EncodeV2: a value past the layout");
    if (index == pending_index) {
      pending_count += count;  // values sharing a bucket
      continue;
    }
    if (pending_index >= 0) flush();
    pending_index = index;
    pending_count = count;
  }
  if (pending_index >= 0) {
    flush();
  } else {
    PutZigZagLong(0, &out);  // empty: countsArrayIndex(0) + 1 = one zero count
  }
  const auto payload_length = static_cast<uint32_t>(out.size() - payload_start);
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<char>(payload_length >> (24 - 8 * i));
  return out;
}

std::string CompressV2(std::string_view v2) {
  uLongf length = compressBound(static_cast<uLong>(v2.size()));
  std::string deflated(length, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(deflated.data()), &length,
                           reinterpret_cast<const Bytef*>(v2.data()), static_cast<uLong>(v2.size()),
                           Z_BEST_COMPRESSION);
  PERLD_CONTRACT(rc == Z_OK, "CompressV2: compress2 failed");
  (void)rc;
  deflated.resize(length);
  std::string out;
  PutInt32(kV2CompressedEncodingCookie, &out);
  PutInt32(static_cast<uint32_t>(deflated.size()), &out);
  return out + deflated;
}

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = uint32_t{static_cast<uint8_t>(bytes[i])} << 16 |
                       uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8 |
                       uint32_t{static_cast<uint8_t>(bytes[i + 2])};
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(n >> shift) & 63]);
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t n = uint32_t{static_cast<uint8_t>(bytes[i])} << 16;
    if (rest == 2) n |= uint32_t{static_cast<uint8_t>(bytes[i + 1])} << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string JavaFixed3(double x) {
  if (!std::isfinite(x)) return std::isnan(x) ? "NaN" : (x > 0 ? "Infinity" : "-Infinity");
  // The shortest decimal that reads back as x: digits d1 d2 ... dn, x =
  // 0.d1...dn * 10^point.
  char buf[64];
  const auto [end, ec] =
      std::to_chars(buf, buf + sizeof(buf), std::fabs(x), std::chars_format::scientific);
  (void)ec;
  const std::string_view text(buf, static_cast<size_t>(end - buf));
  const size_t e = text.find('e');
  std::string digits;
  for (const char c : text.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  const int point = std::atoi(std::string(text.substr(e + 1)).c_str()) + 1;
  // The digits to keep: those before the point and 3 after it.
  const int keep = point + 3;
  std::string kept;  // x * 1000 rounded HALF_UP, in decimal (maybe with leading zeros)
  if (keep <= 0) {
    kept.assign(1, keep == 0 && digits[0] >= '5' ? '1' : '0');  // below 0.0005: 0
  } else if (static_cast<size_t>(keep) >= digits.size()) {
    kept = digits + std::string(static_cast<size_t>(keep) - digits.size(), '0');
  } else {
    kept = digits.substr(0, static_cast<size_t>(keep));
    if (digits[static_cast<size_t>(keep)] >= '5') {
      size_t i = kept.size();
      while (i > 0 && kept[i - 1] == '9') kept[--i] = '0';
      if (i == 0) {
        kept = absl::StrCat("1", kept);
      } else {
        ++kept[i - 1];
      }
    }
  }
  const size_t nonzero = kept.find_first_not_of('0');
  kept = nonzero == std::string::npos ? "" : kept.substr(nonzero);
  if (kept.size() < 4) kept = absl::StrCat(std::string(4 - kept.size(), '0'), kept);
  const size_t integer_digits = kept.size() - 3;
  return absl::StrCat(std::signbit(x) ? "-" : "", kept.substr(0, integer_digits), ".",
                      kept.substr(integer_digits));
}

std::string JavaDateString(int64_t unix_ms) {
  const auto seconds =
      static_cast<std::time_t>(unix_ms >= 0 ? unix_ms / 1000 : -((-unix_ms + 999) / 1000));
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char buf[96];
  const size_t n = std::strftime(buf, sizeof(buf), "%a %b %d %H:%M:%S %Z %Y", &tm);
  return std::string(buf, n);
}

HistogramLog::HistogramLog(HlogRun run) : run_(std::move(run)) {
  max_unit_ratio_ = run_.unit == "ns" ? 1e6 : run_.unit == "us" ? 1e3 : 1.0;
  run_.highest_trackable_value = std::max<int64_t>(run_.highest_trackable_value, 2);
  exact_below_ = HdrLayout::Make(kHlogLowestDiscernibleValue, run_.highest_trackable_value,
                                 kHlogSignificantDigits)
                     .value()
                     .exact_below();
}

void HistogramLog::Add(const HlogWindow& window) {
  const std::span<const std::pair<int64_t, int64_t>> values = window.ascending;
  const int64_t largest = values.empty() ? 0 : values.back().first;
  const HdrLayout layout =
      HdrLayout::Make(kHlogLowestDiscernibleValue, std::max(run_.highest_trackable_value, largest),
                      kHlogSignificantDigits)
          .value();
  for (const auto& [value, count] : values) {
    records_ += count;
    if (value >= exact_below_) inexact_records_ += count;
  }
  ++windows_;
  if (window.warmup) {
    ++warmup_windows_;
    lines_ += "Tag=warmup,";
  }
  // HistogramLogWriter.outputIntervalHistogram(histogram): seconds from the
  // base time, the length as end - start, getMaxValue() / maxValueUnitRatio.
  const double start = static_cast<double>(window.start_unix_ms - run_.start_unix_ms) / 1000.0;
  const double end = static_cast<double>(window.end_unix_ms - run_.start_unix_ms) / 1000.0;
  const int64_t max = largest == 0 ? 0 : layout.HighestEquivalentValue(largest);
  absl::StrAppend(&lines_, JavaFixed3(start), ",", JavaFixed3(end - start), ",",
                  JavaFixed3(static_cast<double>(max) / max_unit_ratio_), ",",
                  Base64(CompressV2(EncodeV2(layout, values))), "\n");
}

std::string HistogramLog::ExactnessNote() const {
  const std::string limit = absl::StrCat(exact_below_, " ", run_.unit);
  if (inexact_records_ == 0) {
    return absl::StrCat("every one of the ", records_, " records is exact (all below ", limit, ")");
  }
  return absl::StrCat(inexact_records_, " of ", records_, " records are at or above ", limit,
                      ": not exact, each counted in its HdrHistogram bucket (at most 1/",
                      exact_below_ / 2, " of its value wide; HdrHistogram reports the bucket's ",
                      "highest value); the others are exact");
}

std::string HistogramLog::Text() const {
  std::string out = "#[Histogram log format version 1.3]\n";
  // One line whatever the name holds.
  const std::string name = absl::StrReplaceAll(run_.name, {{"\n", " "}, {"\r", " "}});
  absl::StrAppend(&out, "#[perld run ", run_.id, " \"", name, "\": ", windows_,
                  " periodic window(s), one interval histogram each, latencies in ", run_.unit,
                  "]\n");
  absl::StrAppend(&out, "#[lowestDiscernibleValue ", kHlogLowestDiscernibleValue,
                  ", highestTrackableValue ", run_.highest_trackable_value, ", ",
                  kHlogSignificantDigits, " significant digits: values below ", exact_below_, " ",
                  run_.unit, " are exact]\n");
  absl::StrAppend(&out, "#[", ExactnessNote(), "]\n");
  absl::StrAppend(&out, "#[Interval_Max in ms (the max in ", run_.unit, " / ",
                  static_cast<int64_t>(max_unit_ratio_),
                  "); HistogramLogProcessor -outputValueUnitRatio 1 ", "prints ", run_.unit, "]\n");
  if (warmup_windows_ > 0) {
    absl::StrAppend(&out, "#[", warmup_windows_,
                    " warm-up window(s), not in the run's total, are tagged Tag=warmup]\n");
  }
  if (!skipped_.empty()) {
    absl::StrAppend(&out, "#[Not in this log: window(s) ", absl::StrJoin(skipped_, " "),
                    ", whose distribution the daemon does not store]\n");
  }
  if (run_.dropped_windows > 0) {
    absl::StrAppend(&out, "#[Not in this log: the run's oldest ", run_.dropped_windows,
                    " window(s), no longer retained (retention.maxWindowsPerRun)]\n");
  }
  if (run_.running) {
    absl::StrAppend(&out, "#[The run is still running: the windows closed so far]\n");
  }
  const double start = static_cast<double>(run_.start_unix_ms) / 1000.0;
  absl::StrAppend(&out, "#[StartTime: ", JavaFixed3(start), " (seconds since epoch), ",
                  JavaDateString(run_.start_unix_ms), "]\n");
  absl::StrAppend(&out, "#[BaseTime: ", JavaFixed3(start), " (seconds since epoch)]\n");
  out +=
      "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";
  return out + lines_;
}

}  // namespace perld::perlctl
