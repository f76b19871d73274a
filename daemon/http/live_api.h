// The live page's JSON endpoints, read from the registry's published
// snapshots (never the recorder):
//   GET /api/runs        daemon version and uptime, every run (id descending)
//                        with its state, unit, records so far and the latest
//                        window's records/s;
//   GET /api/run?id=N    one run: its percents, its closed periodic windows
//                        (oldest first, the last `windows` of them, default
//                        600; each with records/s, MB/s, avg/min/max and the
//                        exact latency at each percent) and its total (exact
//                        percentiles with the count at each, final or not).
//   GET /api/spectrum?run=ID|NAME[&windows=A-B][&from=UNIXMS][&to=UNIXMS]
//                        the percentile spectrum (latency by percentile) of
//                        the run's total (running or final) or, with a range,
//                        of its periodic windows A-B (A-, -B, A) and/or those
//                        starting at or after `from` and ending at or before
//                        `to`, answered from the state directory's stored
//                        window distributions like GetPercentiles' range:
//                        {"run", "name", "unit", "scope": total|range, "final",
//                        "records", "validLatencyRecords", "exact", "reason",
//                        "min", "max", "avg" (SBK's counters: discarded
//                        records count in min/max/avg), "percentiles"
//                        {"50", "90", "99", "99.9", "99.99"}, "points"
//                        [{"percent", "latency"}, ...] at SpectrumPercents
//                        (validLatencyRecords) -- the exact latency by SBK's
//                        index rule, as `perlctl percentiles --p` answers it,
//                        ending with percent 100 (the largest valid latency)}
//                        and for a range "firstWindow", "lastWindow",
//                        "windows", "startUnixMs", "endUnixMs", "seconds". A
//                        total that is not exact: "exact": false, its
//                        "reason", "percentiles": null and no point (never
//                        one from part of the run). An empty one: no point.
// Latencies are integers in the run's unit ("unit": ms, us or ns). Keys are
// camelCase, perlctl --json's vocabulary (endReason, recordsPerSecond, ...).
// Unknown run: 404; a malformed id: 400; both with {"error": "..."}. A range:
// 400 for malformed or reversed bounds, 404 when no stored window lies in
// it, 409 when part of it is not stored (retention) or this perld has no
// state directory, 500 for a stored window it cannot read; /api/spectrum
// answers 409 for a name several runs share.
//
// Pure apart from the registry read and the range reader (the state
// store's, called on the handler's thread); any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/http/http_message.h"
#include "daemon/runs/run_registry.h"
#include "daemon/runs/window_record.h"

namespace perld::http {

inline constexpr char kJsonContentType[] = "application/json; charset=utf-8";
inline constexpr int kDefaultLiveWindows = 600;

struct DaemonFacts {
  std::string version;
  double uptime_seconds = 0;
  int64_t now_unix_ms = 0;
};

HttpResponse RunsJson(const runs::RunRegistry& registry, const DaemonFacts& facts);
HttpResponse RunJson(const runs::RunRegistry& registry, const HttpRequest& request);

// The spectrum's percents for a distribution of `valid` records: a
// log-spaced ladder of ten percents a decade of 1/(1-p) -- 1/(1-p) =
// m * 10^d for m in 1, 1.25, 1.6, 2, 2.5, 3.2, 4, 5, 6.4, 8 (0, 20, 37.5, 50,
// 60, 68.75, 75, 80, 84.375, 87.5, 90, 92, ..., 99, ..., 99.99, ...), each
// the double nearest its short decimal -- while 1/(1-p) <= valid (and at
// most 1/(1-p) = 8 * 10^12: beyond, a double percent cannot tell the ranks
// apart), then 100. Ascending, no duplicates; empty when valid <= 0.
// Pure, any thread.
std::vector<double> SpectrumPercents(int64_t valid);

// A range of a run's periodic windows, as GetPercentiles' WindowRange: 0
// leaves a bound open.
struct SpectrumRange {
  int64_t first_window = 0;
  int64_t last_window = 0;
  int64_t from_unix_ms = 0;  // windows starting at or after
  int64_t to_unix_ms = 0;    // windows ending at or before
};
// The run's stored periodic windows in the range, ascending, with their
// distributions (StateStore::ReadWindowRange). Called on the handler thread.
using WindowRangeReader = std::function<absl::StatusOr<std::vector<runs::WindowRecord>>(
    runs::RunId, const SpectrumRange&)>;

// GET /api/spectrum. `read_range` empty: ranges answer 409 (no state).
HttpResponse SpectrumJson(const runs::RunRegistry& registry, const WindowRangeReader& read_range,
                          const HttpRequest& request);

// The live page itself (daemon/http/live_page.html, embedded at build time).
HttpResponse LivePage();

}  // namespace perld::http
