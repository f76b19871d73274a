#include "client/perlctl/window_range.h"

#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace perld::perlctl {

absl::StatusOr<int64_t> ParseOffsetMs(absl::string_view text) {
  struct Unit {
    absl::string_view suffix;
    double ms;
  };
  // Longest suffix first: "ms" before "s".
  static constexpr Unit kUnits[] = {{"ms", 1}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}};
  for (const Unit& u : kUnits) {
    if (!absl::EndsWith(text, u.suffix)) continue;
    double n = 0;
    if (!absl::SimpleAtod(text.substr(0, text.size() - u.suffix.size()), &n) || !std::isfinite(n) ||
        n < 0 || n * u.ms > 1e15) {
      break;
    }
    return static_cast<int64_t>(std::llround(n * u.ms));
  }
  if (text == "0") return 0;
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text, "' is not a duration: a number with ms, s, m or h (e.g. 30s, 2m, 250ms)"));
}

absl::StatusOr<RangeTime> ParseRangeTime(absl::string_view text) {
  RangeTime t;
  absl::Time at;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &at, &error)) {
    t.unix_ms = absl::ToUnixMillis(at);
    return t;
  }
  absl::StatusOr<int64_t> offset = ParseOffsetMs(text);
  if (!offset.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text,
        "' is neither an RFC 3339 time (2026-12-05T10:00:00Z) nor an offset from the run's "
        "start (30s, 2m, 250ms)"));
  }
  t.offset_ms = *offset;
  return t;
}

absl::StatusOr<WindowRangeOptions> ParseWindowNumbers(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits('-', 1));
  WindowRangeOptions r;
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--windows '", text, "': A-B (window numbers as perlctl history shows them), A or A-"));
  };
  if (!absl::SimpleAtoi(parts[0], &r.first_window) || r.first_window < 1) return bad();
  if (parts.size() == 1) {
    r.last_window = r.first_window;
  } else if (!parts[1].empty() &&
             (!absl::SimpleAtoi(parts[1], &r.last_window) || r.last_window < r.first_window)) {
    return bad();
  }
  return r;
}

std::string DescribeRange(const WindowRangeOptions& range) {
  std::string out;
  const auto time = [](const RangeTime& t) {
    return t.unix_ms ? absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(*t.unix_ms),
                                        absl::UTCTimeZone())
                     : absl::StrCat("+", static_cast<double>(*t.offset_ms) / 1000, " s");
  };
  if (range.first_window > 0) {
    absl::StrAppend(&out, "windows ", range.first_window, "-",
                    range.last_window > 0 ? absl::StrCat(range.last_window) : "");
  }
  if (range.from) absl::StrAppend(&out, out.empty() ? "" : ", ", "from ", time(*range.from));
  if (range.to) absl::StrAppend(&out, out.empty() ? "" : ", ", "to ", time(*range.to));
  return out;
}

}  // namespace perld::perlctl
