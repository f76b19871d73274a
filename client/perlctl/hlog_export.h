// `perlctl export RUN --format hlog`: a run's stored periodic windows as an
// HdrHistogram interval log -- the file Java's HistogramLogWriter writes
// (log format version 1.3), read by HistogramLogReader and
// HistogramLogProcessor, one interval histogram per window.
//
// The file:
//   #[Histogram log format version 1.3]
//   #[...] perld's comments: the run, the histogram's parameters, whether
//          every record is exact (see below), the Interval_Max unit, and
//          what the log leaves out (windows without a stored distribution,
//          windows retention dropped, a run still running);
//   #[StartTime: <s.mmm> (seconds since epoch), <java.util.Date text>]
//   #[BaseTime: <s.mmm> (seconds since epoch)]   (both: the run's start)
//   "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//   [Tag=warmup,]<start>,<length>,<max>,<base64>   one line per window
// with start and length in seconds relative to BaseTime (3 decimals),
// Interval_Max in milliseconds (the histogram's max divided by the run
// unit's units per ms, as HistogramLogWriter divides by its
// maxValueUnitRatio), and the histogram in HdrHistogram's compressed V2
// encoding (cookie 0x1c849314, zlib at level 9, of the V2 cookie
// 0x1c849313, payload length, normalizing index offset 0, significant
// digits, lowestDiscernibleValue, highestTrackableValue, ratio 1.0 and the
// counts array in ZigZag LEB128-64b9B, runs of zeros negative), Base64.
// Numbers are formatted as Java's Formatter does (Locale.US, HALF_UP).
// Warm-up windows (Window.warmup) are tagged Tag=warmup: HistogramLogProcessor
// reads untagged lines unless -tag is given, so its default view is the
// run's total. A window without valid latency records is an empty histogram.
//
// Exactness: lowestDiscernibleValue 1 and 5 significant digits (HdrHistogram's
// most) give 2^18 sub-buckets of width 1, so every value below 2^18 = 262144
// units is its own bucket, exact. A larger value is counted in its bucket
// (width 2^k for values in [2^(17+k), 2^(18+k)): at most 1/131072 of the
// value); HdrHistogram then reports the bucket's highest equivalent value.
// The comments say how many records that is (HistogramLog::inexact_records).
//
// Threads: pure functions, and a HistogramLog object owned by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace perld::perlctl {

// HdrHistogram's bucket layout (org.HdrHistogram.AbstractHistogram) for
// (lowestDiscernibleValue, highestTrackableValue, significant digits): the
// index of a value in the counts array and the value range of an index,
// computed as Java computes them.
class HdrLayout {
 public:
  // nullopt where Java's constructor throws: lowest < 1, highest <
  // 2 * lowest, digits outside [0, 5], or the sub-buckets do not fit 62 bits.
  static std::optional<HdrLayout> Make(int64_t lowest_discernible_value,
                                       int64_t highest_trackable_value, int significant_digits);

  // countsArrayIndex(value). REQUIRES: value >= 0. An index at or past
  // counts_array_length() is a value beyond highestTrackableValue's buckets.
  int64_t CountsArrayIndex(int64_t value) const;
  int64_t ValueFromIndex(int64_t index) const;  // the lowest value of index's bucket
  int64_t SizeOfEquivalentValueRange(int64_t value) const;
  int64_t LowestEquivalentValue(int64_t value) const;
  int64_t HighestEquivalentValue(int64_t value) const;

  int64_t lowest_discernible_value() const { return lowest_; }
  int64_t highest_trackable_value() const { return highest_; }
  int significant_digits() const { return digits_; }
  int64_t counts_array_length() const { return counts_array_length_; }
  int64_t sub_bucket_count() const { return int64_t{1} << sub_bucket_count_magnitude_; }
  // Values below this have a bucket of their own (0 unless lowest is 1).
  int64_t exact_below() const { return unit_magnitude_ == 0 ? sub_bucket_count() : 0; }

 private:
  HdrLayout() = default;
  int BucketIndex(int64_t value) const;
  int64_t SubBucketIndex(int64_t value, int bucket_index) const;

