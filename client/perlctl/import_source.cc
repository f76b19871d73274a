#include "client/perlctl/import_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/perlctl/decimal_scale.h"
#include "client/perlctl/fio_log.h"
#include "client/perlctl/hlog_log_reader.h"
#include "client/perlctl/k6_json.h"
#include "daemon/common/errno_text.h"

namespace perld::perlctl {
namespace {

// "FILE:LINE: why", with the status's code kept (FailedPrecondition: a k6
// metric that is not a trend of time).
absl::Status At(const std::string& file, int64_t line, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(file, ":", line, ": ", s.message()));
}

absl::Status Prefixed(absl::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, " ", s.message()));
}

absl::Status MulOverflow(int64_t a, int64_t b, int64_t* out, absl::string_view what) {
  if (__builtin_mul_overflow(a, b, out)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", a, " is too large for the unit"));
  }
  return absl::OkStatus();
}

// ScaleDecimal(e.latency, shift) for a fio value (digits only, at most 18 of
// them: ParseFioLogLine checked) without a string per value: the value at
// ns (shift 0), or rounded half up to us (-3) or ms (-6). Text ScaleDecimal
// refuses (a leading zero, "012") goes to it for its error.
absl::StatusOr<ScaledValue> ScaleFioLatency(const FioLogEntry& e, int shift) {
  if (e.latency.size() > 1 && e.latency[0] == '0') return ScaleDecimal(e.latency, shift);
  const int64_t divisor = shift == 0 ? 1 : shift == -3 ? 1000 : 1'000'000;
  const int64_t rest = e.latency_ns % divisor;
  return ScaledValue{e.latency_ns / divisor + (2 * rest >= divisor ? 1 : 0), rest != 0};
}

// The lines of one file, read in large blocks (no copy or allocation per
// line): a line is what std::getline gives, the bytes up to a '\n' (not
// included), and a last line without one.
class LineReader {
 public:
  // `fd` is owned (closed by the destructor).
  explicit LineReader(int fd) : fd_(fd), buffer_(kBlock) {}
  ~LineReader() { close(fd_); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The first bytes of the file, up to `n` (fewer only in a shorter file);
  // false on a read error (errno set).
  bool Peek(size_t n, absl::string_view* head) {
    while (end_ - begin_ < n && !eof_) {
      if (!Fill()) return false;
    }
    *head = absl::string_view(buffer_.data() + begin_, std::min(n, end_ - begin_));
    return true;
  }

  // The next line into `line` (valid until the next call); false at the end
  // of the file, or on a read error (then error() is true, errno set).
  bool Next(absl::string_view* line) {
    for (;;) {
      const char* const from = buffer_.data() + begin_;
      const auto* nl = static_cast<const char*>(std::memchr(from, '\n', end_ - begin_));
      if (nl != nullptr) {
        *line = absl::string_view(from, static_cast<size_t>(nl - from));
        begin_ += line->size() + 1;
        return true;
      }
      if (eof_) {
        if (begin_ == end_) return false;
        *line = absl::string_view(from, end_ - begin_);
        begin_ = end_;
        return true;
      }
      if (!Fill()) return false;
    }
  }

  bool error() const { return error_; }

 private:
  static constexpr size_t kBlock = size_t{1} << 20;

  // Reads more after what is buffered (moving a partial line to the front,
  // growing the buffer for a line longer than it). False on a read error.
  bool Fill() {
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buffer_.size() - end_ < kBlock / 2) buffer_.resize(buffer_.size() + kBlock);
    for (;;) {
      const ssize_t got = read(fd_, buffer_.data() + end_, buffer_.size() - end_);
      if (got > 0) {
        end_ += static_cast<size_t>(got);
        return true;
      }
      if (got == 0) {
        eof_ = true;
        return true;
      }
      if (errno != EINTR) {
        error_ = true;
        return false;
      }
    }
  }

  const int fd_;
  std::vector<char> buffer_;
  size_t begin_ = 0;  // the unread bytes: [begin_, end_)
  size_t end_ = 0;
  bool eof_ = false;
  bool error_ = false;
};

const char* UnitName(int64_t ns) { return ns == 1 ? "ns" : ns == 1000 ? "us" : "ms"; }

