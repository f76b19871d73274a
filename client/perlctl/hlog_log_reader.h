// HdrHistogram interval logs for `perlctl import --format hlog`: the files
// Java's HistogramLogWriter writes (log format versions 1.2 and 1.3), read
// as HistogramLogReader / HistogramLogScanner (HdrHistogram 2.1.x) reads
// them:
//
//   #...                                    a comment (ignored), except:
//   #[Histogram log format version 1.3]     1.2 or 1.3, else refused
//   #[StartTime: 1700000000.123 (seconds since epoch), ...]
//   #[BaseTime: 1700000000.123 (seconds since epoch)]
//   "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//   [Tag=NAME,]START,LENGTH,MAX,BASE64      one interval histogram
//
// An interval's absolute start is START + BaseTime (seconds). Without a
// BaseTime line the reader deduces it as Java does at the first interval:
// StartTime when START lies more than a year before it (relative stamps),
// else 0; without a StartTime line, StartTime is the first START. MAX is
// checked to be a number and otherwise ignored (Java skips it too: the
// histogram holds its max).
//
// The histogram (DecodeHlogHistogram): Base64 of HdrHistogram's compressed
// V2 encoding -- a cookie whose base (cookie & ~0xf0) is 0x1c849304, the
// deflated length, then zlib of the V2 encoding: cookie base 0x1c849303,
// payload length, normalizing index offset, significant digits,
// lowestDiscernibleValue, highestTrackableValue, integer-to-double ratio
// (big-endian) and the counts array as ZigZag LEB128 longs (a negative one:
// that many zero counts). The normalizing index offset and the ratio do not
// change which value each count belongs to (Java stores counts by logical
// index) and are ignored. Refused, with the reason: a DoubleHistogram
// (cookie 0x0c72124e/f: its values are not integers), the V0/V1 encodings
// of HdrHistogram before 2.1 (log format versions before 1.2), any other
// cookie, bad Base64, a zlib stream that is cut or corrupt, parameters
// Java's constructor refuses, a count past the counts array (Java's
// ArrayIndexOutOfBounds), a zero run over 2^31 - 1, counts whose sum
// overflows an int64 (Java's would wrap), a bucket above 2^63 - 1.
//
// Values. Each non-zero count is reported at its bucket's HIGHEST
// equivalent value (AbstractHistogram.highestEquivalentValue): the value
// HdrHistogram itself reports for it -- getValueAtPercentile (levels above
// 0), the .hgrm rows of outputPercentileDistribution / HistogramLogProcessor,
// recordedValues().getValueIteratedTo(), getMaxValue(). So the exact
// nearest-rank percentiles of the imported values are the processor's
// percentiles of the log. With lowestDiscernibleValue 1 every value below
// exact_below (2^ceil(log2(2 * 10^digits)): 2048 at 3 digits, 262144 at 5)
// has a bucket of width 1, so its value is the raw one; above, a value is
// at most the raw one + raw / 2^relative_bits (the bucket of values in
// [2^(m+k), 2^(m+k+1)) is 2^k wide, m = relative_bits).
//
// Pure functions, and an HlogReader object owned by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::perlctl {

struct HlogHistogram {
  int64_t lowest_discernible_value = 1;
  int64_t highest_trackable_value = 2;
  int significant_digits = 0;
  // Values below this are their own bucket (0 unless lowest is 1).
  int64_t exact_below = 0;
  // A bucket above the exact range is at most value / 2^relative_bits wide.
  int relative_bits = 0;
  // Ascending (highest equivalent value, count), counts >= 1.
  std::vector<std::pair<int64_t, int64_t>> ascending;
  int64_t total = 0;  // the counts' sum
};

// Decodes one interval's payload (the Base64 text). InvalidArgument saying
// what is wrong (see above).
absl::StatusOr<HlogHistogram> DecodeHlogHistogram(absl::string_view base64);

struct HlogInterval {
  std::string tag;      // "" for an untagged line
  double start_s = 0;   // absolute: START + BaseTime, seconds (since the epoch for logs
                        // with absolute or based stamps)
  double length_s = 0;  // LENGTH, >= 0
  double offset_s = 0;  // start_s - StartTime
  HlogHistogram histogram;
};

class HlogReader {
 public:
  // Which tag to decode: nullopt the untagged lines (HistogramLogProcessor's
  // default), else the lines tagged exactly so (its -tag). Other lines are
  // checked (their fields, not their payload) and counted.
  explicit HlogReader(std::optional<std::string> tag) : tag_(std::move(tag)) {}

  // One line, without its newline (a trailing '\r' is allowed; blank lines
  // are the caller's to skip). The interval of a selected line, or nullopt;
  // InvalidArgument naming what is wrong.
  absl::StatusOr<std::optional<HlogInterval>> Line(absl::string_view line);

  // Lines of another tag than the one selected, and the tags seen ("" for
  // untagged), for a message when nothing was selected.
  int64_t other_tag_lines() const { return other_tag_lines_; }
  const std::vector<std::string>& tags_seen() const { return tags_seen_; }
  std::optional<std::string> version() const { return version_; }

 private:
  const std::optional<std::string> tag_;
  std::optional<std::string> version_;
  std::optional<double> start_time_s_;
  std::optional<double> base_time_s_;
  int64_t other_tag_lines_ = 0;
  std::vector<std::string> tags_seen_;
};

}  // namespace perld::perlctl
