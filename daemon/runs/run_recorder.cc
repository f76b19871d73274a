#include "daemon/runs/run_recorder.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace perld::runs {

using FullClose = PeriodicAndTotalWindows::FullClose;

RunRecorder::RunRecorder(RunId id, PeriodicAndTotalWindows windows, TimeUnit unit,
                         int64_t interval_ns, int64_t start_ns, int64_t start_unix_ms,
                         std::shared_ptr<TimeStampChannels> channels, RecorderOutbox* outbox,
                         std::shared_ptr<RemoteWindowInbox> inbox, RecorderResume resume,
                         int64_t warmup_ns, std::optional<ResponseViewSetup> response)
    : id_(id),
      windows_(std::move(windows)),
      ns_per_unit_(NanosPerUnit(unit)),
      interval_ns_(interval_ns),
      start_ns_(start_ns),
      start_unix_ms_(start_unix_ms),
      channels_(std::move(channels)),
      outbox_(outbox),
      inbox_(std::move(inbox)),
      window_start_ns_(start_ns),
      last_tick_ns_(start_ns),
      next_report_ns_(start_ns + interval_ns),
      periodic_seq_(resume.periodic_seq),
      segment_seq_(resume.segment_seq),
      total_start_ns_(start_ns),
      client_applied_(std::move(resume.client_applied)),
      run_schedule_(resume.schedule) {
  if (resume.now_ns > 0) {
    window_start_ns_ = resume.now_ns;
    last_tick_ns_ = resume.now_ns;
    next_report_ns_ = resume.now_ns + interval_ns;
  } else if (warmup_ns > 0) {
    warmup_end_ns_ = start_ns + warmup_ns;
    next_report_ns_ = std::min(next_report_ns_, warmup_end_ns_);  // a cut there
  }
  if (response) {
    response_.emplace(ResponseView{.id = response->id,
                                   .windows = std::move(response->windows),
                                   .periodic_seq = response->periodic_seq,
                                   .segment_seq = response->segment_seq,
                                   .window_start_ns = window_start_ns_,
                                   .rate = {}});
    late_threshold_ = std::max<int64_t>(response->late_threshold_ns, 0) / ns_per_unit_;
    skipped_ = std::move(response->skipped);
  }
}

void RunRecorder::AcceptPaced(const TimeStamp* batch, const int64_t* intended, size_t n) {
  if (!response_) {  // a run without a response view keeps service time only
    Accept(batch, n);
    return;
  }
  // Service time into the run's windows, the same operations timed from
  // their slots into the view's (both closing together), their start lags
  // for the window's schedule (operations without slots: not in it).
  LagTally lags;
  RecordBothViews(windows_, response_->windows, batch, intended, n, last_tick_ns_ / ns_per_unit_,
                  late_threshold_, intended != nullptr ? &lags : nullptr);
  window_schedule_.Add({.operations = lags.operations,
                        .late = lags.late,
                        .max_lag = lags.max_lag,
                        .min_lag = lags.min_lag,
                        .total_lag = lags.total_lag});
  PublishAllPending();
}

void RunRecorder::PublishAllPending() {
  // The view's windows first, as at a timed close (the run's SLO reads it).
  if (response_ && response_->windows.HasPendingReports()) [[unlikely]] {
    PublishResponsePending(last_tick_ns_);
  }
  if (windows_.HasPendingReports()) [[unlikely]] {
    PublishPending(last_tick_ns_);
  }
}

int64_t RunRecorder::TakeSkipped() {
  int64_t taken = std::exchange(remote_skipped_, 0);
  if (skipped_ == nullptr) return taken;
  const int64_t skipped = skipped_->load(std::memory_order_relaxed);
  taken += skipped - skipped_seen_;
  skipped_seen_ = skipped;
  return taken;
}

WindowRecord::Schedule RunRecorder::TakeWindowSchedule() {
  WindowRecord::Schedule w = window_schedule_;
  window_schedule_ = {};
  w.skipped = TakeSkipped();
  // Falling behind: the window's floor is late and above the last one's.
  const bool behind = w.operations > 0 && w.min_lag > late_threshold_ && w.min_lag > last_floor_;
  behind_windows_ = behind ? behind_windows_ + 1 : 0;
  last_floor_ = w.operations > 0 ? w.min_lag : 0;
  w.not_sustained = behind_windows_ >= kBehindWindows;
  run_schedule_.Add(w);
  return w;
}

