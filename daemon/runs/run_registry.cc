#include "daemon/runs/run_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/mutex.h"
#include "daemon/core/latency_recorder_builder.h"

namespace perld::runs {
namespace {

int64_t RecordBytes(const WindowRecord& w) {
  const int64_t percentiles = static_cast<int64_t>(w.snapshot.percents.size());
  return static_cast<int64_t>(sizeof(WindowRecord)) + percentiles * 32 +
         static_cast<int64_t>(w.distribution.size() * sizeof(LatencyBucket));
}

// A run total that is not exact keeps no distribution and shows no
// percentile: also one from an older state directory that still carried
// percentiles of part of the run. (A total rebuilt from stored windows has
// neither and is left alone: its percentiles are refused with its reason.)
void DropInexactPercentiles(WindowRecord& w) {
  if (w.kind != WindowRecord::Kind::kTotal || w.exact_total) return;
  if (w.distribution.empty() && w.snapshot.values.empty()) return;
  ClearPercentiles(&w.snapshot);
  w.distribution.clear();
}

// Percentiles of `set` for a window: from its distribution when it has one,
// else from the percentiles stored with it (a window restored from the state
// directory keeps only its configured set).
absl::Status FillFrom(const WindowRecord& w, const PercentileIndex& index, const PercentileSet& set,
                      LatencySnapshot* out) {
  if (!index.empty() || w.snapshot.valid == 0) {
    index.Fill(set, out);
    return absl::OkStatus();
  }
  double missing = 0;
  if (PickStoredPercentiles(w.snapshot, set, out, &missing)) return absl::OkStatus();
  const std::string asked =
      set.method() == PercentileMethod::kSbk
          ? absl::StrCat("percentile ", missing)
          : absl::StrCat("percentile ", missing, " by method ", PercentileMethodName(set.method()),
                         " (only SBK's rule is stored without a distribution)");
  if (w.kind == WindowRecord::Kind::kTotal) {
    return absl::FailedPreconditionError(absl::StrCat(
        asked,
        " is not available: this run's total was rebuilt from its stored windows after "
        "perld stopped without closing the run, so it has counters but no distribution"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(asked,
                   " is not available: this window's distribution is not kept (only "
                   "its configured percentiles are); ask for the total"));
}

}  // namespace

// An exclusive lock that, once released, calls the subscribers of the runs
// the writer changed (Changed): callbacks never run under mu_.
class ABSL_SCOPED_LOCKABLE RunRegistry::ChangeLock {
 public:
  explicit ChangeLock(const RunRegistry& registry) ABSL_EXCLUSIVE_LOCK_FUNCTION(registry.mu_)
      : registry_(registry) {
    registry_.mu_.Lock();
  }
  ~ChangeLock() ABSL_UNLOCK_FUNCTION() {
    registry_.mu_.Unlock();
    if (!changed_.empty()) registry_.NotifyAll(changed_);
  }
  ChangeLock(const ChangeLock&) = delete;
  ChangeLock& operator=(const ChangeLock&) = delete;

  void Changed(RunId id) { changed_.push_back(id); }
  void Changed(const std::vector<RunId>& ids) {
    changed_.insert(changed_.end(), ids.begin(), ids.end());
  }

 private:
  const RunRegistry& registry_;
  std::vector<RunId> changed_;
};

// One subscription's callback; `mu` is held while it runs, so reset() can
// wait for a call in progress and stop later ones.
struct RunRegistry::Subscription::Subscriber {
  explicit Subscriber(std::function<void()> f) : on_change(std::move(f)) {}
  Mutex mu;
  bool active ABSL_GUARDED_BY(mu) = true;
  const std::function<void()> on_change;
};

RunRegistry::Subscription::Subscription(Subscription&& other) noexcept
    : registry_(std::exchange(other.registry_, nullptr)),
      id_(other.id_),
      subscriber_(std::move(other.subscriber_)) {}

RunRegistry::Subscription& RunRegistry::Subscription::operator=(Subscription&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::exchange(other.registry_, nullptr);
    id_ = other.id_;
    subscriber_ = std::move(other.subscriber_);
  }
  return *this;
}

void RunRegistry::Subscription::reset() {
  if (subscriber_ == nullptr) return;
  registry_->Unsubscribe(id_, subscriber_.get());
  {
    MutexLock lock(subscriber_->mu);  // waits for a call in progress
    subscriber_->active = false;
  }
  subscriber_.reset();
  registry_ = nullptr;
}

RunRegistry::Subscription RunRegistry::Subscribe(RunId id, std::function<void()> on_change) const {
  auto subscriber = std::make_shared<Subscription::Subscriber>(std::move(on_change));
  {
    MutexLock lock(subscribers_mu_);
    subscribers_.emplace(id, subscriber);
  }
  return Subscription(this, id, std::move(subscriber));
}

void RunRegistry::Unsubscribe(RunId id, const Subscription::Subscriber* subscriber) const {
  MutexLock lock(subscribers_mu_);
  auto [begin, end] = subscribers_.equal_range(id);
  for (auto it = begin; it != end; ++it) {
    if (it->second.get() == subscriber) {
      subscribers_.erase(it);
      return;
    }
  }
}

void RunRegistry::Notify(RunId id) const { NotifyAll({id}); }

void RunRegistry::NotifyAll(const std::vector<RunId>& ids) const {
  std::vector<std::shared_ptr<Subscription::Subscriber>> targets;
  {
    MutexLock lock(subscribers_mu_);
    if (subscribers_.empty()) return;
    for (RunId id : ids) {
      auto [begin, end] = subscribers_.equal_range(id);
      for (auto it = begin; it != end; ++it) targets.push_back(it->second);
    }
  }
  for (const auto& s : targets) {
    MutexLock lock(s->mu);
    if (s->active) s->on_change();
  }
}

struct RunRegistry::Entry {
  explicit Entry(const RunInfo& run)
      : info(run),
        percentiles(PercentilesOf(run.spec)),
        // The live total keeps the budget of the run's own total window.
        live(static_cast<size_t>(TotalBudgetMB(run.spec.latency, run.spec.total_recorder)) << 20) {}

