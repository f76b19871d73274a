#include "daemon/runs/run_manager.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/core/clock.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/run_total.h"
#include "daemon/core/thread_name.h"
#include "daemon/runs/run_recorder.h"
#include "daemon/runs/run_slo.h"

namespace perld::runs {
namespace {

// A resumed run's (or response view's) checkpointed total as its windows'
// starting total; DataLoss when the stored distribution does not fit the
// run's range.
absl::Status SeedTotal(const RunResume& r, const LatencyConfig& latency,
                       PeriodicAndTotalWindows& windows) {
  if (absl::Status s = LatencyRecorder::CheckBuckets(r.base, r.base_distribution,
                                                     latency.min_latency, latency.max_latency);
      !s.ok()) {
    return absl::DataLossError(absl::StrCat("run ", r.info.id, ": checkpoint: ", s.message()));
  }
  windows.SeedTotal(r.base, r.base_distribution);
  return absl::OkStatus();
}

constexpr int64_t kDispatchWaitUs = 100'000;

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace

const char* RunRefusalName(RunRefusal refusal) {
  switch (refusal) {
    case RunRefusal::kInputLimit:
      return "input_limit";
    case RunRefusal::kRunningRuns:
      return "running_runs";
    case RunRefusal::kMemory:
      return "memory";
    case RunRefusal::kCount:
      break;
  }
  return "unknown";
}

RunManager::RunManager(const Options& options)
    : options_(options),
      budget_(options.max_memory_bytes),
      max_running_runs_(options.max_running_runs),
      registry_(options.retention, options.stored_totals),
      host_(&outbox_),
      recorder_(host_, options.recorder),
      next_id_(options.first_id),
      reserved_through_(options.reserve_ids ? options.first_id - 1
                                            : std::numeric_limits<RunId>::max()) {}

RunManager::~RunManager() { Stop(); }

void RunManager::AddObserver(RunObserver* observer) { observers_.push_back(observer); }

void RunManager::OnSloAbort(SloAbort abort) { slo_abort_ = std::move(abort); }

SloStatus RunManager::FinalSloStatus(const RunInfo& info, const WindowRecord& total) {
  bool exact = total.exact_total && total.snapshot.percentiles_exact &&
               (total.snapshot.valid == 0 || !total.distribution.empty() || total.spilled);
  LatencySnapshot snapshot = total.snapshot;
  absl::StatusOr<PercentileSet> set = PercentileSet::Create(SloPercents(info.spec));
  if (exact && set.ok() && snapshot.valid > 0) {
    double missing = 0;
    if (total.spilled) {
      // Its configured percentiles were merged as it ended: a second pass
      // over the stored segments only for an SLO term outside them.
      exact = PickStoredPercentiles(total.snapshot, *set, &snapshot, &missing) ||
              (options_.stored_totals.final_total &&
               options_.stored_totals.final_total(total.run_id, total.segments, *set, &snapshot)
                   .ok());  // total.run_id: a rate-controlled run's response view
    } else {
      // One pass over the total's buckets (no copy: the registry indexes them next).
      PercentileWalker walker(*set, snapshot.valid, &snapshot);
      for (const LatencyBucket& b : total.distribution) walker.Add(b.latency, b.count);
    }
  }
  const int64_t window = info.slo_status.window;
  RunSloVerdict verdict = EvaluateRunSlo(info.spec, snapshot, total.RateSeconds(),
                                         exact && set.ok(), /*final=*/true, window);
  if (info.end_reason == EndReason::kSloFailed) verdict.status.state = SloState::kFailed;
  return verdict.status;
}

void RunManager::MergeSpilledTotal(const RunInfo& info, WindowRecord* total) {
  absl::Status s = absl::FailedPreconditionError("perld keeps no state directory");
  absl::StatusOr<PercentileSet> set = PercentileSet::Create(info.spec.latency.percentiles);
  if (!set.ok()) {
    s = set.status();
  } else if (options_.stored_totals.final_total) {
    s = options_.stored_totals.final_total(info.id, total->segments, *set, &total->snapshot);
  }
  if (s.ok()) {
    total->exact_total = true;
    return;
  }
  total->spilled = false;  // nothing to merge later either
  ClearPercentiles(&total->snapshot);
  log::Warning("run ", info.id, " '", info.spec.name, "': its total spilled ", total->segments,
               " segments and they could not be merged, so it has exact counters and no "
               "percentiles: ",
               s.message());
}

void RunManager::Start() {
  started_ = true;
  recorder_.Start();
  dispatcher_ = std::thread([this] {
    NameThisThread("perld-dispatch");
    Dispatch();
  });
}

void RunManager::StopAccepting() {
  MutexLock lock(mu_);
  accepting_ = false;
  for (auto& [id, pending] : pending_) {
    if (pending.cause == EndReason::kNone) pending.cause = EndReason::kShutdown;
  }
}

void RunManager::NoteStopRequested(RunId id) {
  MutexLock lock(mu_);
  auto it = pending_.find(id);
  if (it != pending_.end() && it->second.cause == EndReason::kNone) {
    it->second.cause = EndReason::kStopped;
  }
}

void RunManager::Stop() {
  if (!started_) return;
  started_ = false;
  StopAccepting();
  host_.Close();
  recorder_.StopAndDrain();
  stopping_.store(true, std::memory_order_release);
  RecorderEvent wake;
  wake.kind = RecorderEvent::Kind::kWakeUp;
  outbox_.Publish(std::move(wake));
  dispatcher_.join();
}

absl::StatusOr<CreatedRun> RunManager::CreateRun(RunSetup setup) {
  if (setup.resume) setup.spec = setup.resume->info.spec;
  RunSpec& spec = setup.spec;
  if (absl::Status s = spec.latency.Normalize(); !s.ok()) return s;
  if (spec.reporting_interval_ms < 1) {
    return absl::InvalidArgumentError("reportingIntervalMs must be >= 1");
  }
  if (absl::Status s = CheckRunSlo(spec); !s.ok()) return s;
  // The worst case of the run's caps, reserved before any of it is allocated.
  const bool hybrid = setup.aggregate && spec.latency.time_unit == TimeUnit::kNs;
  // Local workers or remote clients at a target rate: a response view (a
  // resumed run: the one it was checkpointed with).
  const bool paced = spec.target_rate > 0 && (setup.producers > 0 || setup.inbox != nullptr) &&
                     (!setup.resume || !setup.resume->response_view.empty());
  RunResume* view_resume = paced && setup.resume ? &setup.resume->response_view.front() : nullptr;
  RunMemoryNeed need =
      RunMemoryNeedFor(spec.latency, hybrid, setup.channels, std::max(setup.producers, 0));
  if (paced) {  // the response view's windows
    need.periodic *= 2;
    need.total *= 2;
  }
  absl::StatusOr<RunMemoryBudget::Reservation> memory = budget_.Reserve(need);
  if (!memory.ok()) {
    CountRefusal(RunRefusal::kMemory);
    return memory.status();
  }
  std::shared_ptr<TimeStampChannels> channels;
  if (setup.producers > 0) {
    absl::StatusOr<std::unique_ptr<TimeStampChannels>> made =
        TimeStampChannels::Create(setup.channels, setup.producers);
    if (!made.ok()) return made.status();
    channels = std::move(*made);
  }

  const int64_t ns_per_unit = NanosPerUnit(spec.latency.time_unit);
  const int64_t now_ns = MonotonicNanos();
  const int64_t now_unix_ms = NowUnixMs();
  // A resumed run started in the past: its monotonic start lies that far back.
  const int64_t start_ns =
      setup.resume ? now_ns - (now_unix_ms - setup.resume->info.start_unix_ms) * 1'000'000 : now_ns;
  absl::StatusOr<PeriodicAndTotalWindows> windows =
      hybrid ? PeriodicAndTotalWindows::CreateHybrid(spec.latency, start_ns / ns_per_unit)
             : PeriodicAndTotalWindows::Create(spec.latency, start_ns / ns_per_unit);
  if (!windows.ok()) return windows.status();
  std::optional<ResponseViewSetup> response;
  if (paced) {
    absl::StatusOr<PeriodicAndTotalWindows> view =
        hybrid ? PeriodicAndTotalWindows::CreateHybrid(spec.latency, start_ns / ns_per_unit)
               : PeriodicAndTotalWindows::Create(spec.latency, start_ns / ns_per_unit);
    if (!view.ok()) return view.status();
    if (view_resume != nullptr) {
      if (absl::Status s = SeedTotal(*view_resume, spec.latency, *view); !s.ok()) return s;
    }
    response.emplace(ResponseViewSetup{
        .windows = *std::move(view),
        .late_threshold_ns = spec.late_threshold_ns,
        .skipped = std::move(setup.skipped),
        .periodic_seq = view_resume != nullptr ? view_resume->recorder.periodic_seq : 0,
        .segment_seq = view_resume != nullptr ? view_resume->recorder.segment_seq : 0});
  }
  spec.periodic_recorder = windows->periodic().kind();
  spec.total_recorder = windows->total().kind();
  RecorderResume recorder_resume;
  if (setup.resume) {
    const RunResume& r = *setup.resume;
    if (absl::Status s = SeedTotal(r, spec.latency, *windows); !s.ok()) return s;
    recorder_resume = r.recorder;
    recorder_resume.now_ns = now_ns;
  }

  RunInfo info;
  {
    MutexLock lock(mu_);
    // The id a new run takes is reserved durably first (outside mu_: a
    // commit and its sync); others may take the reserved ones meanwhile.
    const RunId ids = paced ? 2 : 1;  // a rate-controlled run's view takes the next
    while (!setup.resume && next_id_ + ids - 1 > reserved_through_) {
      lock.Unlock();
      if (absl::Status s = ReserveNextIds(ids); !s.ok()) return s;
      lock.Lock();
    }
    if (!accepting_) return absl::UnavailableError("perld is shutting down: no new runs");
    const int64_t max_running = max_running_runs_.load(std::memory_order_relaxed);
    const auto running = std::count_if(pending_.begin(), pending_.end(),
                                       [](const auto& p) { return p.second.service_run == 0; });
    if (running >= max_running) {
      CountRefusal(RunRefusal::kRunningRuns);
      return absl::ResourceExhaustedError(
          absl::StrCat("limits.maxRunningRuns: ", max_running, " runs are running already"));
    }
    if (setup.resume) {
      info = setup.resume->info;
      for (RunId id : {info.id, view_resume != nullptr ? view_resume->info.id : info.id}) {
        if (id >= next_id_ || pending_.contains(id) || registry_.Info(id).ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("run ", id, " cannot resume: its id is taken"));
        }
      }
    } else {
      info.id = next_id_++;
      info.start_unix_ms = now_unix_ms;
      if (response) info.response_run = next_id_++;
    }
    info.spec = spec;
    // An unnamed run is named after its source and id ("bench-7"): names
    // that never collide, where a shared default would.
    if (info.spec.name.empty()) {
      info.spec.name = absl::StrCat(RunSourceName(info.spec.source), "-", info.id);
    }
    info.state = RunState::kRunning;
    if (!info.spec.slo.empty() && !setup.resume) info.slo_status.state = SloState::kPending;
    pending_[info.id].judge = std::move(setup.judge);
    pending_[info.id].channels = channels;
    pending_[info.id].memory = *std::move(memory);
    // Registered and announced under the lock: a run is visible before any
    // of its windows can be dispatched, and ids are announced in order.
    if (setup.resume) {
      registry_.AddResumed(info, std::move(setup.resume->history), setup.resume->base,
                           setup.resume->base_distribution, setup.resume->base_seconds,
                           setup.resume->base_start_time, setup.resume->recorder.schedule);
    } else {
      registry_.AddRunning(info);
    }
    for (RunObserver* o : observers_) o->OnRunStarted(info);
    if (response) {
      RunInfo view = info;
      if (view_resume != nullptr) {
        view = view_resume->info;
        view.spec.periodic_recorder = spec.periodic_recorder;
        view.spec.total_recorder = spec.total_recorder;
      }
      view.id = info.response_run;
      view.response_run = 0;
      view.spec.name = absl::StrCat(info.spec.name, ":response");
      view.spec.slo.clear();  // judged on the service run, from this view
      view.spec.abort_on_fail = false;
      view.slo_status = {};
      view.service_run = info.id;
      response->id = view.id;
      pending_[info.id].response_run = view.id;
      pending_[view.id].service_run = info.id;
      if (view_resume != nullptr) {
        RunResume& r = *view_resume;
        registry_.AddResumed(view, std::move(r.history), r.base, r.base_distribution,
                             r.base_seconds, r.base_start_time, r.recorder.schedule);
      } else {
        registry_.AddRunning(view);
      }
      for (RunObserver* o : observers_) o->OnRunStarted(view);
    }
  }
  auto run = std::make_shared<RunRecorder>(
      info.id, std::move(*windows), spec.latency.time_unit, spec.reporting_interval_ms * 1'000'000,
      start_ns, info.start_unix_ms, channels, &outbox_, std::move(setup.inbox),
      std::move(recorder_resume), spec.warmup_ms * 1'000'000, std::move(response));
  host_.Attach(std::move(run));
  return CreatedRun{info.id, std::move(channels), info};
}

absl::Status RunManager::ReserveNextIds(RunId count) {
  MutexLock one(reserve_mu_);
  RunId through = 0;
  {
    MutexLock lock(mu_);
    if (next_id_ + count - 1 <= reserved_through_) return absl::OkStatus();
    through = next_id_ + kIdBlock - 1;
  }
  // A commit and its sync, outside mu_: the dispatcher never waits for it.
  if (absl::Status s = options_.reserve_ids(through); !s.ok()) return s;
  MutexLock lock(mu_);
  reserved_through_ = std::max(reserved_through_, through);
  return absl::OkStatus();
}

void RunManager::SetLimits(int64_t max_running_runs, int64_t max_memory_bytes) {
  max_running_runs_.store(max_running_runs, std::memory_order_relaxed);
  budget_.SetLimit(max_memory_bytes);
}

void RunManager::EndRun(RunId id) {
  {
    MutexLock lock(mu_);
    auto it = pending_.find(id);
    if (it != pending_.end() && it->second.service_run != 0) {  // a view ends with its run
      id = it->second.service_run;
      it = pending_.find(id);
    }
    if (it == pending_.end() || it->second.ending) return;
    it->second.ending = true;
  }
  host_.Finish(id);
}

bool RunManager::WaitEnded(RunId id, absl::Duration timeout) {
  MutexLock lock(mu_);
  auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_.contains(id); };
  if (timeout == absl::InfiniteDuration()) {
    ended_.Wait(mu_, ended);
    return true;
  }
  return ended_.WaitFor(mu_, absl::ToChronoNanoseconds(timeout), ended);
}

