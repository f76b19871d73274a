// DecideReload: what SIGHUP does with a re-read configuration.
//
// Keys a running daemon can take safely are applied: logLevel,
// drainTimeoutMs (read when SIGTERM arrives), and every run default —
// reportingIntervalMs, timeUnit, minLatency, maxLatency, percentiles, the
// recorder sizes, maxQs, qPerWorker, maxPendingPerWorker, overflow, queue —
// which apply to runs started after the reload (a running run keeps the
// settings it started with), plus retention.* and limits.maxRunningRuns,
// maxBenchWorkers, maxBenchPayloadBytes, maxWatchers (checked on the next
// request). Keys bound at startup need a restart and keep their running
// value: grpcListen, httpListen, stateDir, idleNS (the one recorder thread's
// first park), limits.maxMessageBytes (built into the gRPC server).
//
// Pure function; any thread. The caller swaps `next` in on its main thread.
#pragma once

#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"

namespace perld::config {

struct ReloadDecision {
  DaemonConfig next;  // the config to run with: reloaded, restart-only keys kept as running
  // One "key: old -> new" line per changed key, values as RenderEffectiveConfig
  // writes them (e.g. "reportingIntervalMs: 5000 -> 1000"), in perld.yaml order.
  std::vector<std::string> applied;
  std::vector<std::string> needs_restart;
};

// REQUIRES: both configs come from the loader (valid, normalized).
ReloadDecision DecideReload(const DaemonConfig& running, const DaemonConfig& reloaded);

}  // namespace perld::config