  RunInfo info;
  PercentileSet percentiles;
  std::optional<WindowRecord> latest;       // no distribution: see latest_index
  PercentileIndex latest_index;             // the latest window's distribution
  RunTotal live;                            // periodic windows merged
  WindowRecord live_total;                  // snapshot of `live`, no distribution
  std::optional<WindowRecord> final_total;  // no distribution: see final_index
  PercentileIndex final_index;
  std::deque<WindowRecord> history;  // no distributions
  int64_t first_event = 0;           // event number of history.front()
  int64_t events = 0;
  int64_t released_segments = 0;  // kTotalSegment windows so far
  // The live total's parts in the state store (StoredTotals::running_total):
  // its periodic windows (the first after the warm-up, the latest), the
  // total segments among them and the last window the last segment holds.
  // A run resumed from a checkpoint (live_resumed) has a part in none.
  int64_t live_first_window = 0;
  int64_t live_last_window = 0;
  int64_t live_first_segment = 0;
  int64_t live_last_segment = 0;
  int64_t live_segment_through = 0;
  bool live_resumed = false;
  bool ended = false;
  int64_t bytes = 0;

  int64_t Bytes() const {
    int64_t b = static_cast<int64_t>(sizeof(Entry)) + bytes + InfoBytes(info);
    // The percentile set (percents and fractions) and the live total's snapshot.
    b += static_cast<int64_t>(percentiles.percents().size()) * 2 *
             static_cast<int64_t>(sizeof(double)) +
         RecordBytes(live_total);
    if (latest) b += RecordBytes(*latest);
    if (final_total) b += RecordBytes(*final_total);
    b += static_cast<int64_t>(live.RetainedBytes() + latest_index.RetainedBytes() +
                              final_index.RetainedBytes());
    return b;
  }
};

RunRegistry::RunRegistry(config::RetentionConfig retention, StoredTotals stored)
    : stored_(std::move(stored)), retention_(retention) {}
RunRegistry::~RunRegistry() = default;

RunRegistry::Entry* RunRegistry::Find(RunId id) {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second.get();
}

const RunRegistry::Entry* RunRegistry::Find(RunId id) const {
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second.get();
}

void RunRegistry::AddRunning(const RunInfo& info) {
  ChangeLock lock(*this);
  lock.Changed(info.id);
  auto entry = std::make_unique<Entry>(info);
  entry->live_total.run_id = info.id;
  entry->live_total.kind = WindowRecord::Kind::kTotal;
  entry->live_total.start_unix_ms = info.start_unix_ms;
  entry->live_total.end_unix_ms = info.start_unix_ms;
  entry->live.Snapshot(entry->percentiles, 0, 0, &entry->live_total.snapshot);
  bytes_ += entry->Bytes();
  runs_[info.id] = std::move(entry);
}

void RunRegistry::AddResumed(const RunInfo& info, std::vector<WindowRecord> history,
                             const LatencyCounters& base, std::span<const LatencyBucket> ascending,
                             double base_seconds, int64_t base_start_time,
                             const WindowRecord::Schedule& base_schedule) {
  ChangeLock lock(*this);
  lock.Changed(info.id);
  auto entry = std::make_unique<Entry>(info);
  for (WindowRecord& w : history) {
    if (w.kind == WindowRecord::Kind::kPeriodic) entry->latest = w;
    Append(*entry, std::move(w));
  }
  // A base covering no window (a run resumed from before its first
  // checkpoint) adds nothing: its first window starts the total.
  if (base_seconds > 0 || base.records > 0) entry->live.Add(base, ascending);
  entry->live_resumed = true;  // its checkpointed part is in no stored segment
  WindowRecord& t = entry->live_total;
  t.run_id = info.id;
  t.kind = WindowRecord::Kind::kTotal;
  t.start_unix_ms = info.start_unix_ms;
  t.end_unix_ms = info.start_unix_ms;
  t.seconds = base_seconds;
  t.schedule = base_schedule;
  t.exact_total = entry->live.exact();
  entry->live.Snapshot(entry->percentiles, base_start_time, base_start_time, &t.snapshot);
  bytes_ += entry->Bytes();
  runs_[info.id] = std::move(entry);
}

std::vector<RunId> RunRegistry::Restore(const RunInfo& info, std::vector<WindowRecord> windows,
                                        std::optional<WindowRecord> total) {
  ChangeLock lock(*this);
  lock.Changed(info.id);
  auto entry = std::make_unique<Entry>(info);
  entry->ended = info.state != RunState::kRunning;
  for (WindowRecord& w : windows) {
    if (w.kind == WindowRecord::Kind::kPeriodic) entry->latest = w;
    Append(*entry, std::move(w));
  }
  if (total) {
    DropInexactPercentiles(*total);
    entry->final_index.Assign(std::move(total->distribution));
    Append(*entry, *total);
    entry->final_total = std::move(total);
  }
  bytes_ += entry->Bytes();
  runs_[info.id] = std::move(entry);
  std::vector<RunId> evicted = Evict();
  lock.Changed(evicted);
  return evicted;
}

void RunRegistry::Append(Entry& e, WindowRecord window) {
  window.distribution.clear();
  window.distribution.shrink_to_fit();
  window.applied.clear();
  window.applied.shrink_to_fit();
  e.bytes += RecordBytes(window);
  e.history.push_back(std::move(window));
  ++e.events;
  while (static_cast<int64_t>(e.history.size()) > retention_.max_windows_per_run) {
    e.bytes -= RecordBytes(e.history.front());
    e.history.pop_front();
    ++e.first_event;
  }
}

std::vector<RunId> RunRegistry::AddWindow(WindowRecord window) {
  ChangeLock lock(*this);
  Entry* e = Find(window.run_id);
  if (e == nullptr) return {};
  lock.Changed(window.run_id);
  AddWindowLocked(e, std::move(window));
  std::vector<RunId> evicted = Evict();
  lock.Changed(evicted);
  return evicted;
}

void RunRegistry::AddWindowLocked(Entry* e, WindowRecord window) {
  bytes_ -= e->Bytes();
  switch (window.kind) {
    case WindowRecord::Kind::kPeriodic: {
      if (window.warmup) {  // shown and kept, but not the run's total
        e->latest_index.Assign(std::move(window.distribution));
        Append(*e, window);
        e->latest = std::move(window);
        break;
      }
      e->live.Add(CountersOf(window.snapshot), window.distribution);
      if (e->live_first_window == 0) e->live_first_window = window.seq;
      e->live_last_window = window.seq;
      WindowRecord& t = e->live_total;
      if (e->live.windows() == 1) t.snapshot.start_time = window.snapshot.start_time;
      if (e->live.windows() == 1) t.start_unix_ms = window.start_unix_ms;
      t.end_unix_ms = window.end_unix_ms;
      t.seconds += window.seconds;
      t.segments = 1;
      t.exact_total = e->live.exact();
      t.remote.reports += window.remote.reports;
      t.remote.late += window.remote.late;
      t.remote.clients = window.remote.run_clients;
      t.remote.run_clients = window.remote.run_clients;
      t.cache_releases = window.cache_releases;
      t.schedule.Add(window.schedule);
      e->live.Snapshot(e->percentiles, t.snapshot.start_time, window.snapshot.end_time,
                       &t.snapshot);
      e->latest_index.Assign(std::move(window.distribution));
      Append(*e, window);
      e->latest = std::move(window);
      break;
    }
    case WindowRecord::Kind::kTotalSegment:
      // Released on its limit (a spilled total's last segment is not).
      if (window.snapshot.closed_full) ++e->released_segments;
      // A segment of the live total (not of the warm-up, which it left out).
      if (e->live_first_window > 0 && window.through_window >= e->live_first_window) {
        if (e->live_first_segment == 0) e->live_first_segment = window.seq;
        e->live_last_segment = window.seq;
        e->live_segment_through = window.through_window;
      }
      // Its distribution is the state store's (a spilled total merges the
      // stored segments): memory here stays independent of distinct latencies.
      std::vector<LatencyBucket>().swap(window.distribution);
      Append(*e, std::move(window));
      break;
    case WindowRecord::Kind::kTotal:
      DropInexactPercentiles(window);
      e->final_index.Assign(std::move(window.distribution));
      Append(*e, window);
      e->final_total = std::move(window);
      e->live = RunTotal(0);  // the final total replaces it
      break;
  }
  bytes_ += e->Bytes();
}

std::vector<RunId> RunRegistry::MarkEnded(RunId id, WindowRecord total, RunState state,
                                          std::string reason, int64_t end_unix_ms, RunInfo* ended,
                                          EndReason end_reason) {
  ChangeLock lock(*this);
  Entry* e = Find(id);
  if (e == nullptr) return {};
  lock.Changed(id);
  total.run_id = id;
  total.kind = WindowRecord::Kind::kTotal;
  AddWindowLocked(e, std::move(total));
  bytes_ -= e->Bytes();  // the failure reason counts too
  e->info.state = state;
  e->info.failure_reason = std::move(reason);
  e->info.end_unix_ms = end_unix_ms;
  if (end_reason == EndReason::kNone) {
    end_reason = state == RunState::kFailed ? EndReason::kFailed : EndReason::kCompleted;
  }
  e->info.end_reason = end_reason;
  bytes_ += e->Bytes();
  e->ended = true;
  if (ended != nullptr) *ended = e->info;
  std::vector<RunId> evicted = Evict();
  lock.Changed(evicted);
  return evicted;
}

void RunRegistry::SetSloStatus(RunId id, SloStatus status) {
  ChangeLock lock(*this);
  Entry* e = Find(id);
  if (e == nullptr) return;
  lock.Changed(id);
  bytes_ -= e->Bytes();
  e->info.slo_status = std::move(status);
  bytes_ += e->Bytes();
}

bool RunRegistry::MarkBucketed(RunId id, const std::string& reason) {
  ChangeLock lock(*this);
  Entry* e = Find(id);
  if (e == nullptr) return false;
  // A rate-controlled run's response view holds the same values.
  for (Entry* run : {e, e->info.response_run != 0 ? Find(e->info.response_run) : nullptr}) {
    if (run == nullptr || !run->info.spec.bucketed_reason.empty()) continue;
    lock.Changed(run->info.id);
    bytes_ -= run->Bytes();
    run->info.spec.bucketed_reason = reason;
    bytes_ += run->Bytes();
  }
  return true;
}

void RunRegistry::MarkRateNotSustained(RunId id) {
  ChangeLock lock(*this);
  Entry* e = Find(id);
  if (e == nullptr || e->info.rate_not_sustained) return;
  lock.Changed(id);
  e->info.rate_not_sustained = true;
}

void RunRegistry::SetRetention(const config::RetentionConfig& retention) {
  ChangeLock lock(*this);
  retention_ = retention;
  for (auto& [id, e] : runs_) {
    bytes_ -= e->Bytes();
    if (static_cast<int64_t>(e->history.size()) > retention_.max_windows_per_run) {
      lock.Changed(id);
    }
    while (static_cast<int64_t>(e->history.size()) > retention_.max_windows_per_run) {
      e->bytes -= RecordBytes(e->history.front());
      e->history.pop_front();
      ++e->first_event;
    }
    bytes_ += e->Bytes();
  }
  lock.Changed(Evict());
}

std::vector<RunId> RunRegistry::Evict() {
  std::vector<RunId> evicted;
  for (;;) {
    int64_t ended = 0;
    const Entry* oldest = nullptr;
    for (const auto& [id, e] : runs_) {
      if (!e->ended) continue;
      ++ended;
      if (oldest == nullptr || e->info.end_unix_ms < oldest->info.end_unix_ms) oldest = e.get();
    }
    if (oldest == nullptr ||
        (ended <= retention_.max_finished_runs && bytes_ <= retention_.max_bytes)) {
      break;
    }
    const RunId id = oldest->info.id;
    bytes_ -= oldest->Bytes();
    runs_.erase(id);
    evicted.push_back(id);
  }
  return evicted;
}

std::vector<RunInfo> RunRegistry::List(const RunFilter& filter) const {
  ReaderLock lock(mu_);
  std::vector<RunInfo> out;
  for (const auto& [id, e] : runs_) {
    if (filter.state && e->info.state != *filter.state) continue;
    bool match = true;
    for (const auto& [k, v] : filter.labels) {
      auto it = e->info.spec.labels.find(k);
      if (it == e->info.spec.labels.end() || it->second != v) {
        match = false;
        break;
      }
    }
    if (match) out.push_back(e->info);
  }
  return out;
}

RunPage RunRegistry::List(const RunFilter& filter, RunId after, size_t max) const {
  ReaderLock lock(mu_);
  RunPage page;
  for (auto it = runs_.upper_bound(after); it != runs_.end(); ++it) {
    const RunInfo& info = it->second->info;
    if (filter.state && info.state != *filter.state) continue;
    const bool match = std::all_of(filter.labels.begin(), filter.labels.end(), [&](const auto& kv) {
      auto label = info.spec.labels.find(kv.first);
      return label != info.spec.labels.end() && label->second == kv.second;
    });
    if (!match) continue;
    if (page.runs.size() == max) {
      page.more = true;
      break;
    }
    page.runs.push_back(info);
  }
  return page;
}

absl::StatusOr<RunInfo> RunRegistry::Info(RunId id) const {
  ReaderLock lock(mu_);
  const Entry* e = Find(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
  return e->info;
}

absl::StatusOr<RunView> RunRegistry::Get(RunId id) const {
  ReaderLock lock(mu_);
  const Entry* e = Find(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
  RunView view;
  view.info = e->info;
  view.latest = e->latest;
  view.total_final = e->final_total.has_value();
  view.total = e->final_total ? *e->final_total : e->live_total;
  view.events = e->events;
  view.released_segments = e->released_segments;
  return view;
}

absl::StatusOr<WindowRecord> RunRegistry::LiveTotal(RunId id) const {
  ReaderLock lock(mu_);
  const Entry* e = Find(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
  if (e->ended || e->final_total) {
    return absl::FailedPreconditionError(absl::StrCat("run ", id, " has ended"));
  }
  WindowRecord out = e->live_total;
  out.run_id = id;
  out.kind = WindowRecord::Kind::kTotal;
  if (e->live.exact()) out.distribution = e->live.distribution();
  return out;
}

absl::StatusOr<RunId> RunRegistry::Resolve(const std::string& id_or_name) const {
  ReaderLock lock(mu_);
  RunId id = 0;
  if (absl::SimpleAtoi(id_or_name, &id) && Find(id) != nullptr) return id;
  std::vector<RunId> matches;
  for (const auto& [rid, e] : runs_) {
    if (e->info.spec.name == id_or_name) matches.push_back(rid);
  }
  if (matches.empty()) {
    return absl::NotFoundError(absl::StrCat("run '", id_or_name, "' not found"));
  }
  if (matches.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat("run name '", id_or_name,
                                                      "' is not unique: use one of the ids ",
                                                      absl::StrJoin(matches, ", ")));
  }
  return matches.front();
}

absl::StatusOr<RunId> RunRegistry::ResolveKind(const std::string& id_or_name,
                                               LatencyKind kind) const {
  absl::StatusOr<RunId> id = Resolve(id_or_name);
  if (!id.ok()) return id;
  absl::StatusOr<RunInfo> info = Info(*id);
  if (!info.ok()) return info.status();
  switch (kind) {
    case LatencyKind::kDefault:
      // An id names exactly one run; a name, what its run is shown as.
      if (RunId n = 0; absl::SimpleAtoi(id_or_name, &n) && n == *id) return *id;
      return info->response_run != 0 ? info->response_run : *id;
    case LatencyKind::kService:
      return info->service_run != 0 ? info->service_run : *id;
    case LatencyKind::kResponse:
      if (info->service_run != 0) return *id;
      if (info->response_run != 0) return info->response_run;
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", *id, " '", info->spec.name,
          "' is closed-loop: it has service time only (service time under closed-loop load); "
          "response time needs a rate-controlled run (-throughput)"));
  }
  return *id;
}

absl::StatusOr<PercentileAnswer> RunRegistry::Percentiles(RunId id, PercentileScope scope,
                                                          std::vector<double> percents,
                                                          bool merge_running,
                                                          PercentileMethod method) const {
  absl::StatusOr<PercentileSet> set = PercentileSet::Create(std::move(percents), method);
  if (!set.ok()) return set.status();
  absl::StatusOr<PercentileAnswer> answer;
  StoreMerge pending;
  {
    ReaderLock lock(mu_);
    answer = PercentilesLocked(id, scope, *set, merge_running && stored_.running_total, &pending);
  }
  if (!answer.ok()) return answer;
  if (pending.running) {
    // Past memory while running: the stored parts, else no percentile.
    LatencySnapshot merged = answer->snapshot;
    if (stored_.running_total(id, *pending.running, *set, &merged).ok()) {
      answer->snapshot = std::move(merged);
      answer->exact = true;
    }
    return answer;
  }
  if (pending.spilled_segments == 0) return answer;
  if (!stored_.final_total) {
    return absl::FailedPreconditionError(absl::StrCat(
        "run ", id, ": its total spilled to the state directory, which this perld has not"));
  }
  if (absl::Status s = stored_.final_total(id, pending.spilled_segments, *set, &answer->snapshot);
      !s.ok()) {
    return s;
  }
  return answer;
}

absl::StatusOr<PercentileAnswer> RunRegistry::PercentilesLocked(RunId id, PercentileScope scope,
                                                                const PercentileSet& set,
                                                                bool merge_running,
                                                                StoreMerge* pending) const {
  const Entry* e = Find(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
  PercentileAnswer answer;
  if (scope == PercentileScope::kLatest) {
    if (!e->latest) {
      return absl::FailedPreconditionError(absl::StrCat("run ", id, " has no closed window yet"));
    }
    answer.snapshot = e->latest->snapshot;
    if (absl::Status s = FillFrom(*e->latest, e->latest_index, set, &answer.snapshot); !s.ok()) {
      return s;
    }
    return answer;
  }
  if (e->final_total) {
    answer.snapshot = e->final_total->snapshot;
    answer.exact = e->final_total->exact_total;
    answer.total_final = true;
    answer.rate_seconds = e->final_total->RateSeconds();
    if (!answer.snapshot.percentiles_exact) return answer;  // none: not exact
    if (absl::Status s = FillFrom(*e->final_total, e->final_index, set, &answer.snapshot);
        !s.ok()) {
      if (!e->final_total->spilled) return s;
      // Percentiles other than the stored ones: the caller merges the
      // stored segments (StateStore::MergeTotalSegments).
      pending->spilled_segments = e->final_total->segments;
    }
    return answer;
  }
  answer.snapshot = e->live_total.snapshot;
  answer.exact = e->live.exact();
  answer.rate_seconds = e->live_total.RateSeconds();
  e->live.FillPercentiles(set, &answer.snapshot);
  if (!answer.exact && merge_running && !e->live_resumed && e->live_last_window > 0) {
    RunningTotalParts parts;
    parts.first_window = e->live_first_window;
    if (e->live_first_segment > 0) {
      parts.first_segment = e->live_first_segment;
      parts.last_segment = e->live_last_segment;
      parts.first_window = e->live_segment_through + 1;
    }
    parts.last_window = e->live_last_window;
    pending->running = parts;
  }
  return answer;
}

absl::StatusOr<RunRegistry::DistributionPage> RunRegistry::Distribution(
    RunId id, std::optional<int64_t> after, size_t max) const {
  ReaderLock lock(mu_);
  const Entry* e = Find(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
  if (!e->final_total) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", id, " is running: its total distribution is exported once it ends"));
  }
  if (!e->final_total->snapshot.percentiles_exact || !e->final_total->exact_total) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", id, "'s total is not exact: ", kInexactTotalReason));
  }
  const std::vector<LatencyBucket>& all = e->final_index.buckets();
  if (all.empty() && e->final_total->snapshot.valid > 0) {  // never answer from less
    if (e->final_total->spilled) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", id, "'s total outgrew its memory budget and is kept as ",
          e->final_total->segments,
          " spilled segments in the state directory: its percentiles are exact (ask for any "
          "set), its distribution is not exported in one piece"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("run ", id, "'s total distribution was not kept"));
  }
  DistributionPage page;
  page.total = *e->final_total;
  auto it = all.begin();
  if (after) {
    it = std::upper_bound(all.begin(), all.end(), *after,
                          [](int64_t v, const LatencyBucket& b) { return v < b.latency; });
  }
  const size_t left = static_cast<size_t>(all.end() - it);
  page.buckets.assign(it, it + static_cast<std::ptrdiff_t>(std::min(left, max)));
  page.more = left > max;
  return page;
}

absl::StatusOr<std::vector<WindowRecord>> RunRegistry::History(RunId id, int64_t from) const {
  ReaderLock lock(mu_);
  const Entry* e = Find(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
  std::vector<WindowRecord> out;
  const int64_t skip = std::max<int64_t>(0, from - e->first_event);
  for (size_t i = static_cast<size_t>(skip); i < e->history.size(); ++i) {
    out.push_back(e->history[i]);
  }
  return out;
}

absl::StatusOr<RunRegistry::WatchBatch> RunRegistry::Events(RunId id, int64_t next) const {
  ReaderLock lock(mu_);
  const Entry* e = Find(id);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("run ", id, " not found"));
  WatchBatch batch;
  batch.skipped = std::max<int64_t>(0, e->first_event - next);
  const int64_t from = std::max(next, e->first_event);
  for (int64_t i = from; i < e->events; ++i) {
    batch.events.push_back(e->history[static_cast<size_t>(i - e->first_event)]);
  }
  batch.next = std::max(next, e->events);
  batch.ended = e->ended;
  return batch;
}

size_t RunRegistry::running() const {
  ReaderLock lock(mu_);
  size_t n = 0;
  for (const auto& [id, e] : runs_) n += e->ended ? 0 : 1;
  return n;
}

size_t RunRegistry::size() const {
  ReaderLock lock(mu_);
  return runs_.size();
}

int64_t RunRegistry::InfoBytes(const RunInfo& info) {
  // A string's heap block beyond its inline buffer, and a map node's
  // allocation (its key/value pair and the tree links).
  constexpr int64_t kMapNodeBytes = 32 + 2 * static_cast<int64_t>(sizeof(std::string));
  const auto heap = [](const std::string& s) {
    return s.capacity() > 15 ? static_cast<int64_t>(s.capacity()) + 1 : int64_t{0};
  };
  const RunSpec& spec = info.spec;
  int64_t b = heap(spec.name) + heap(spec.parameters) + heap(spec.clock) +
              heap(info.failure_reason) +
              static_cast<int64_t>(spec.latency.percentiles.size() * sizeof(double));
  for (const auto& [key, value] : spec.labels) b += kMapNodeBytes + heap(key) + heap(value);
  b += heap(spec.slo);
  for (const SloStatus::Verdict& v : info.slo_status.verdicts) {
    b += static_cast<int64_t>(sizeof(v)) + heap(v.term) + heap(v.line);
  }
  return b;
}

int64_t RunRegistry::ApproxBytes() const {
  ReaderLock lock(mu_);
  return bytes_;
}

}  // namespace perld::runs