void RunManager::Dispatch() {
  for (;;) {
    RecorderEvent event;
    if (!outbox_.WaitNext(&event, kDispatchWaitUs)) {
      if (stopping_.load(std::memory_order_acquire)) break;
      continue;
    }
    switch (event.kind) {
      case RecorderEvent::Kind::kWindow:
        HandleWindow(event);
        break;
      case RecorderEvent::Kind::kRunFinished:
        HandleFinished(event);
        break;
      case RecorderEvent::Kind::kWakeUp:
        break;
    }
    // The recorder stopped before the wake-up was published: once it is
    // seen, every earlier event has been handled.
    if (event.kind == RecorderEvent::Kind::kWakeUp && stopping_.load(std::memory_order_acquire)) {
      break;
    }
  }
}

void RunManager::HandleWindow(RecorderEvent& event) {
  WindowRecord& window = event.window;
  if (window.kind == WindowRecord::Kind::kTotal) {
    MutexLock lock(mu_);  // kept until the run is finished
    pending_[event.run_id].total = std::move(window);
    return;
  }
  absl::StatusOr<RunInfo> info = registry_.Info(event.run_id);
  if (info.ok()) {
    for (RunObserver* o : observers_) o->OnWindow(*info, window);
  }
  if (info.ok() && window.schedule.not_sustained && !info->rate_not_sustained) {
    registry_.MarkRateNotSustained(info->id);  // both views: each window says so
  }
  const bool gated = info.ok() && !info->spec.slo.empty() &&
                     window.kind == WindowRecord::Kind::kPeriodic && !window.warmup;
  const int64_t seq = window.seq;
  NotifyEvicted(registry_.AddWindow(std::move(window)));
  if (gated) JudgeSlo(*info, seq);
  if (info.ok()) {
    for (RunObserver* o : observers_) o->OnWindowPublished(*info);
  }
}

