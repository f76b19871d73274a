#include "client/perlctl/fio_log.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace perld::perlctl {
namespace {

constexpr int kMinColumns = 4;  // time, value, direction, block size
// Offset, priority and what later fio versions append (e.g. the issue time).
constexpr int kMaxColumns = 8;

// A non-negative decimal integer, digits only (fio writes no sign).
std::optional<int64_t> Digits(absl::string_view s) {
  if (s.empty() || s.size() > 18) {
    // 18 digits always fit an int64; longer ones are refused (no latency,
    // time or block size of fio is that large).
    return std::nullopt;
  }
  int64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// The line as fio writes it (digits, blanks around them, 4 to 8 columns, a
// valid direction and block size) in one pass, or false for anything else:
// then the general parser below takes the line and says what is wrong. On
// every line it accepts it gives what the general parser gives.
bool ParseWellFormed(absl::string_view line, FioLogEntry* e) {
  const char* p = line.data();
  const char* const end = p + line.size();
  const auto blanks = [&] {
    while (p != end && (*p == ' ' || *p == '\t')) ++p;
  };
  uint64_t v[kMinColumns] = {};
  int count = 0;
  for (;;) {
    blanks();
    const char* const digits = p;
    uint64_t value = 0;
    // At most 19 digits are read (they fit a uint64); over 18 is refused.
    while (p != end && static_cast<unsigned>(*p - '0') < 10 && p - digits < 19) {
      value = value * 10 + static_cast<unsigned>(*p - '0');
      ++p;
    }
    const auto length = static_cast<size_t>(p - digits);
    if (length == 0 || length > 18) return false;
    if (count < kMinColumns) v[count] = value;
    if (count == 1) e->latency = absl::string_view(digits, length);
    ++count;
    blanks();
    if (p == end) break;
    if (*p != ',' || count == kMaxColumns) return false;
    ++p;
  }
  if (count < kMinColumns || v[2] >= kFioDirections || (v[3] == 0 && v[2] != 3) ||
      v[3] > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return false;
  }
  e->time_ms = static_cast<int64_t>(v[0]);
  e->latency_ns = static_cast<int64_t>(v[1]);
  e->direction = static_cast<int>(v[2]);
  e->block_size = static_cast<int64_t>(v[3]);
  return true;
}

}  // namespace

const char* FioDirectionName(int direction) {
  static constexpr const char* kNames[kFioDirections] = {"read", "write", "trim", "sync"};
  return kNames[direction];
}

bool FioBlankLine(absl::string_view line) {
  // A loop, not find_first_not_of (which builds a table per call).
  for (const char c : line) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

absl::StatusOr<FioLogEntry> ParseFioLogLine(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  FioLogEntry e;
  if (ParseWellFormed(line, &e)) return e;
  // The columns, split at every ',' (as absl::StrSplit would: n commas make
  // n + 1 columns, an empty line one), without allocating: this runs once
  // per I/O of logs of millions of lines.
  absl::string_view columns[kMaxColumns];
  size_t count = 0;
  const char* const end = line.data() + line.size();
  const char* begin = line.data();
  for (;;) {
    const char* p = begin;
    while (p != end && *p != ',') ++p;
    if (count == kMaxColumns) {
      // More columns than any fio writes: count them all for the message.
      count += 1 + static_cast<size_t>(std::count(p, end, ','));
      break;
    }
    columns[count++] = absl::string_view(begin, static_cast<size_t>(p - begin));
    if (p == end) break;
    begin = p + 1;
  }
  if (count < kMinColumns || count > kMaxColumns) {
    return absl::InvalidArgumentError(
        absl::StrCat(count,
                     " columns, not a fio log line (time, value, data direction, block size"
                     "[, offset][, priority])"));
  }
  for (size_t i = 0; i < count; ++i) columns[i] = absl::StripAsciiWhitespace(columns[i]);
  static constexpr const char* kNames[] = {"time", "latency", "data direction", "block size"};
  int64_t v[kMinColumns] = {};
  for (int i = 0; i < kMinColumns; ++i) {
    const std::optional<int64_t> d = Digits(columns[static_cast<size_t>(i)]);
    if (!d) {
      return absl::InvalidArgumentError(absl::StrCat("column ", i + 1, " (", kNames[i], "): '",
                                                     columns[static_cast<size_t>(i)],
                                                     "' is not a non-negative integer"));
    }
    v[i] = *d;
  }
  for (size_t i = kMinColumns; i < count; ++i) {
    if (!Digits(columns[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("column ", i + 1, ": '", columns[i], "' is not a non-negative integer"));
    }
  }
  e.time_ms = v[0];
  e.latency = columns[1];
  e.latency_ns = v[1];
  if (v[2] >= kFioDirections) {
    return absl::InvalidArgumentError(
        absl::StrCat("column 3 (data direction): ", v[2],
                     " is not one of fio's 0 (read), 1 (write), 2 (trim), 3 (sync)"));
  }
  e.direction = static_cast<int>(v[2]);
  if (v[3] == 0 && e.direction != 3) {
    return absl::InvalidArgumentError(
        "column 4 (block size) is 0: a windowed log (log_avg_msec > 0) holds averages of "
        "several I/Os, not the I/Os; rerun fio with log_avg_msec=0 (one line per I/O)");
  }
  if (v[3] > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("column 4 (block size): ", v[3], " is over 2^31 - 1 bytes"));
  }
  e.block_size = v[3];
  return e;
}

std::optional<std::string> FioLogNameProblem(absl::string_view path) {
  const size_t slash = path.rfind('/');
  const absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  for (const char* kind : {"_bw.", "_iops."}) {
    if (absl::StrContains(name, kind)) {
      return absl::StrCat(
          "a fio ", absl::string_view(kind).substr(1, absl::string_view(kind).size() - 2), " log (",
          name, "), not a latency log: import the _lat, _clat or _slat logs of write_lat_log");
    }
  }
  return std::nullopt;
}

}  // namespace perld::perlctl
