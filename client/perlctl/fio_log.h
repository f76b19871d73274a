// fio latency logs for `perlctl import --format fio` (fio's HOWTO, "Log File
// Formats"): one line per I/O when fio ran with log_avg_msec=0,
//
//   time (ms since the job started), value (latency, ns), data direction,
//   block size (bytes)[, offset (with log_offset=1)][, command priority]
//
// as write_lat_log=NAME writes them to NAME_lat.N.log (completion + submission
// latency), NAME_clat.N.log and NAME_slat.N.log. Latency values are
// nanoseconds (fio 3.x; fio 2.x wrote microseconds). Data direction 0 read,
// 1 write, 2 trim, 3 sync. Columns after the block size are checked to be
// integers and otherwise ignored.
//
// Refused, with the reason: a windowed log (log_avg_msec > 0: the value is an
// average of several I/Os and the block size is written as 0), a bandwidth
// or IOPS log (NAME_bw.N.log, NAME_iops.N.log: not latencies), a direction
// fio does not define, anything that is not an integer where one is due.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::perlctl {

// fio's data directions in its logs: 0 read, 1 write, 2 trim, 3 sync.
inline constexpr int kFioDirections = 4;
// "read", "write", "trim", "sync" (REQUIRES: 0 <= direction < kFioDirections).
const char* FioDirectionName(int direction);

// One I/O of a latency log line.
struct FioLogEntry {
  int64_t time_ms = 0;        // when fio logged it, ms since the job started
  absl::string_view latency;  // the value column's text: integer nanoseconds
  int64_t latency_ns = 0;     // the same value
  int direction = 0;          // 0 read, 1 write, 2 trim, 3 sync
  int64_t block_size = 0;     // bytes
};

// A line with nothing but blanks (skipped by readers).
bool FioBlankLine(absl::string_view line);

// Parses one line (without its newline; a trailing '\r' is allowed). The
// entry's `latency` points into `line`. InvalidArgument naming the column
// that is wrong. Allocates nothing for a line it accepts (one call per I/O:
// a log has millions); a line as fio writes it is read in one pass.
absl::StatusOr<FioLogEntry> ParseFioLogLine(absl::string_view line);

// Why the file named `path` is not a fio latency log (fio's own names for
// its bandwidth and IOPS logs), or nullopt.
std::optional<std::string> FioLogNameProblem(absl::string_view path);

}  // namespace perld::perlctl
