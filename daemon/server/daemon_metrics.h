// DaemonMetrics: the daemon's whole /metrics -- every exported run
// (runs_exposition.h, run_metrics.h, with the configured names and
// cardinality cap), the ingest counters, gRPC calls by method and code, and
// the daemon's own health: build info, uptime, process CPU and memory, the
// recorder's drain counter and its outbox depth, runs by state, snapshot
// store memory, runs left out by the cap, and the scrapes themselves.
//
// Cost: a scrape reads published snapshots (the registry under its reader
// lock, per-run channel counters, atomics); it never waits for the recorder
// thread, so its cost depends on the runs exported, not on the ingest rate.
//
// Threads: Render from any thread (HTTP handlers); scrape counters are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "daemon/runs/run_manager.h"
#include "daemon/service/current_config.h"
#include "daemon/service/grpc_call_stats.h"
#include "daemon/service/ingest_runs.h"
#include "daemon/service/ingest_stats.h"

namespace perld::server {

class DaemonMetrics {
 public:
  DaemonMetrics(const runs::RunManager& manager, const service::IngestRuns& ingest_runs,
                const service::IngestStats& ingest_stats, const service::GrpcCallStats& grpc,
                const service::CurrentConfig& config);

  // Renders the whole exposition into `buffer` (replacing its text, keeping
  // its capacity: a scraper's repeated ~1 MB texts cost no regrowth).
  void Render(std::string* buffer);

 private:
  std::string RenderSelf(int64_t omitted) const;

  const runs::RunManager& manager_;
  const service::IngestRuns& ingest_runs_;
  const service::IngestStats& ingest_stats_;
  const service::GrpcCallStats& grpc_;
  const service::CurrentConfig& config_;
  const int64_t start_unix_ms_;
  const int64_t start_mono_ns_;
  std::atomic<uint64_t> scrapes_{0};
  std::atomic<int64_t> last_scrape_ns_{0};
  std::atomic<int64_t> last_scrape_cpu_ns_{0};
  std::atomic<uint64_t> omitted_total_{0};
};

}  // namespace perld::server