  int64_t lowest_ = 1;
  int64_t highest_ = 2;
  int digits_ = 0;
  int unit_magnitude_ = 0;
  int sub_bucket_count_magnitude_ = 0;
  int sub_bucket_half_count_magnitude_ = 0;
  int64_t sub_bucket_half_count_ = 0;
  int64_t sub_bucket_mask_ = 0;
  int leading_zero_count_base_ = 0;
  int64_t counts_array_length_ = 0;
};

// HdrHistogram's ZigZagEncoding.putLong / getLong: ZigZag, then LEB128 of
// up to 8 seven-bit groups and a ninth byte of 8 bits (9 bytes at most).
void PutZigZagLong(int64_t value, std::string* out);
// Reads one value from the front of `in`; false (nothing consumed) when
// `in` ends inside it.
bool GetZigZagLong(std::string_view* in, int64_t* value);

// AbstractHistogram.encodeIntoByteBuffer (V2) of the histogram with `layout`
// holding `ascending` (value, count) pairs: strictly ascending values >= 0,
// counts >= 1, every value's index below layout.counts_array_length().
std::string EncodeV2(const HdrLayout& layout,
                     std::span<const std::pair<int64_t, int64_t>> ascending);
// encodeIntoCompressedByteBuffer's form of a V2 encoding: its cookie, the
// deflated length and the zlib stream (level 9, as HistogramLogWriter).
std::string CompressV2(std::string_view v2);
std::string Base64(std::string_view bytes);  // RFC 4648, padded

// String.format(Locale.US, "%.3f", x): the shortest decimal of x rounded
// HALF_UP to 3 decimals (printf's "%.3f" rounds the binary value instead).
std::string JavaFixed3(double x);
// new java.util.Date(unix_ms).toString() in this process's local time zone:
// "Tue Nov 14 22:13:20 UTC 2023".
std::string JavaDateString(int64_t unix_ms);

// The histogram parameters of every line.
inline constexpr int64_t kHlogLowestDiscernibleValue = 1;
inline constexpr int kHlogSignificantDigits = 5;

struct HlogRun {
  uint64_t id = 0;
  std::string name;
  std::string unit = "ns";  // "ns", "us" or "ms"
  int64_t start_unix_ms = 0;
  // >= every window's largest value (at least 2): the highestTrackableValue
  // of every line (a window holding a larger value gets its own).
  int64_t highest_trackable_value = 2;
  bool running = false;         // the log holds the windows closed so far
  int64_t dropped_windows = 0;  // the oldest windows retention dropped
};

struct HlogWindow {
  int64_t seq = 0;
  int64_t start_unix_ms = 0;
  int64_t end_unix_ms = 0;
  bool warmup = false;
  // The window's exact distribution: ascending (latency, count), counts >= 1.
  std::span<const std::pair<int64_t, int64_t>> ascending;
};

// The log of one run, built window by window.
class HistogramLog {
 public:
  explicit HistogramLog(HlogRun run);

  void Add(const HlogWindow& window);  // in the order the lines are to appear
  // A window whose distribution the daemon does not hold: named in the
  // comments, no line.
  void Skip(int64_t seq) { skipped_.push_back(seq); }

  // The file: comments, StartTime, BaseTime, legend, the lines.
  std::string Text() const;

  int64_t windows() const { return windows_; }
  int64_t records() const { return records_; }
  // Records at or above exact_below(): counted in a bucket wider than 1.
  int64_t inexact_records() const { return inexact_records_; }
  int64_t exact_below() const { return exact_below_; }
  const std::vector<int64_t>& skipped() const { return skipped_; }
  // The comment on exactness, also for stderr: "every record is exact ..."
  // or "N of M records are at or above ...".
  std::string ExactnessNote() const;

 private:
  HlogRun run_;
  double max_unit_ratio_ = 1e6;  // run units per millisecond
  int64_t exact_below_ = 0;
  std::string lines_;
  int64_t windows_ = 0;
  int64_t warmup_windows_ = 0;
  int64_t records_ = 0;
  int64_t inexact_records_ = 0;
  std::vector<int64_t> skipped_;
};

}  // namespace perld::perlctl
