// The range options of perlctl's result commands (`percentiles` today):
//
//   --windows A-B    periodic windows A to B (numbers as `perlctl history`
//                    shows them, inclusive); "A" is one window, "A-" from A on
//   --from T         windows that start at or after T
//   --to T           windows that end at or before T
//   --warmup D       the same as --from D: drop the run's first D
//
// T is an RFC 3339 time (2026-12-05T10:00:00Z, or with an offset) or an
// offset from the run's start (30s, 2m, 1.5h, 250ms); D is an offset.
// The answer merges the stored distributions of the windows in the range:
// exact (README "Ranges").
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::perlctl {

// A time as the options spell it: absolute, or an offset from the run's start.
struct RangeTime {
  std::optional<int64_t> unix_ms;    // RFC 3339
  std::optional<int64_t> offset_ms;  // 30s, 2m, ...
  int64_t Resolve(int64_t run_start_unix_ms) const {
    return unix_ms ? *unix_ms : run_start_unix_ms + offset_ms.value_or(0);
  }
};

struct WindowRangeOptions {
  int64_t first_window = 0;  // 0: open
  int64_t last_window = 0;
  std::optional<RangeTime> from;
  std::optional<RangeTime> to;
};

// "30s", "2m", "1.5h", "250ms", "0" -> milliseconds; InvalidArgument else.
absl::StatusOr<int64_t> ParseOffsetMs(absl::string_view text);
// An RFC 3339 time or an offset.
absl::StatusOr<RangeTime> ParseRangeTime(absl::string_view text);
// "A-B", "A", "A-" -> first/last (last 0: open). InvalidArgument else.
absl::StatusOr<WindowRangeOptions> ParseWindowNumbers(absl::string_view text);

// How the range reads for people: "windows 3-10", "from +30s", ...
std::string DescribeRange(const WindowRangeOptions& range);

}  // namespace perld::perlctl
