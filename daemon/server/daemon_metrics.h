// DaemonMetrics: the daemon's whole /metrics -- every exported run
// (runs_exposition.h, run_metrics.h, with the configured names and
// cardinality cap), then the daemon's own metrics through prometheus-cpp:
// the ingest counters (service::IngestCollector), gRPC calls by method and
// code (service::GrpcCallStats), the daemon's state (DaemonStateCollector:
// recorder, runs by state, memory, HTTP listener, SBP slots, auth, upstream)
// remote write's own counters (remote_write::RemoteWriteStats), the memory
// trimmer's (MemoryTrimmer), and this
// class's prometheus::Registry, whose counters and gauges are
// updated here, where their events happen: build info, start time, uptime,
// runs left out by the cap, the scrapes themselves. They are collected into
// MetricFamily objects and written by prometheus::TextSerializer.
//
// The run families keep perld's own writer and its per-run fragment cache:
// prometheus-cpp's MetricFamily holds doubles and TextSerializer prints 16
// significant digits, which loses perld's exact integer latencies and
// counters and rewrites quantile labels (0.9975 -> 0.9975000000000001), and
// it takes 6.6 ms for 100 runs against the cache's 0.1-0.5 ms
// (tests/bench/PROMETHEUS.md). Built with -DPERLD_RUNS_VIA_PROMETHEUS_CPP=ON,
// perld's run names go through http::RunsCollectable instead: the A/B arm.
//
// Cost: a scrape reads published snapshots (the registry under its reader
// lock, per-run channel counters, atomics); it never waits for the recorder
// thread, so its cost depends on the runs exported, not on the ingest rate.
// No hot path updates a prometheus-cpp object (the sources keep atomics).
//
// Threads: Render from any thread (HTTP handlers), one at a time (a mutex
// guards the per-run cache and the scrape's own metrics).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/common/mutex.h"
#include "daemon/config/current_config.h"
#include "daemon/http/http_server_stats.h"
#include "daemon/http/run_metrics.h"
#include "daemon/ingest/ingest_stats.h"
#include "daemon/ingest/run_table.h"
#include "daemon/runs/run_manager.h"
#include "daemon/server/daemon_state_collector.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/grpc_call_stats.h"
#include "daemon/service/ingest_exposition.h"
#include "daemon/service/sbp_service.h"
#include "daemon/tiers/upstream_forwarder.h"

namespace perld::server {

class DaemonMetrics {
 public:
  DaemonMetrics(const runs::RunManager& manager, const ingest::RunTable& ingest_runs,
                const ingest::IngestStats& ingest_stats, const service::GrpcCallStats& grpc,
                const config::CurrentConfig& config,
                const tiers::UpstreamForwarder* upstream = nullptr,
                const service::CallAuth* auth = nullptr,
                const http::HttpServerStats* http_stats = nullptr,
                const service::SbpService* sbp = nullptr, const state::StateStore* store = nullptr,
                std::vector<const prometheus::Collectable*> more = {});

  // Who renders: a /metrics scrape, or remote write's collection (the same
  // text; it does not count as a scrape: perld_scrapes_total,
  // perld_last_scrape_* and perld_exporter_runs_omitted_total stay as the
  // scrapes left them).
  enum class Reader { kScrape, kRemoteWrite };

  // Renders the whole exposition into `buffer` (replacing its text, keeping
  // its capacity: a scraper's repeated ~1 MB texts cost no regrowth).
  void Render(std::string* buffer, Reader reader = Reader::kScrape);

 private:
  // The exported runs' families into `buffer` (cleared first).
  void RenderRuns(const std::vector<http::RunMetrics>& runs, config::MetricNames names,
                  std::string* buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(render_mu_);

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
  const ingest::RunTable& ingest_runs_;
  const service::GrpcCallStats& grpc_;
  const config::CurrentConfig& config_;
  const int64_t start_mono_ns_;
  const service::IngestCollector ingest_;
  const DaemonStateCollector state_;
  // Further sources: remote write's counters, the memory trimmer's.
  const std::vector<const prometheus::Collectable*> more_;
  prometheus::Registry registry_;
  prometheus::Gauge& uptime_;
  prometheus::Gauge& omitted_;
  prometheus::Counter& omitted_total_;
  prometheus::Counter& scrapes_;
  prometheus::Gauge& last_scrape_;
  prometheus::Gauge& last_scrape_cpu_;
  Mutex render_mu_;                                                  // one scrape renders at a time
  std::map<uint64_t, CachedRun> cache_ ABSL_GUARDED_BY(render_mu_);  // exported runs only
};

}  // namespace perld::server
