// DaemonStateCollector: the daemon's own state as a prometheus::Collectable,
// read at scrape time from the atomics its sources already keep (the
// recorder, run manager, registry and memory budget, the clients' breakdown
// budget, auth, the HTTP listener, SBK's registration slots, the upstream
// forwarder) and from /proc/self/stat -- so no hot path updates a
// prometheus-cpp object, and the recorder thread never touches one:
//
//   process_cpu_seconds_total, process_resident_memory_bytes
//   perld_recorder_timestamps_total, perld_recorder_runs_attached,
//   perld_recorder_outbox_windows, perld_runs{state}, perld_runs_refused_total{reason},
//   perld_run_memory_reserved_bytes, perld_run_memory_budget_bytes,
//   perld_snapshot_store_bytes, perld_ingest_breakdown_bytes,
//   perld_ingest_breakdown_drops_total
//   perld_auth_refused_total{code}                        with auth
//   perld_http_connections_open, perld_http_connections_total,
//   perld_http_responses_total, perld_http_queued_requests,
//   perld_http_refused_total{reason}                      with the HTTP stats
//   perld_sbp_slots, perld_sbp_slots_freed_total{reason},
//   perld_sbp_client_failures_total                       with the SBP service
//   perld_upstream_*{node}                                with an upstream
//   perld_state_sqlite_memory_bytes, perld_state_total_segment_bytes_total,
//   perld_state_unstored_distributions_total{kind},
//   perld_state_dropped_windows_total                     with a state store
//
// Threads: Collect from any thread; every source must outlive the collector.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

#include "daemon/http/http_server_stats.h"
#include "daemon/ingest/run_table.h"
#include "daemon/runs/run_manager.h"
#include "daemon/service/call_auth.h"
#include "daemon/service/sbp_service.h"
#include "daemon/state/state_store.h"
#include "daemon/tiers/upstream_forwarder.h"

namespace perld::server {

class DaemonStateCollector final : public prometheus::Collectable {
 public:
  // The pointers may be null: their families are left out.
  DaemonStateCollector(const runs::RunManager& manager, const ingest::RunTable& ingest_runs,
                       const tiers::UpstreamForwarder* upstream, const service::CallAuth* auth,
                       const http::HttpServerStats* http_stats, const service::SbpService* sbp,
                       const state::StateStore* store)
      : manager_(manager),
        ingest_runs_(ingest_runs),
        upstream_(upstream),
        auth_(auth),
        http_(http_stats),
        sbp_(sbp),
        store_(store) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const runs::RunManager& manager_;
  const ingest::RunTable& ingest_runs_;
  const tiers::UpstreamForwarder* const upstream_;
  const service::CallAuth* const auth_;
  const http::HttpServerStats* const http_;
  const service::SbpService* const sbp_;
  const state::StateStore* const store_;
};

}  // namespace perld::server