void RunRecorder::Accept(const TimeStamp* batch, size_t n) {
  if (response_) [[unlikely]] {
    // A closed-loop producer in a rate-controlled run: its operations
    // started when intended (response == service), so both views hold
    // every operation whatever path delivered it.
    RecordBothViews(windows_, response_->windows, batch, nullptr, n, last_tick_ns_ / ns_per_unit_,
                    late_threshold_, nullptr);
  } else {
    windows_.RecordBatch(batch, n, last_tick_ns_ / ns_per_unit_);
  }
  PublishAllPending();
}

size_t RunRecorder::DrainInbox() {
  return inbox_->Drain([this](const RemoteWindow& w) {
    if (w.client >= 0 && w.sequence > 0) {
      const auto index = static_cast<size_t>(w.client);
      if (index >= client_applied_.size()) client_applied_.resize(index + 1, 0);
      client_applied_[index] = w.sequence;  // before the merge: an early close includes w
    }
    remote_skipped_ += w.schedule.skipped;  // dropped slots (raw batch or response window)
    if (w.raw) {
      // A window the IsFull policy closes inside the batch holds part of
      // the message only: not a cut.
      mid_message_ = true;
      // A closed-loop client's batch (no slots) in a rate-controlled run:
      // its response times are its service times (AcceptPaced with none).
      AcceptPaced(w.timestamps.data(), w.intended.empty() ? nullptr : w.intended.data(),
                  w.timestamps.size());
      mid_message_ = false;
    } else if (w.response) {
      // The response view of a service window merged just before (the
      // client's same operations), and their schedule.
      MergeIntoView(w);
      window_schedule_.Add(w.schedule);
    } else {
      CountRemote(w);
      // The handler validated the window against the run's range, so the
      // merge cannot fail; a failure would leave the windows unchanged.
      // With a view, the pair applies the IsFull policy below, together.
      static_cast<void>(windows_.MergeWindow(w.counters, w.buckets, last_tick_ns_ / ns_per_unit_,
                                             response_ ? FullClose::kCaller : FullClose::kSelf,
                                             w.checked));
      // A closed-loop client's window waits from its actual starts: it is
      // its response view too.
      if (!w.paced_client) MergeIntoView(w);
    }
    if (response_) CloseBothIfFull(windows_, response_->windows, last_tick_ns_ / ns_per_unit_);
    PublishAllPending();
  });
}

void RunRecorder::MergeIntoView(const RemoteWindow& w) {
  if (!response_) return;
  static_cast<void>(response_->windows.MergeWindow(
      w.counters, w.buckets, last_tick_ns_ / ns_per_unit_, FullClose::kCaller, w.checked));
  response_->rate.Add(w.client, w.counters.records, w.start_unix_ms, w.end_unix_ms);
}

void RunRecorder::CountRemote(const RemoteWindow& w) {
  ++window_remote_.reports;
  ++run_remote_.reports;
  if (w.end_unix_ms > 0 && w.end_unix_ms < UnixMs(window_start_ns_)) {
    ++window_remote_.late;
    ++run_remote_.late;
  }
  window_rate_.Add(w.client, w.counters.records, w.start_unix_ms, w.end_unix_ms);
  if (w.client < 0) return;
  const auto index = static_cast<size_t>(w.client);
  if (index >= client_last_window_.size()) client_last_window_.resize(index + 1, 0);
  int64_t& last = client_last_window_[index];
  const int64_t window = periodic_seq_ + 1;  // the window being filled
  if (last == window) return;
  if (last == 0) ++run_remote_.clients;
  last = window;
  ++window_remote_.clients;
}