void RunManager::JudgeSlo(const RunInfo& info, int64_t window) {
  // A rate-controlled run is judged on its response time (its view's
  // window of this instant was published first).
  absl::StatusOr<PercentileAnswer> total =
      registry_.Percentiles(info.response_run != 0 ? info.response_run : info.id,
                            PercentileScope::kTotal, SloPercents(info.spec));
  if (!total.ok()) return;  // evicted meanwhile
  RunSloVerdict verdict = EvaluateRunSlo(info.spec, total->snapshot, total->rate_seconds,
                                         total->exact, /*final=*/false, window);
  registry_.SetSloStatus(info.id, verdict.status);
  if (!info.spec.abort_on_fail || verdict.failed_for_good.empty() || !slo_abort_) return;
  {
    MutexLock lock(mu_);
    auto it = pending_.find(info.id);
    if (it == pending_.end() || it->second.ending || it->second.cause != EndReason::kNone) return;
    it->second.cause = EndReason::kSloFailed;
  }
  slo_abort_(info, verdict.failed_for_good);
}

void RunManager::HandleFinished(RecorderEvent& event) {
  const RunId id = event.run_id;
  Pending pending;
  {
    MutexLock lock(mu_);
    pending = std::move(pending_[id]);
  }
  WindowRecord total = pending.total ? std::move(*pending.total) : WindowRecord{};
  std::string reason;
  const RunState state = pending.judge ? pending.judge(total, &reason) : RunState::kFinished;
  ChannelCounters final_counts;
  if (std::shared_ptr<TimeStampChannels> channels = pending.channels.lock()) {
    final_counts = {channels->dropped(), channels->blocked()};
  }
  event.retired.reset();  // frees the run's windows and channels here
  // Given back before anyone can see the run ended: a run started after
  // that finds its share free.
  pending.memory.Release();
  absl::StatusOr<RunInfo> info = registry_.Info(id);
  if (info.ok() && total.spilled) MergeSpilledTotal(*info, &total);
  if (info.ok()) {
    RunInfo ended = *std::move(info);
    ended.state = state;
    ended.failure_reason = reason;
    ended.end_unix_ms = NowUnixMs();
    ended.end_reason = pending.cause != EndReason::kNone ? pending.cause
                       : state == RunState::kFailed      ? EndReason::kFailed
                                                         : EndReason::kCompleted;
    WindowRecord view_total;
    if (ended.response_run != 0) view_total = EndResponseView(ended.response_run, ended);
    if (!ended.spec.slo.empty()) {
      ended.slo_status = FinalSloStatus(ended, ended.response_run != 0 ? view_total : total);
      registry_.SetSloStatus(id, ended.slo_status);
    }
    PublishEnded(ended, std::move(total));
  }
  {
    MutexLock lock(mu_);
    pending_.erase(id);
    if (registry_.Info(id).ok()) ended_counters_[id] = final_counts;
  }
  ended_.NotifyAll();
  // WaitEnded(id) holds from here: the run's subscribers learn it too.
  registry_.Notify(id);
}

