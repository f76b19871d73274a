// LatestMetrics: the Prometheus exposition of `perld bench -context` -- one
// run, rendered by the same serializer as the daemon's /metrics
// (run_metrics.h); perld's names by default (SBK's names are the daemon's
// prometheus.names option).
//
// The bench's printing thread publishes each closed window; the HTTP
// handlers render. Before the run's total window closes, the total is the
// sum of the closed periodic windows (counters, min/max, average) and
// carries no total percentiles: exact percentiles of the whole run exist
// only once the total window closes (end of run, or an IsFull total report).
//
// Thread ownership: Publish from one thread (the bench's printing thread),
// Render from any thread (the HTTP server's handlers); one mutex guards the
// state, taken once per window and once per scrape, never per record.
#pragma once

#include <string>

#include "daemon/common/mutex.h"
#include "daemon/config/daemon_config.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/http/run_metrics.h"

namespace perld::http {

class LatestMetrics {
 public:
  // `run` names the run (identity labels, unit, action, class, workers).
  explicit LatestMetrics(RunMetrics run, config::MetricNames names = config::MetricNames::kPerld);

  // Publishes one closed window, in the order they are printed. A periodic
  // window becomes the latest window and is added to the running total; a
  // total window (end of run, or an IsFull total report) replaces the
  // running total and restarts the sum.
  void Publish(const LatencySnapshot& snapshot, double seconds, bool total);

  // The exposition text of the current state.
  std::string Render() const;

 private:
  const config::MetricNames names_;
  mutable Mutex mu_;
  RunMetrics run_ ABSL_GUARDED_BY(mu_);
  std::optional<ExpositionWindow> running_ ABSL_GUARDED_BY(mu_);  // sum since the last total
};

}  // namespace perld::http