void RunRecorder::Tick(int64_t now_ns) {
  last_tick_ns_ = now_ns;
  if (now_ns < next_report_ns_) return;
  CloseWindow(now_ns);
  if (warmup_end_ns_ > 0 && now_ns >= warmup_end_ns_) {
    // The warm-up is over: the total starts afresh here, and the windows
    // follow the interval from here.
    warmup_left_out_ = windows_.DiscardTotal(now_ns / ns_per_unit_);
    if (response_) response_->windows.DiscardTotal(now_ns / ns_per_unit_);
    run_schedule_ = {};
    total_start_ns_ = now_ns;
    warmup_end_ns_ = 0;
    next_report_ns_ = now_ns;
  }
  // Catch up without a burst of empty windows after a stall.
  next_report_ns_ += interval_ns_;
  if (next_report_ns_ <= now_ns) next_report_ns_ = now_ns + interval_ns_;
  if (warmup_end_ns_ > 0) next_report_ns_ = std::min(next_report_ns_, warmup_end_ns_);
}

void RunRecorder::Finish(int64_t now_ns) {
  // The last partial window, if it saw anything: records, or remote reports
  // (an empty report counts too, so the windows' report counts add up to
  // the run's), or -- in the response view -- a windows client's response
  // window that came after its service window's cut (its schedule with it).
  const auto saw = [](const PeriodicAndTotalWindows& w) {
    return w.periodic().counters().records > 0 || w.periodic().counters().rejected > 0;
  };
  if (saw(windows_) || window_remote_.reports > 0 || (response_ && saw(response_->windows))) {
    CloseWindow(now_ns);
  }
  run_schedule_.skipped += TakeSkipped();  // since the last window that closed
  if (response_) {                         // the view's total first: it has ended when its run has
    WindowReport total;
    response_->windows.CloseTotal(now_ns / ns_per_unit_, &total);
    if (response_->windows.HasPendingReports()) PublishResponsePending(now_ns);
    PublishResponse(std::move(total), total_start_ns_, now_ns, run_schedule_);
  }
  WindowReport total;
  windows_.CloseTotal(now_ns / ns_per_unit_, &total);
  if (windows_.HasPendingReports()) PublishPending(now_ns);  // a spilled total's last segment
  Publish(std::move(total), total_start_ns_, now_ns);
}

void RunRecorder::CloseWindow(int64_t now_ns) {
  const WindowRecord::Schedule schedule = TakeWindowSchedule();
  if (response_) {  // the view's window first: the run's SLO reads it (RunManager)
    WindowReport report;
    response_->windows.CloseWindow(now_ns / ns_per_unit_, &report);
    const int64_t start = response_->window_start_ns;
    response_->window_start_ns = now_ns;
    PublishResponse(std::move(report), start, now_ns, schedule);
    if (response_->windows.HasPendingReports()) PublishResponsePending(now_ns);
  }
  WindowReport report;
  windows_.CloseWindow(now_ns / ns_per_unit_, &report);
  const int64_t start = window_start_ns_;
  window_start_ns_ = now_ns;
  Publish(std::move(report), start, now_ns, schedule);
  if (windows_.HasPendingReports()) PublishPending(now_ns);
}

void RunRecorder::PublishResponsePending(int64_t now_ns) {
  ForEachPending(response_->windows, response_->window_start_ns, now_ns,
                 [&](WindowReport report, int64_t start) {
                   PublishResponse(std::move(report), start, now_ns, {});
                 });
}

void RunRecorder::PublishResponse(WindowReport report, int64_t start_ns, int64_t end_ns,
                                  const WindowRecord::Schedule& schedule) {
  RecorderEvent event;
  event.kind = RecorderEvent::Kind::kWindow;
  event.run_id = response_->id;
  WindowRecord& w = event.window;
  w.run_id = response_->id;
  switch (report.scope) {
    case WindowReport::Scope::kPeriodic:
      w.kind = WindowRecord::Kind::kPeriodic;
      w.seq = ++response_->periodic_seq;
      w.warmup = warmup_end_ns_ > 0;
      break;
    case WindowReport::Scope::kTotalSegment:
      w.kind = WindowRecord::Kind::kTotalSegment;
      w.seq = ++response_->segment_seq;
      w.through_window = response_->periodic_seq;
      break;
    case WindowReport::Scope::kTotal:
      w.kind = WindowRecord::Kind::kTotal;
      w.seq = 1;
      break;
  }
  const int64_t records = report.snapshot.records;
  Fill(w, std::move(report), start_ns, end_ns);
  w.schedule = schedule;
  if (w.kind == WindowRecord::Kind::kPeriodic) {
    w.rate_seconds = response_->rate.TakeRateSeconds(records, w.seconds);
  }
  w.recorder_bytes = static_cast<int64_t>(response_->windows.periodic().RetainedBytes() +
                                          response_->windows.total().RetainedBytes());
  w.cache_releases =
      response_->windows.periodic().CacheReleases() + response_->windows.total().CacheReleases();
  outbox_->Publish(std::move(event));
}

