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
// Latencies are integers in the run's unit ("unit": ms, us or ns). Keys are
// camelCase, perlctl --json's vocabulary (endReason, recordsPerSecond, ...).
// Unknown run: 404; a malformed id: 400; both with {"error": "..."}.
//
// Pure apart from the registry read; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/http/http_message.h"
#include "daemon/runs/run_registry.h"

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

// The live page itself (daemon/http/live_page.html, embedded at build time).
HttpResponse LivePage();

}  // namespace perld::http
