// BenchJobs: the daemon's in-process PerlBench runs (Control.StartBench), with
// the limits that keep one request from exhausting the daemon.
//
// Start() checks the request against limits.* (workers, record size, the
// memory of pending timestamps) and starts a BenchJob in the shared
// RunManager; Stop() ends one early; StopAll() ends every job (shutdown) and
// waits for their runs to end. Finished jobs are reaped on every call.
//
// Threads: thread-safe (one mutex around the job table, never held while a
// job runs or is waited for).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/bench/bench_clock.h"
#include "daemon/bench/perlbench_worker.h"
#include "daemon/common/mutex.h"
#include "daemon/config/current_config.h"
#include "daemon/jobs/bench_job.h"
#include "daemon/runs/run_manager.h"

namespace perld::jobs {

// Memory a bench run's pending timestamps may take at most (workers x
// maxPendingPerWorker x 40 B); larger requests are RESOURCE_EXHAUSTED.
inline constexpr int64_t kMaxBenchPendingBytes = int64_t{1} << 30;

class BenchJobs {
 public:
  BenchJobs(runs::RunManager& manager, bench::BenchClocks& clocks,
            const config::CurrentConfig& config)
      : manager_(manager), clocks_(clocks), config_(config) {}
  ~BenchJobs() { StopAll(); }

  absl::StatusOr<runs::RunInfo> Start(const bench::BenchOptions& options, std::string name,
                                      std::map<std::string, std::string> labels,
                                      int64_t reporting_interval_ms, std::string slo = "",
                                      bool abort_on_fail = false);
  // FailedPrecondition when the run is not a running bench job.
  absl::Status Stop(runs::RunId id);
  void StopAll();
  size_t running() const;

 private:
  void Reap();

  runs::RunManager& manager_;
  bench::BenchClocks& clocks_;  // options.clock's (FailedPrecondition when refused)
  const config::CurrentConfig& config_;
  mutable Mutex mu_;
  std::map<runs::RunId, std::shared_ptr<BenchJob>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::jobs