// An hlog interval's samples, each value converted exactly from the log's
// unit to the run's (or refused).
absl::Status HlogSamples(const ImportSource& src, const HlogInterval& interval,
                         const std::function<bool(const ImportSample&)>& each, bool* stop) {
  const double end_s = interval.start_s + interval.length_s;
  const double end = std::round(end_s * (1e9 / static_cast<double>(src.ns_per_unit)));
  if (!(std::fabs(end) < 9e18)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the interval's end (", end_s, " s) is out of range"));
  }
  const std::vector<std::pair<int64_t, int64_t>>& pairs = interval.histogram.ascending;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [value, count] = pairs[i];
    ImportSample sample;
    sample.end = static_cast<int64_t>(end);
    sample.records = count;
    sample.interval_end = i + 1 == pairs.size();
    if (src.hlog_ns_per_value >= src.ns_per_unit) {
      if (__builtin_mul_overflow(value, src.hlog_ns_per_value / src.ns_per_unit, &sample.latency)) {
        return absl::InvalidArgumentError(
            absl::StrCat("value ", value, " ", UnitName(src.hlog_ns_per_value), " is too large in ",
                         UnitName(src.ns_per_unit)));
      }
    } else {
      const int64_t divisor = src.ns_per_unit / src.hlog_ns_per_value;
      if (value % divisor != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("value ", value, " ", UnitName(src.hlog_ns_per_value),
                         " (a bucket's highest equivalent value) is not a whole number of ",
                         UnitName(src.ns_per_unit), ": import into a run of ",
                         UnitName(src.hlog_ns_per_value), " or finer (--run-unit)"));
      }
      sample.latency = value / divisor;
    }
    if (!each(sample)) {
      *stop = true;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadSamples(const ImportSource& src,
                         const std::function<bool(const ImportSample&)>& each,
                         std::vector<std::string>* k6_metrics, HlogFacts* hlog) {
  if (hlog != nullptr) *hlog = HlogFacts{};
  // Unit shifts: fio writes ns, k6 ms.
  const int fio_shift = src.ns_per_unit == 1 ? 0 : src.ns_per_unit == 1000 ? -3 : -6;
  const int k6_shift = fio_shift + 6;
  const int64_t units_per_ms = 1'000'000 / src.ns_per_unit;
  for (const std::string& file : src.files) {
    const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::NotFoundError(absl::StrCat(file, ": cannot open: ", common::ErrnoText(errno)));
    }
    LineReader in(fd);
    const auto read_error = [&] {
      return absl::DataLossError(absl::StrCat(file, ": read error: ", common::ErrnoText(errno)));
    };
    if (src.format == ImportFormat::kFio) {
      if (std::optional<std::string> problem = FioLogNameProblem(file)) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": ", *problem));
      }
    }
    absl::string_view magic;
    if (!in.Peek(2, &magic)) return read_error();
    if (magic == "\x1f\x8b") {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": gzip-compressed; decompress it first (zcat ", file, " > FILE)"));
    }
    K6MetricReader k6(src.metric);
    HlogReader hlog_reader(src.hlog_tag);
    int64_t number = 0;
    absl::string_view line;
    while (in.Next(&line)) {
      ++number;
      if (FioBlankLine(line)) continue;
      ImportSample sample;
      if (src.format == ImportFormat::kHlog) {
        absl::StatusOr<std::optional<HlogInterval>> interval = hlog_reader.Line(line);
        if (!interval.ok()) return At(file, number, interval.status());
        if (!interval->has_value()) continue;
        const HlogHistogram& h = (*interval)->histogram;
        if (hlog != nullptr) {
          ++hlog->intervals;
          if (!h.ascending.empty()) {
            hlog->relative_bits = std::min(hlog->relative_bits, h.relative_bits);
            hlog->exact_below = std::min(hlog->exact_below, h.exact_below);
          }
        }
        bool stop = false;
        if (absl::Status s = HlogSamples(src, **interval, each, &stop); !s.ok()) {
          return At(file, number, s);
        }
        if (stop) return absl::OkStatus();
        continue;
      }
      if (src.format == ImportFormat::kFio) {
        absl::StatusOr<FioLogEntry> e = ParseFioLogLine(line);
        if (!e.ok()) return At(file, number, e.status());
        absl::StatusOr<ScaledValue> latency = ScaleFioLatency(*e, fio_shift);
        if (!latency.ok()) return At(file, number, Prefixed("latency", latency.status()));
        if (absl::Status s = MulOverflow(e->time_ms, units_per_ms, &sample.end, "time"); !s.ok()) {
          return At(file, number, s);
        }
        sample.stream = e->direction;
        sample.latency = latency->value;
        sample.rounded = latency->rounded;
        sample.bytes = static_cast<int32_t>(e->block_size);
      } else {
        absl::StatusOr<std::optional<K6Point>> point = k6.Line(line);
        if (!point.ok()) return At(file, number, point.status());
        if (!point->has_value()) continue;
        absl::StatusOr<ScaledValue> latency = ScaleDecimal((*point)->value, k6_shift);
        if (!latency.ok()) return At(file, number, Prefixed("the Point's value", latency.status()));
        sample.end = (*point)->unix_ns / src.ns_per_unit;
        sample.latency = latency->value;
        sample.rounded = latency->rounded;
      }
      if (!each(sample)) return absl::OkStatus();
    }
    if (hlog != nullptr) {
      hlog->other_tag_lines += hlog_reader.other_tag_lines();
      for (const std::string& t : hlog_reader.tags_seen()) {
        if (std::find(hlog->tags_seen.begin(), hlog->tags_seen.end(), t) == hlog->tags_seen.end()) {
          hlog->tags_seen.push_back(t);
        }
      }
    }
    if (k6_metrics != nullptr) {
      for (const std::string& m : k6.metrics_seen()) {
        if (std::find(k6_metrics->begin(), k6_metrics->end(), m) == k6_metrics->end()) {
          k6_metrics->push_back(m);
        }
      }
    }
    if (in.error()) return read_error();
  }
  return absl::OkStatus();
}

}  // namespace perld::perlctl
