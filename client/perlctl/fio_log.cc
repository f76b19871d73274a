#include "client/perlctl/fio_log.h"

#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

}  // namespace

const char* FioDirectionName(int direction) {
  static constexpr const char* kNames[kFioDirections] = {"read", "write", "trim", "sync"};
  return kNames[direction];
}

bool FioBlankLine(absl::string_view line) {
  return line.find_first_not_of(" \t\r") == absl::string_view::npos;
}

absl::StatusOr<FioLogEntry> ParseFioLogLine(absl::string_view line) {
  if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
  std::vector<absl::string_view> columns = absl::StrSplit(line, ',');
  if (columns.size() < kMinColumns || columns.size() > kMaxColumns) {
    return absl::InvalidArgumentError(
        absl::StrCat(columns.size(),
                     " columns, not a fio log line (time, value, data direction, block size"
                     "[, offset][, priority])"));
  }
  for (absl::string_view& c : columns) c = absl::StripAsciiWhitespace(c);
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
  for (size_t i = kMinColumns; i < columns.size(); ++i) {
    if (!Digits(columns[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("column ", i + 1, ": '", columns[i], "' is not a non-negative integer"));
    }
  }
  FioLogEntry e;
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
