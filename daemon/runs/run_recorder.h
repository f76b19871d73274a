// RunRecorder: the recorder-thread side of one run -- its timestamp channels,
// its exact windows and its reporting interval.
//
// Drain() moves the run's queued timestamps into its windows (it is the
// TimeStampSink of its own channels) and merges the remote windows queued in
// its inbox (ingest in windows mode), if it has one; Tick() closes the periodic window when
// its interval is due; Finish() closes the last partial window and the run
// total. Every closed window leaves as a WindowRecord through the outbox:
// interval windows, windows closed early by the IsFull policy and total
// segments, in the order they closed, then the run total. A run with a
// warm-up cuts a window at its end and restarts the total there (the
// warm-up's windows leave flagged warmup).
//
// Threads: constructed anywhere, then owned and used only by the recorder
// thread (RecorderHost) until it is retired. The channels are shared with the
// run's producers, which only Send.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/response_times.h"
#include "daemon/core/timestamp_channels.h"
#include "daemon/core/timestamp_sink.h"
#include "daemon/runs/recorder_event.h"
#include "daemon/runs/remote_window_inbox.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/window_rate.h"

namespace perld::runs {

// Where a resumed run (restored from a daemon checkpoint) continues.
struct RecorderResume {
  // > 0: the run resumes now (monotonic ns): its first window starts here,
  // while the run's start lies in the past (the constructor's start_ns).
  int64_t now_ns = 0;
  int64_t periodic_seq = 0;              // the last periodic window published before
  int64_t segment_seq = 0;               // the last total segment published before
  std::vector<uint64_t> client_applied;  // per client index (WindowRecord::applied)
  WindowRecord::Schedule schedule;       // the run's schedule up to the cut
};

// A rate-controlled run's response view (RunInfo::response_run): its own
// windows, fed from the same timestamps (end - intended start), closed at
// the same instants as the service run's.
struct ResponseViewSetup {
  RunId id = 0;
  PeriodicAndTotalWindows windows;
  int64_t late_threshold_ns = 0;  // RunSpec::late_threshold_ns
  // Slots the producers dropped (`-catchup skip`), counted by them; read at
  // every window close. May be null.
  std::shared_ptr<const std::atomic<int64_t>> skipped;
  // A resumed run's view: its last periodic window and total segment
  // published before (RecorderResume's, for the view).
  int64_t periodic_seq = 0;
  int64_t segment_seq = 0;
};

class RunRecorder final : public TimeStampSink {
 public:
  // Periodic windows in a row whose schedule floor rose above the late
  // threshold before a run is flagged not sustaining its rate.
  static constexpr int kBehindWindows = 3;

  // `start_ns` is the run's start on the monotonic clock, `start_unix_ms`
  // the same instant on the wall clock. REQUIRES: interval_ns >= 1.
  RunRecorder(RunId id, PeriodicAndTotalWindows windows, TimeUnit unit, int64_t interval_ns,
              int64_t start_ns, int64_t start_unix_ms, std::shared_ptr<TimeStampChannels> channels,
              RecorderOutbox* outbox, std::shared_ptr<RemoteWindowInbox> inbox = nullptr,
              RecorderResume resume = {}, int64_t warmup_ns = 0,
              std::optional<ResponseViewSetup> response = std::nullopt);

  RunId id() const { return id_; }

  // Recorder thread. Moves queued timestamps into the windows.
  size_t Drain(PollMode mode) {
    size_t n = channels_ ? channels_->Drain(*this, mode) : 0;
    if (inbox_ != nullptr) n += DrainInbox();
    return n;
  }
  // Recorder thread. Closes the last partial window (if it saw anything) and
  // publishes the run total (from the warm-up's end, if the run has one).
  // REQUIRES: the channels are fully drained.
  void Finish(int64_t now_ns);
  // Recorder thread. Drains until a kAll pass finds nothing.
  void DrainAll() {
    while (Drain(PollMode::kAll) > 0) {
    }
  }

  // TimeStampSink (recorder thread).
  void Accept(const TimeStamp* batch, size_t n) override;
  // Paced timestamps: service time into the run's windows, response time
  // into the response view's (if any), and the schedule counters.
  // `intended` null: timestamps without slots (a closed-loop remote client
  // of a rate-controlled run), response time = service time.
  void AcceptPaced(const TimeStamp* batch, const int64_t* intended, size_t n) override;
  void Tick(int64_t now_ns) override;

