// DaemonMetrics: the daemon's whole /metrics -- every exported run
// (runs_exposition.h, run_metrics.h, with the configured names and
// cardinality cap), the ingest counters, gRPC calls by method and code, and
// the daemon's own health: build info, uptime, process CPU and memory, the
// recorder's drain counter and its outbox depth, runs by state, snapshot
// store memory, runs left out by the cap, the scrapes themselves, the HTTP
// listener's connections and refusals, SBK clients' registration slots, and
// the forwarding to a parent perld when there is one.
//
// Cost: a scrape reads published snapshots (the registry under its reader
// lock, per-run channel counters, atomics); it never waits for the recorder
// thread, so its cost depends on the runs exported, not on the ingest rate.
//
// Threads: Render from any thread (HTTP handlers), one at a time (a mutex
// guards the per-run cache); the scrape counters are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "daemon/http/http_server_stats.h"
#include "daemon/http/run_metrics.h"
#include "daemon/runs/run_manager.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/current_config.h"
#include "daemon/service/grpc_call_stats.h"
#include "daemon/service/ingest_runs.h"
#include "daemon/service/ingest_stats.h"
#include "daemon/service/sbp_service.h"
#include "daemon/tiers/upstream_forwarder.h"

namespace perld::server {

class DaemonMetrics {
 public:
  DaemonMetrics(const runs::RunManager& manager, const service::IngestRuns& ingest_runs,
                const service::IngestStats& ingest_stats, const service::GrpcCallStats& grpc,
                const service::CurrentConfig& config,
                const tiers::UpstreamForwarder* upstream = nullptr,
                const service::CallAuth* auth = nullptr,
                const http::HttpServerStats* http_stats = nullptr,
                const service::SbpService* sbp = nullptr);

  // Renders the whole exposition into `buffer` (replacing its text, keeping
  // its capacity: a scraper's repeated ~1 MB texts cost no regrowth).
  void Render(std::string* buffer);

 private:
  std::string RenderSelf(int64_t omitted) const;

  // A run's perld fragments are kept while what they show is unchanged:
  // a scrape re-renders only the runs that published a window (or changed
  // state or channel/client counts) since the previous one.
  struct RunKey {
    int64_t events = 0;
    std::string state;
    uint64_t dropped = 0;
    uint64_t blocked = 0;
    int connections = 0;
    int max_connections = 0;
    bool operator==(const RunKey&) const = default;
  };
  struct CachedRun {
    RunKey key;
    http::RunFragments fragments;
  };

  const runs::RunManager& manager_;
  const service::IngestRuns& ingest_runs_;
  const service::IngestStats& ingest_stats_;
  const service::GrpcCallStats& grpc_;
  const service::CurrentConfig& config_;
  const tiers::UpstreamForwarder* const upstream_;  // null: no upstream
  const service::CallAuth* const auth_;             // null: no auth families
  const http::HttpServerStats* const http_;         // null: no perld_http_* families
  const service::SbpService* const sbp_;            // null: no SBP families
  const int64_t start_unix_ms_;
  const int64_t start_mono_ns_;
  std::mutex render_mu_;                 // one scrape renders at a time (the cache)
  std::map<uint64_t, CachedRun> cache_;  // guarded by render_mu_: exported runs only
  std::atomic<uint64_t> scrapes_{0};
  std::atomic<int64_t> last_scrape_ns_{0};
  std::atomic<int64_t> last_scrape_cpu_ns_{0};
  std::atomic<uint64_t> omitted_total_{0};
};

}  // namespace perld::server