void RunRecorder::Fill(WindowRecord& w, WindowReport report, int64_t start_ns,
                       int64_t end_ns) const {
  w.start_unix_ms = UnixMs(start_ns);
  w.end_unix_ms = UnixMs(end_ns);
  w.seconds = static_cast<double>(end_ns - start_ns) / 1e9;
  w.snapshot = std::move(report.snapshot);
  w.distribution = std::move(report.distribution);
  w.segments = report.segments;
  w.exact_total = report.exact_total;
  w.spilled = report.spilled;
}

void RunRecorder::PublishPending(int64_t now_ns) {
  ForEachPending(windows_, window_start_ns_, now_ns, [&](WindowReport report, int64_t start) {
    Publish(std::move(report), start, now_ns);
  });
}

template <class PublishFn>
void RunRecorder::ForEachPending(PeriodicAndTotalWindows& windows, int64_t& window_start_ns,
                                 int64_t now_ns, PublishFn publish) const {
  for (WindowReport& report : windows.TakePendingReports()) {
    // An early periodic close ends the current window; a total segment
    // spans from its own start time (in the run's unit) to now.
    int64_t start = report.snapshot.start_time * ns_per_unit_;
    if (report.scope == WindowReport::Scope::kPeriodic) {
      start = window_start_ns;
      window_start_ns = now_ns;
    }
    publish(std::move(report), start);
  }
}

void RunRecorder::Publish(WindowReport report, int64_t start_ns, int64_t end_ns,
                          const WindowRecord::Schedule& schedule) {
  RecorderEvent event;
  event.kind = RecorderEvent::Kind::kWindow;
  event.run_id = id_;
  WindowRecord& w = event.window;
  w.run_id = id_;
  switch (report.scope) {
    case WindowReport::Scope::kPeriodic:
      w.kind = WindowRecord::Kind::kPeriodic;
      w.seq = ++periodic_seq_;
      w.warmup = warmup_end_ns_ > 0;
      w.remote = window_remote_;
      window_remote_ = {};
      if (inbox_ != nullptr) {
        w.applied = client_applied_;
        w.cut = !mid_message_;
      }
      break;
    case WindowReport::Scope::kTotalSegment:
      w.kind = WindowRecord::Kind::kTotalSegment;
      w.seq = ++segment_seq_;
      w.through_window = periodic_seq_;  // the windows it holds are published
      w.remote = run_remote_;
      break;
    case WindowReport::Scope::kTotal:
      w.kind = WindowRecord::Kind::kTotal;
      w.seq = 1;
      w.warmup_left_out = warmup_left_out_;
      w.remote = run_remote_;
      w.schedule = run_schedule_;
      break;
  }
  if (report.scope == WindowReport::Scope::kPeriodic) w.schedule = schedule;
  w.remote.run_clients = run_remote_.clients;
  const int64_t records = report.snapshot.records;
  Fill(w, std::move(report), start_ns, end_ns);
  if (w.kind == WindowRecord::Kind::kPeriodic) {
    w.rate_seconds = window_rate_.TakeRateSeconds(records, w.seconds);
  }
  w.recorder_bytes =
      static_cast<int64_t>(windows_.periodic().RetainedBytes() + windows_.total().RetainedBytes());
  w.cache_releases = windows_.periodic().CacheReleases() + windows_.total().CacheReleases();
  outbox_->Publish(std::move(event));
}

}  // namespace perld::runs