 private:
  struct ResponseView {
    RunId id = 0;
    PeriodicAndTotalWindows windows;
    int64_t periodic_seq = 0;
    int64_t segment_seq = 0;
    int64_t window_start_ns = 0;
    WindowRate rate;  // remote windows' spans, as the run's (window_rate_)
  };
  // Slots the producers skipped since the last call.
  int64_t TakeSkipped();
  // The schedule of the window closing now; also advances the run's.
  WindowRecord::Schedule TakeWindowSchedule();
  void PublishResponse(WindowReport report, int64_t start_ns, int64_t end_ns,
                       const WindowRecord::Schedule& schedule);
  void PublishResponsePending(int64_t now_ns);
  // Publishes both views' early (IsFull) reports, the view's first.
  void PublishAllPending();
  // Takes `windows`' early reports in order and hands each to `publish`
  // with its start (an early periodic close also moves window_start_ns).
  template <class PublishFn>
  void ForEachPending(PeriodicAndTotalWindows& windows, int64_t& window_start_ns, int64_t now_ns,
                      PublishFn publish) const;
  // The fields every published window shares, from its report.
  void Fill(WindowRecord& w, WindowReport report, int64_t start_ns, int64_t end_ns) const;

  size_t DrainInbox();
  // Merges a remote window into the response view (if the run has one);
  // the caller applies the pair's IsFull policy (CloseBothIfFull).
  void MergeIntoView(const RemoteWindow& w);
  void CountRemote(const RemoteWindow& w);
  void CloseWindow(int64_t now_ns);
  void PublishPending(int64_t now_ns);
  // `schedule`: a periodic window's (WindowRecord::schedule); totals take the run's.
  void Publish(WindowReport report, int64_t start_ns, int64_t end_ns,
               const WindowRecord::Schedule& schedule = {});
  int64_t UnixMs(int64_t mono_ns) const {
    return start_unix_ms_ + (mono_ns - start_ns_) / 1'000'000;
  }

  const RunId id_;
  PeriodicAndTotalWindows windows_;
  const int64_t ns_per_unit_;
  const int64_t interval_ns_;
  const int64_t start_ns_;
  const int64_t start_unix_ms_;
  std::shared_ptr<TimeStampChannels> channels_;
  RecorderOutbox* const outbox_;
  std::shared_ptr<RemoteWindowInbox> inbox_;
  int64_t window_start_ns_;
  int64_t last_tick_ns_;
  int64_t next_report_ns_;
  int64_t periodic_seq_ = 0;
  int64_t segment_seq_ = 0;
  // Remote windows: this periodic window's and the run's counts, and per
  // client index the periodic seq it last contributed to (0: never).
  WindowRecord::Remote window_remote_;
  WindowRecord::Remote run_remote_;
  std::vector<int64_t> client_last_window_;
  WindowRate window_rate_;  // the periodic window's rate seconds (remote windows' spans)
  // The warm-up (warmup_ns > 0): until warmup_end_ns_ the windows are
  // flagged warmup; there a window is cut and the total starts afresh
  // (total_start_ns_). 0 once over, or without one.
  int64_t warmup_end_ns_ = 0;
  int64_t total_start_ns_;
  LatencyCounters warmup_left_out_;  // what the warm-up left out of the total
  // Per client index, the last message sequence merged (inbox runs only).
  std::vector<uint64_t> client_applied_;
  bool mid_message_ = false;  // recording a raw message's timestamps
  // Rate-controlled runs: the response view (absent: closed loop) and the
  // schedule of the open window and of the run so far.
  std::optional<ResponseView> response_;
  int64_t late_threshold_ = 0;  // in the run's unit
  std::shared_ptr<const std::atomic<int64_t>> skipped_;
  int64_t skipped_seen_ = 0;
  int64_t remote_skipped_ = 0;  // slots remote clients dropped, not yet taken
  WindowRecord::Schedule window_schedule_;
  WindowRecord::Schedule run_schedule_;
  int behind_windows_ = 0;  // consecutive windows whose floor rose
  int64_t last_floor_ = 0;  // the previous window's min_lag
};

}  // namespace perld::runs
