#include "daemon/jobs/bench_job.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/mutex.h"
#include "daemon/core/thread_name.h"

namespace perld::jobs {
namespace {

// Splits `total` across `workers`: the first total % workers take one more.
std::vector<int64_t> SplitRecords(int64_t total, int workers) {
  std::vector<int64_t> share(workers, total / workers);
  for (int i = 0; i < total % workers; ++i) ++share[i];
  return share;
}

// `perld bench`'s exit rule as a run state.
// Every record of the run counts, the warm-up's too (left out of the total).
runs::RunState Judge(const BenchOutcome& o, const runs::WindowRecord& total, std::string* reason) {
  std::vector<std::string> why;
  const int64_t records = total.snapshot.records + total.warmup_left_out.records;
  const int64_t invalid = total.snapshot.invalid + total.warmup_left_out.invalid;
  if (o.requested > 0 && records != o.requested) {
    why.push_back(
        absl::StrCat("exact mode recorded ", records, " of ", o.requested, " requested records"));
  } else if (records != o.attempted) {
    why.push_back(absl::StrCat("recorded ", records, " of ", o.attempted, " operations"));
  }
  if (invalid != 0) {
    why.push_back(absl::StrCat(invalid, " invalid latencies"));
  }
  if (o.dropped != 0) {
    why.push_back(absl::StrCat(o.dropped, " timestamps dropped at the pending bound"));
  }
  if (why.empty()) return runs::RunState::kFinished;
  if (o.stopped) why.push_back("stopped before completion");
  *reason = absl::StrJoin(why, "; ");
  return runs::RunState::kFailed;
}

}  // namespace

std::string DescribeBenchOptions(const bench::BenchOptions& o) {
  std::string s = absl::StrCat("-writers ", o.writers, " -readers ", o.readers, " -size ", o.size);
  if (o.records > 0) absl::StrAppend(&s, " -records ", o.records);
  if (o.seconds > 0) absl::StrAppend(&s, " -seconds ", o.seconds);
  if (o.warmup_ms > 0) absl::StrAppend(&s, " -warmup ", static_cast<double>(o.warmup_ms) / 1000);
  if (o.throughput_mbps > 0) {
    absl::StrAppend(&s, " -throughput ", o.throughput_mbps, " -catchup ",
                    o.catchup == bench::Catchup::kSkip ? "skip" : "burst", " -lateUs ", o.late_us);
  }
  absl::StrAppend(&s, " -time ", TimeUnitName(o.time_unit));
  if (o.min_latency) absl::StrAppend(&s, " -minlatency ", *o.min_latency);
  if (o.max_latency) absl::StrAppend(&s, " -maxlatency ", *o.max_latency);
  absl::StrAppend(&s, " -mpscqueue ", o.channels.queue == QueueKind::kMpsc ? "true" : "false",
                  " --maxQs ", o.channels.max_qs, " --qPerWorker ", o.channels.q_per_worker,
                  " --maxPendingPerWorker ", o.channels.max_pending_per_worker, " --overflow ",
                  o.channels.overflow == OverflowPolicy::kBlock ? "block" : "drop");
  if (o.channels.queue == QueueKind::kMpsc && !o.channels.mpsc_batched) {
    absl::StrAppend(&s, " --mpscVariant record");
  }
  return s;
}

BenchJob::BenchJob(runs::RunManager& manager, BenchJobSetup setup)
    : manager_(manager), setup_(std::move(setup)), outcome_(std::make_shared<BenchOutcome>()) {}

absl::StatusOr<std::unique_ptr<BenchJob>> BenchJob::Start(runs::RunManager& manager,
                                                          BenchJobSetup setup) {
  const bench::BenchOptions& o = setup.options;
  if (setup.clock == nullptr) return absl::InvalidArgumentError("bench job needs a clock");
  if (o.workers() < 1) return absl::InvalidArgumentError("writers + readers must be >= 1");
  if (o.records < 1 && o.seconds <= 0) {
    return absl::InvalidArgumentError("give records (exact mode) or seconds (timed mode)");
  }
  if (o.throughput_mbps > 0 && o.size <= 0) {
    return absl::InvalidArgumentError("rate control needs size > 0");
  }
  std::unique_ptr<BenchJob> job(new BenchJob(manager, std::move(setup)));
  const BenchJobSetup& s = job->setup_;

  runs::RunSetup run;
  run.spec.name = s.name;
  run.spec.labels = s.labels;
  run.spec.slo = s.slo;
  run.spec.abort_on_fail = s.abort_on_fail;
  run.spec.source = runs::RunSource::kBench;
  run.spec.latency = s.latency_defaults;
  run.spec.latency.time_unit = o.time_unit;
  const LatencyConfig unit_defaults = LatencyConfig::ForUnit(o.time_unit);
  run.spec.latency.min_latency = o.min_latency.value_or(unit_defaults.min_latency);
  run.spec.latency.max_latency = o.max_latency.value_or(unit_defaults.max_latency);
  run.spec.reporting_interval_ms = s.reporting_interval_ms;
  run.spec.warmup_ms = o.warmup_ms;
  run.spec.clock = s.clock->info().description;
  // Rounded up: never claim a finer resolution than measured (0: unknown).
  run.spec.clock_resolution_ns = static_cast<int64_t>(std::ceil(s.clock->info().resolution_ns));
  run.spec.parameters = DescribeBenchOptions(o);
  run.spec.writers = o.writers;
  run.spec.readers = o.readers;
  run.channels = o.channels;
  run.producers = o.workers();
  if (o.throughput_mbps > 0) {  // rate mode: service and response time (issue 30)
    run.spec.target_rate = o.throughput_mbps * 1024.0 * 1024.0 / o.size;
    run.spec.late_threshold_ns = o.late_us * 1'000;
    run.skipped = job->skipped_;
  }
  std::shared_ptr<BenchOutcome> outcome = job->outcome_;
  run.judge = [outcome](const runs::WindowRecord& total, std::string* reason) {
    outcome->total = total;
    return Judge(*outcome, total, reason);
  };
  absl::StatusOr<runs::CreatedRun> created = manager.CreateRun(std::move(run));
  if (!created.ok()) return created.status();
  job->id_ = created->id;
  job->info_ = created->info;
  job->channels_ = std::move(created->channels);

  // Worker plans.
  const int workers = o.workers();
  const std::vector<int64_t> shares =
      o.records > 0 ? SplitRecords(o.records, workers) : std::vector<int64_t>(workers, 0);
  const int64_t deadline_ns =
      o.seconds > 0 ? s.clock->NowNanos() + static_cast<int64_t>(o.seconds * 1e9) : 0;
  const double per_worker_rps =
      o.throughput_mbps > 0 ? o.throughput_mbps * 1024.0 * 1024.0 / o.size / workers : 0;
  job->plans_.resize(workers);
  for (int w = 0; w < workers; ++w) {
    bench::WorkerPlan& plan = job->plans_[w];
    plan.size = o.size;
    plan.records = shares[w];
    plan.deadline_ns = deadline_ns;
    plan.records_per_second = per_worker_rps;
    plan.catchup = o.catchup;
    plan.skipped = job->skipped_.get();
    plan.yield_every_ns = s.worker_yield_every_ns;
    if (o.mode() == bench::BenchMode::kExact && shares[w] == 0) plan.records = -1;  // idle worker
  }
  job->outcome_->requested = o.mode() == bench::BenchMode::kExact ? o.records : 0;
  job->controller_ = std::thread([j = job.get()] {
    NameThisThread("perld-bench-ctl");
    j->Control();
  });
  return job;
}

void BenchJob::Control() {
  const int workers = static_cast<int>(plans_.size());
  std::vector<bench::WorkerResult> results(workers);
  std::vector<std::thread> threads;
  threads.reserve(workers);
  const int64_t start_ns = setup_.clock->NowNanos();
  for (int w = 0; w < workers; ++w) {
    if (plans_[w].records < 0) continue;
    if (plans_[w].records_per_second > 0) {
      // Worker w's slots lie w/W of a period after worker 0's: together the
      // workers keep the aggregate rate evenly spaced.
      const double period_ns = 1e9 / plans_[w].records_per_second;
      plans_[w].first_slot_ns = start_ns + static_cast<int64_t>(period_ns * w / workers);
    }
    threads.emplace_back([this, w, &results] {
      NameThisThread("perld-bench-" + std::to_string(w));
      results[w] = bench::RunWorker(plans_[w], setup_.options.time_unit, *setup_.clock,
                                    channels_->producer(w), stop_);
    });
  }
  for (std::thread& t : threads) t.join();
  BenchOutcome& o = *outcome_;
  o.seconds = static_cast<double>(setup_.clock->NowNanos() - start_ns) / 1e9;
  for (const bench::WorkerResult& r : results) o.attempted += r.attempted;
  o.dropped = static_cast<int64_t>(channels_->dropped());
  o.blocked = static_cast<int64_t>(channels_->blocked());
  o.stopped = stop_.load(std::memory_order_relaxed);
  channels_.reset();  // the recorder keeps its own reference until retired
  // Every producer is joined: the recorder may drain and close the run.
  manager_.EndRun(id_);
  manager_.WaitEnded(id_, absl::InfiniteDuration());
  absl::StatusOr<runs::RunInfo> info = manager_.registry().Info(id_);
  if (info.ok()) {
    o.state = info->state;
    o.reason = info->failure_reason;
  }
  {
    MutexLock lock(done_mu_);
    done_.store(true, std::memory_order_release);
  }
  done_cv_.NotifyAll();
}

const BenchOutcome& BenchJob::Wait() {
  MutexLock lock(done_mu_);
  done_cv_.Wait(done_mu_, [this] { return done_.load(std::memory_order_acquire); });
  return *outcome_;
}

BenchJob::~BenchJob() {
  Stop();
  if (controller_.joinable()) controller_.join();
}

}  // namespace perld::jobs
