// BenchJob: one in-process PerlBench run hosted by a RunManager -- the same
// code path for `perld bench` and for the daemon's Control.StartBench, so both
// give exactly the same counts.
//
// Start() validates the options, creates the run (source "bench") and starts
// one thread per worker plus a controller thread. The controller joins the
// workers when they finish (record count, deadline, or Stop()), ends the run
// (the recorder drains every timestamp and closes the total) and waits until
// the run's final state is known. The final state follows `perld bench`'s exit
// rule: finished only when every operation's timestamp was recorded, with no
// invalid latency and no drop, and in exact mode exactly the requested count;
// otherwise failed, with the reason.
//
// Memory: no per-worker payload of `size` bytes is allocated (a record's
// bytes are a count); pending timestamps are bounded by the channels
// (workers x maxPendingPerWorker).
//
// Threads: Start/Stop/Wait/Done from any thread. The clock must outlive the
// job. Destroying a job stops it and waits for its end.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bench/bench_options.h"
#include "daemon/bench/perlbench_worker.h"
#include "daemon/common/mutex.h"
#include "daemon/runs/run_manager.h"

namespace perld::jobs {

struct BenchJobSetup {
  bench::BenchOptions options;
  std::string name;  // "": named bench-<id> (RunManager::CreateRun)
  std::map<std::string, std::string> labels;
  std::string slo;  // RunSpec::slo ("": none) and abort_on_fail
  bool abort_on_fail = false;
  // Percentiles and recorder sizes; time unit and range come from `options`.
  LatencyConfig latency_defaults;
  int64_t reporting_interval_ms = 5'000;
  const bench::BenchClock* clock = nullptr;  // REQUIRED
  int64_t worker_yield_every_ns = 0;         // bench::WorkerPlan::yield_every_ns for every worker
};

struct BenchOutcome {
  int64_t requested = 0;  // exact mode: records asked for; else 0
  int64_t attempted = 0;  // operations the workers ran
  int64_t dropped = 0;    // timestamps discarded by --overflow drop
  int64_t blocked = 0;    // sends that waited at the pending bound
  bool stopped = false;   // Stop() ended it early
  runs::RunState state = runs::RunState::kRunning;
  std::string reason;        // why it failed
  runs::WindowRecord total;  // the run's final total (with its distribution)
  double seconds = 0;        // start to end of the workers
};

// A human-readable form of the options, stored as RunSpec::parameters.
std::string DescribeBenchOptions(const bench::BenchOptions& options);

class BenchJob {
 public:
  static absl::StatusOr<std::unique_ptr<BenchJob>> Start(runs::RunManager& manager,
                                                         BenchJobSetup setup);
  ~BenchJob();
  BenchJob(const BenchJob&) = delete;
  BenchJob& operator=(const BenchJob&) = delete;

  runs::RunId id() const { return id_; }
  const runs::RunInfo& info() const { return info_; }
  // Ends the run early: workers stop at their next check (every
  // kStopCheckInterval records). Any thread.
  void Stop() { stop_.store(true, std::memory_order_relaxed); }
  // Blocks until the run has ended; the outcome is final then.
  const BenchOutcome& Wait();
  bool Done() const { return done_.load(std::memory_order_acquire); }

 private:
  BenchJob(runs::RunManager& manager, BenchJobSetup setup);
  void Control();

  runs::RunManager& manager_;
  const BenchJobSetup setup_;
  runs::RunId id_ = 0;
  runs::RunInfo info_;
  std::shared_ptr<TimeStampChannels> channels_;
  std::vector<bench::WorkerPlan> plans_;
  // Rate mode: slots the workers dropped (-catchup skip); the recorder reads it.
  std::shared_ptr<std::atomic<int64_t>> skipped_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<bool> stop_{false};
  std::thread controller_;
  // Written by the controller and the run's judge (the dispatcher) before
  // done_ is notified; read after.
  std::shared_ptr<BenchOutcome> outcome_;
  // Set once the outcome is final (std primitives, not absl::Notification,
  // so ThreadSanitizer sees the ordering: Debian's Abseil is uninstrumented).
  std::atomic<bool> done_{false};
  Mutex done_mu_;  // guards no member: orders done_'s store against Wait's check
  CondVar done_cv_;
};

}  // namespace perld::jobs
