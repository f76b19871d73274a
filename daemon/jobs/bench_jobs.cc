#include "daemon/jobs/bench_jobs.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/mutex.h"

namespace perld::jobs {

absl::StatusOr<runs::RunInfo> BenchJobs::Start(const bench::BenchOptions& options, std::string name,
                                               std::map<std::string, std::string> labels,
                                               int64_t reporting_interval_ms, std::string slo,
                                               bool abort_on_fail) {
  Reap();
  const std::shared_ptr<const config::DaemonConfig> config = config_.Get();
  const config::LimitsConfig& limits = config->limits;
  const int64_t workers = options.workers();
  if (workers > limits.max_bench_workers) {
    return absl::ResourceExhaustedError(absl::StrCat("limits.maxBenchWorkers: ", workers,
                                                     " workers requested, at most ",
                                                     limits.max_bench_workers));
  }
  if (options.size > limits.max_bench_payload_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("limits.maxBenchPayloadBytes: size ",
                                                     options.size, " bytes, at most ",
                                                     limits.max_bench_payload_bytes));
  }
  const int64_t pending_bytes = workers *
                                static_cast<int64_t>(options.channels.max_pending_per_worker) *
                                static_cast<int64_t>(sizeof(TimeStampNode));
  if (options.channels.max_pending_per_worker > (size_t{1} << 32) ||
      pending_bytes > kMaxBenchPendingBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pending timestamps would need ", pending_bytes, " bytes (", workers,
                     " workers x ", options.channels.max_pending_per_worker,
                     " maxPendingPerWorker); at most ", kMaxBenchPendingBytes));
  }
  BenchJobSetup setup;
  setup.options = options;
  setup.name = std::move(name);  // "": the run manager names it bench-<id>
  setup.labels = std::move(labels);
  setup.slo = std::move(slo);
  setup.abort_on_fail = abort_on_fail;
  setup.latency_defaults = config->latency;
  setup.reporting_interval_ms = reporting_interval_ms;
  absl::StatusOr<const bench::BenchClock*> clock = clocks_.Get(options.clock);
  if (!clock.ok()) return clock.status();
  setup.clock = *clock;
  setup.worker_yield_every_ns = config->bench_worker_yield_us * 1'000;
  absl::StatusOr<std::unique_ptr<BenchJob>> job = BenchJob::Start(manager_, std::move(setup));
  if (!job.ok()) return job.status();
  runs::RunInfo info = (*job)->info();
  MutexLock lock(mu_);
  jobs_[info.id] = std::move(*job);
  return info;
}

absl::Status BenchJobs::Stop(runs::RunId id) {
  std::shared_ptr<BenchJob> job;
  {
    MutexLock lock(mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end()) job = it->second;
  }
  if (job == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", id, " is not a running in-process bench run"));
  }
  job->Stop();
  return absl::OkStatus();
}

void BenchJobs::StopAll() {
  std::vector<std::shared_ptr<BenchJob>> all;
  {
    MutexLock lock(mu_);
    for (auto& [id, job] : jobs_) all.push_back(job);
  }
  for (auto& job : all) job->Stop();
  for (auto& job : all) job->Wait();
  Reap();
}

size_t BenchJobs::running() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [id, job] : jobs_) n += job->Done() ? 0 : 1;
  return n;
}

void BenchJobs::Reap() {
  std::vector<std::shared_ptr<BenchJob>> done;
  {
    MutexLock lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (it->second->Done()) {
        done.push_back(std::move(it->second));
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // `done` joins the jobs' controller threads outside the lock.
}

}  // namespace perld::jobs