void RunManager::PublishEnded(const RunInfo& ended, WindowRecord total) {
  for (RunObserver* o : observers_) o->OnRunEnded(ended, total);
  NotifyEvicted(registry_.MarkEnded(ended.id, std::move(total), ended.state, ended.failure_reason,
                                    ended.end_unix_ms, nullptr, ended.end_reason));
}

WindowRecord RunManager::EndResponseView(RunId view, const RunInfo& service_ended) {
  Pending pending;
  {
    MutexLock lock(mu_);
    auto it = pending_.find(view);
    if (it == pending_.end()) return {};
    pending = std::move(it->second);
  }
  WindowRecord total = pending.total ? std::move(*pending.total) : WindowRecord{};
  absl::StatusOr<RunInfo> info = registry_.Info(view);
  if (info.ok() && total.spilled) MergeSpilledTotal(*info, &total);
  WindowRecord kept = total;
  if (info.ok()) {
    RunInfo ended = *std::move(info);
    ended.state = service_ended.state;
    ended.failure_reason = service_ended.failure_reason;
    ended.end_unix_ms = service_ended.end_unix_ms;
    ended.end_reason = service_ended.end_reason;
    PublishEnded(ended, std::move(total));
  }
  {
    MutexLock lock(mu_);
    pending_.erase(view);
  }
  registry_.Notify(view);
  return kept;
}

std::map<RunId, ChannelCounters> RunManager::ChannelCounts() const {
  MutexLock lock(mu_);
  std::map<RunId, ChannelCounters> out = ended_counters_;
  for (const auto& [id, pending] : pending_) {
    if (std::shared_ptr<TimeStampChannels> channels = pending.channels.lock()) {
      out[id] = {channels->dropped(), channels->blocked()};
    }
  }
  return out;
}

void RunManager::NotifyEvicted(const std::vector<RunId>& ids) {
  if (ids.empty()) return;
  {
    MutexLock lock(mu_);
    for (RunId id : ids) ended_counters_.erase(id);
  }
  for (RunObserver* o : observers_) o->OnRunsEvicted(ids);
}

}  // namespace perld::runs
