// A rate-controlled run's response view (issue 30): the recorder times the
// same paced operations twice -- service time (end - start) into the run's
// windows, response time (end - intended start) into the view's -- closes
// both at the same instants (the view's window first) and attaches the
// schedule counters (WindowRecord::Schedule). RunManager creates the view
// with its run and ends it with it. Checked against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/core/latency_config.h"
#include "daemon/core/periodic_and_total_windows.h"
#include "daemon/core/run_total.h"
#include "daemon/core/time_stamp.h"
#include "daemon/runs/recorder_event.h"
#include "daemon/runs/remote_window_inbox.h"
#include "daemon/runs/run_manager.h"
#include "daemon/runs/run_recorder.h"
#include "daemon/runs/run_registry.h"
#include "daemon/runs/window_record.h"

namespace perld::runs {
namespace {

using Schedule = WindowRecord::Schedule;
using Kind = WindowRecord::Kind;

// One paced operation, in the run's unit.
struct Op {
  int64_t intended = 0;
  int64_t start = 0;
  int64_t end = 0;
  int32_t records = 1;
};

using Distribution = std::map<int64_t, int64_t>;  // latency -> records

Distribution ServiceOf(const std::vector<Op>& ops) {
  Distribution d;
  for (const Op& op : ops) d[op.end - op.start] += op.records;
  return d;
}
Distribution ResponseOf(const std::vector<Op>& ops) {
  Distribution d;
  for (const Op& op : ops) d[op.end - op.intended] += op.records;
  return d;
}
std::vector<LatencyBucket> Buckets(const Distribution& d) {
  std::vector<LatencyBucket> out;
  for (const auto& [latency, count] : d) out.push_back(LatencyBucket{latency, count});
  return out;
}
int64_t RecordsOf(const std::vector<Op>& ops) {
  int64_t n = 0;
  for (const Op& op : ops) n += op.records;
  return n;
}
// The schedule of `ops` (skipped and not_sustained left 0/false).
Schedule ScheduleOf(const std::vector<Op>& ops, int64_t late_threshold) {
  Schedule s;
  for (const Op& op : ops) {
    const int64_t lag = op.start - op.intended;
    s.min_lag = s.operations == 0 ? lag : std::min(s.min_lag, lag);
    s.max_lag = std::max(s.max_lag, lag);
    s.total_lag += lag;
    s.late += lag > late_threshold ? 1 : 0;
    ++s.operations;
  }
  return s;
}
std::vector<Op> Concat(const std::vector<std::vector<Op>>& parts) {
  std::vector<Op> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

constexpr RunId kServiceId = 7;
constexpr RunId kViewId = 8;
constexpr int64_t kStartNs = 5'000'000'000;
constexpr int64_t kIntervalNs = 1'000'000;  // 1 ms
constexpr int64_t kStartUnixMs = 1'700'000'000'000;

// `periodic_map_mb` > 0: the periodic window's budget (maxHashMapSizeMB),
// to make it close early (IsFull); 1 MiB holds 65,536 distinct latencies.
PeriodicAndTotalWindows MakeWindows(TimeUnit unit, int64_t periodic_map_mb = 0) {
  LatencyConfig config = LatencyConfig::ForUnit(unit);
  if (periodic_map_mb > 0) {
    config.max_hash_map_size_mb = periodic_map_mb;
    config.max_array_size_mb = 1;  // a hash map over the unit's whole range
  }
  absl::StatusOr<PeriodicAndTotalWindows> w =
      PeriodicAndTotalWindows::Create(config, kStartNs / NanosPerUnit(unit));
  EXPECT_TRUE(w.ok()) << w.status();
  return *std::move(w);
}

// A RunRecorder fed by hand (no channels), with or without a view.
class Harness {
 public:
  // `inbox`: a remote run's (ingest), drained by Drain().
  // `periodic_map_mb`: both views' periodic budget (MakeWindows).
  Harness(TimeUnit unit, int64_t late_threshold_ns, bool view, bool with_skipped = true,
          std::shared_ptr<RemoteWindowInbox> inbox = nullptr, int64_t periodic_map_mb = 0) {
    std::optional<ResponseViewSetup> response;
    if (view) {
      response.emplace(ResponseViewSetup{.id = kViewId,
                                         .windows = MakeWindows(unit, periodic_map_mb),
                                         .late_threshold_ns = late_threshold_ns,
                                         .skipped = with_skipped ? skipped_ : nullptr});
    }
    recorder_ = std::make_unique<RunRecorder>(
        kServiceId, MakeWindows(unit, periodic_map_mb), unit, kIntervalNs, kStartNs, kStartUnixMs,
        nullptr, &outbox_, std::move(inbox), RecorderResume{}, 0, std::move(response));
  }

  void FeedPaced(const std::vector<Op>& ops) {
    std::vector<TimeStamp> batch;
    std::vector<int64_t> intended;
    batch.reserve(ops.size());
    intended.reserve(ops.size());
    for (const Op& op : ops) {
      batch.push_back(TimeStamp{op.start, op.end, op.records, 100});
      intended.push_back(op.intended);
    }
    if (!batch.empty()) recorder_->AcceptPaced(batch.data(), intended.data(), batch.size());
  }
  void FeedClosed(const std::vector<Op>& ops) {
    std::vector<TimeStamp> batch;
    batch.reserve(ops.size());
    for (const Op& op : ops) batch.push_back(TimeStamp{op.start, op.end, op.records, 100});
    if (!batch.empty()) recorder_->Accept(batch.data(), batch.size());
  }
  // Closes periodic window k (1, 2, ...) at its interval.
  void CloseWindow(int k) { recorder_->Tick(kStartNs + k * kIntervalNs); }
  void Finish(int64_t now_ns) { recorder_->Finish(now_ns); }
  void Skip(int64_t n) { skipped_->fetch_add(n, std::memory_order_relaxed); }
  void Drain() { recorder_->DrainAll(); }
  // Drains, closes window 1 at its interval, ends the run half an interval
  // later and returns everything published.
  std::vector<WindowRecord> OneWindowThenFinish() {
    Drain();
    CloseWindow(1);
    Finish(kStartNs + kIntervalNs + kIntervalNs / 2);
    return Take();
  }

  std::vector<WindowRecord> Take() {
    std::vector<WindowRecord> out;
    RecorderEvent event;
    while (outbox_.WaitNext(&event, 0)) {
      EXPECT_EQ(event.kind, RecorderEvent::Kind::kWindow);
      EXPECT_EQ(event.run_id, event.window.run_id);
      out.push_back(std::move(event.window));
    }
    return out;
  }

 private:
  RecorderOutbox outbox_;
  std::shared_ptr<std::atomic<int64_t>> skipped_ = std::make_shared<std::atomic<int64_t>>(0);
  std::unique_ptr<RunRecorder> recorder_;
};

std::vector<const WindowRecord*> Select(const std::vector<WindowRecord>& all, RunId run,
                                        Kind kind) {
  std::vector<const WindowRecord*> out;
  for (const WindowRecord& w : all) {
    if (w.run_id == run && w.kind == kind) out.push_back(&w);
  }
  return out;
}

// The four windows and the last partial one of the main scenario (unit us,
// late threshold 2.5 us -> 2 us: late means lag > 2).
const std::vector<Op> kWindow1 = {
    {100, 100, 110, 1},  // lag 0: service 10, response 10
    {200, 203, 220, 2},  // lag 3 (late): service 17, response 20
    {300, 302, 305, 1},  // lag 2 (at the threshold, not late): service 3, response 5
    {400, 410, 420, 3},  // lag 10 (late): service 10, response 20
};
const std::vector<Op> kWindow2 = {
    {1000, 1001, 1010, 1},  // lag 1: service 9, response 10
    {1100, 1105, 1200, 1},  // lag 5 (late): service 95, response 100
};
// Window 3 is empty. Window 4: one batch larger than the recorder's chunk
// (TimeStampChannels::kBatch), lags 0..5 and several latencies.
std::vector<Op> Window4() {
  std::vector<Op> ops;
  for (int64_t i = 0; i < 700; ++i) {
    const int64_t intended = 5000 + 10 * i;
    const int64_t start = intended + i % 6;
    ops.push_back(Op{intended, start, start + 1 + i % 9, static_cast<int32_t>(1 + i % 2)});
  }
  return ops;
}
const std::vector<Op> kLastWindow = {{9000, 9000, 9004, 1}};  // lag 0

TEST(ResponseViewRecorderTest, ServiceAndResponseWindowsHoldTheSameOperationsTimedTwice) {
  Harness h(TimeUnit::kUs, 2'500, /*view=*/true);
  const std::vector<Op> window4 = Window4();
  const std::vector<std::vector<Op>> windows = {kWindow1, kWindow2, {}, window4, kLastWindow};
  h.FeedPaced(kWindow1);
  h.CloseWindow(1);
  h.FeedPaced(kWindow2);
  h.CloseWindow(2);
  h.CloseWindow(3);
  h.FeedPaced(window4);
  h.CloseWindow(4);
  h.FeedPaced(kLastWindow);
  h.Finish(kStartNs + 4 * kIntervalNs + kIntervalNs / 2);
  const std::vector<WindowRecord> all = h.Take();

  // The view's window of an instant is published before the service run's;
  // the totals come last, the view's first.
  std::vector<std::pair<RunId, Kind>> order;
  std::vector<int64_t> seqs;
  for (const WindowRecord& w : all) {
    order.emplace_back(w.run_id, w.kind);
    seqs.push_back(w.seq);
  }
  std::vector<std::pair<RunId, Kind>> want_order;
  std::vector<int64_t> want_seqs;
  for (int64_t k = 1; k <= 5; ++k) {
    want_order.emplace_back(kViewId, Kind::kPeriodic);
    want_order.emplace_back(kServiceId, Kind::kPeriodic);
    want_seqs.insert(want_seqs.end(), {k, k});
  }
  want_order.emplace_back(kViewId, Kind::kTotal);
  want_order.emplace_back(kServiceId, Kind::kTotal);
  want_seqs.insert(want_seqs.end(), {1, 1});
  ASSERT_EQ(order, want_order);
  EXPECT_EQ(seqs, want_seqs);

  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  ASSERT_EQ(service.size(), windows.size());
  ASSERT_EQ(view.size(), windows.size());
  for (size_t k = 0; k < windows.size(); ++k) {
    SCOPED_TRACE("window " + std::to_string(k + 1));
    EXPECT_EQ(service[k]->snapshot.records, RecordsOf(windows[k]));
    EXPECT_EQ(view[k]->snapshot.records, service[k]->snapshot.records);
    EXPECT_EQ(view[k]->snapshot.valid, service[k]->snapshot.valid);
    EXPECT_EQ(view[k]->snapshot.bytes, service[k]->snapshot.bytes);
    EXPECT_EQ(service[k]->distribution, Buckets(ServiceOf(windows[k])));
    EXPECT_EQ(view[k]->distribution, Buckets(ResponseOf(windows[k])));
    // Closed at the same instant.
    EXPECT_EQ(view[k]->start_unix_ms, service[k]->start_unix_ms);
    EXPECT_EQ(view[k]->end_unix_ms, service[k]->end_unix_ms);
    EXPECT_EQ(view[k]->seconds, service[k]->seconds);
    EXPECT_EQ(view[k]->schedule, service[k]->schedule);
  }
  // The hand-computed distributions of window 1.
  EXPECT_EQ(service[0]->distribution, (std::vector<LatencyBucket>{{3, 1}, {10, 4}, {17, 2}}));
  EXPECT_EQ(view[0]->distribution, (std::vector<LatencyBucket>{{5, 1}, {10, 1}, {20, 5}}));

  const auto service_total = Select(all, kServiceId, Kind::kTotal);
  const auto view_total = Select(all, kViewId, Kind::kTotal);
  ASSERT_EQ(service_total.size(), 1u);
  ASSERT_EQ(view_total.size(), 1u);
  const std::vector<Op> every = Concat(windows);
  EXPECT_EQ(service_total[0]->snapshot.records, RecordsOf(every));
  EXPECT_EQ(view_total[0]->snapshot.records, RecordsOf(every));
  EXPECT_EQ(service_total[0]->distribution, Buckets(ServiceOf(every)));
  EXPECT_EQ(view_total[0]->distribution, Buckets(ResponseOf(every)));
  EXPECT_EQ(view_total[0]->start_unix_ms, service_total[0]->start_unix_ms);
  EXPECT_EQ(view_total[0]->end_unix_ms, service_total[0]->end_unix_ms);
}

// `ops` as a client's closed local window: its counters and distribution,
// timed from the actual starts (service) or from the slots (response).
// `paced_client`: sent by a rate-controlled client (its response window
// follows).
RemoteWindow ClientWindow(const std::vector<Op>& ops, bool response, bool paced_client = true) {
  PeriodicAndTotalWindows local = MakeWindows(TimeUnit::kUs);
  std::vector<TimeStamp> batch;
  for (const Op& op : ops) {
    batch.push_back(TimeStamp{response ? op.intended : op.start, op.end, op.records, 100});
  }
  local.RecordBatch(batch.data(), batch.size(), 0);
  WindowReport report;
  local.CloseWindow(0, &report);
  RemoteWindow w;
  w.counters = CountersOf(report.snapshot);
  w.buckets = report.distribution;
  w.response = response;
  w.paced_client = paced_client;
  return w;
}

// Remote rate-controlled clients (ingest): a raw batch's start lags
// (timestamps from 0, intended = -lag) are recorded as a local paced
// writer's, its skipped slots join the window's schedule; a windows
// client's response window merges into the view with its schedule, its
// service window into the run.
TEST(ResponseViewRecorderTest, RemoteRawBatchesAndWindowsFeedBothViews) {
  auto inbox = std::make_shared<RemoteWindowInbox>();
  Harness h(TimeUnit::kUs, 2'500, /*view=*/true, /*with_skipped=*/false, inbox);
  RemoteWindow raw;
  raw.raw = true;
  raw.schedule.skipped = 3;
  for (const Op& op : kWindow1) {
    raw.timestamps.push_back(TimeStamp{0, op.end - op.start, op.records, 100});
    raw.intended.push_back(-(op.start - op.intended));
  }
  inbox->Push(std::move(raw));
  h.Drain();
  h.CloseWindow(1);
  const Schedule sent = ScheduleOf(kWindow2, 2);
  inbox->Push(ClientWindow(kWindow2, /*response=*/false));
  RemoteWindow view2 = ClientWindow(kWindow2, /*response=*/true);
  view2.schedule = sent;
  inbox->Push(std::move(view2));
  h.Drain();
  h.CloseWindow(2);
  h.Finish(kStartNs + 2 * kIntervalNs + kIntervalNs / 2);
  const std::vector<WindowRecord> all = h.Take();

  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  ASSERT_EQ(service.size(), 2u);
  ASSERT_EQ(view.size(), 2u);
  EXPECT_EQ(service[0]->distribution, Buckets(ServiceOf(kWindow1)));
  EXPECT_EQ(view[0]->distribution, Buckets(ResponseOf(kWindow1)));
  EXPECT_EQ(service[1]->distribution, Buckets(ServiceOf(kWindow2)));
  EXPECT_EQ(view[1]->distribution, Buckets(ResponseOf(kWindow2)));
  Schedule want1 = ScheduleOf(kWindow1, 2);
  want1.skipped = 3;
  EXPECT_EQ(view[0]->schedule, want1);
  EXPECT_EQ(view[1]->schedule, sent);
  EXPECT_EQ(service[1]->schedule, sent);
  // The response window counts its records in the view only.
  EXPECT_EQ(service[1]->snapshot.records, RecordsOf(kWindow2));
  EXPECT_EQ(view[1]->snapshot.records, RecordsOf(kWindow2));
  const std::vector<Op> every = Concat({kWindow1, kWindow2});
  const auto service_total = Select(all, kServiceId, Kind::kTotal);
  const auto view_total = Select(all, kViewId, Kind::kTotal);
  ASSERT_EQ(service_total.size(), 1u);
  ASSERT_EQ(view_total.size(), 1u);
  EXPECT_EQ(service_total[0]->distribution, Buckets(ServiceOf(every)));
  EXPECT_EQ(view_total[0]->distribution, Buckets(ResponseOf(every)));
  EXPECT_EQ(view_total[0]->snapshot.records, RecordsOf(every));
}

// A windows client's response window that reaches the recorder after the
// cut its service window made (the client sends it right after; a run that
// ends then): the last window still closes, so neither its records in the
// view's windows nor its schedule in the run's are lost.
TEST(ResponseViewRecorderTest, AResponseWindowAloneInTheLastWindowKeepsItsSchedule) {
  auto inbox = std::make_shared<RemoteWindowInbox>();
  Harness h(TimeUnit::kUs, 2'500, /*view=*/true, /*with_skipped=*/false, inbox);
  inbox->Push(ClientWindow(kWindow1, /*response=*/false));
  h.Drain();
  h.CloseWindow(1);
  RemoteWindow view1 = ClientWindow(kWindow1, /*response=*/true);
  view1.schedule = ScheduleOf(kWindow1, 2);
  inbox->Push(std::move(view1));
  h.Drain();
  h.Finish(kStartNs + kIntervalNs + kIntervalNs / 2);
  const std::vector<WindowRecord> all = h.Take();
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  ASSERT_EQ(view.size(), 2u) << "the view's last window closes with the run";
  EXPECT_EQ(view[1]->distribution, Buckets(ResponseOf(kWindow1)));
  EXPECT_EQ(view[1]->schedule, ScheduleOf(kWindow1, 2));
  const auto view_total = Select(all, kViewId, Kind::kTotal);
  const auto service_total = Select(all, kServiceId, Kind::kTotal);
  ASSERT_EQ(view_total.size(), 1u);
  ASSERT_EQ(service_total.size(), 1u);
  EXPECT_EQ(view_total[0]->snapshot.records, RecordsOf(kWindow1));
  EXPECT_EQ(view_total[0]->schedule, ScheduleOf(kWindow1, 2)) << "every operation once";
  EXPECT_EQ(service_total[0]->schedule, ScheduleOf(kWindow1, 2));
}

// A closed-loop client of a rate-controlled run (no slots): its operations
// wait from their actual start, so they join both views as they are (raw
// batch or service window) and stay out of the schedule.
TEST(ResponseViewRecorderTest, ClosedLoopRemoteClientsJoinBothViewsWithoutSlots) {
  auto inbox = std::make_shared<RemoteWindowInbox>();
  Harness h(TimeUnit::kUs, 2'500, /*view=*/true, /*with_skipped=*/false, inbox);
  RemoteWindow raw;
  raw.raw = true;
  for (const Op& op : kWindow1) raw.timestamps.push_back(TimeStamp{0, op.end - op.start, 1, 100});
  inbox->Push(std::move(raw));
  inbox->Push(ClientWindow(kWindow2, /*response=*/false, /*paced_client=*/false));
  const std::vector<WindowRecord> all = h.OneWindowThenFinish();
  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  ASSERT_EQ(service.size(), 1u);
  ASSERT_EQ(view.size(), 1u);
  std::vector<Op> ops = kWindow1;
  for (Op& op : ops) op.records = 1;
  ops.insert(ops.end(), kWindow2.begin(), kWindow2.end());
  EXPECT_EQ(service[0]->distribution, Buckets(ServiceOf(ops)));
  EXPECT_EQ(view[0]->distribution, service[0]->distribution);
  EXPECT_EQ(view[0]->snapshot.records, service[0]->snapshot.records);
  EXPECT_EQ(view[0]->schedule, Schedule{});
}

// The two views close early together: a response window is usually much
// wider than its service window (every start lag adds a distinct latency),
// so the view reaches its memory budget first; the run's window closes with
// it, at the same instant and over the same operations, so window k of the
// run and window k of its view always describe the same operations.
TEST(ResponseViewRecorderTest, AFullViewClosesBothWindowsTogether) {
  Harness h(TimeUnit::kUs, 2'500, /*view=*/true, /*with_skipped=*/true, nullptr,
            /*periodic_map_mb=*/1);
  std::vector<Op> ops;
  for (int64_t i = 0; i < 100'000; ++i) {
    const int64_t start = 1'000'000 + 10 * i;
    ops.push_back(Op{start - i, start, start + 5, 1});  // service 5, response 5 + i
  }
  h.FeedPaced(ops);
  const std::vector<WindowRecord> all = h.OneWindowThenFinish();
  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  ASSERT_EQ(view.size(), 2u) << "the view's budget (65,536 distinct) closes it once";
  ASSERT_EQ(service.size(), view.size()) << "the run's window closes with its view's";
  int64_t done = 0;
  for (size_t k = 0; k < view.size(); ++k) {
    SCOPED_TRACE("window " + std::to_string(k + 1));
    EXPECT_EQ(view[k]->seq, service[k]->seq);
    EXPECT_EQ(view[k]->snapshot.closed_full, k == 0);
    EXPECT_EQ(service[k]->snapshot.closed_full, k == 0);
    EXPECT_EQ(view[k]->end_unix_ms, service[k]->end_unix_ms);
    EXPECT_EQ(view[k]->snapshot.records, service[k]->snapshot.records);
    const std::vector<Op> part(ops.begin() + done, ops.begin() + done + view[k]->snapshot.records);
    EXPECT_EQ(service[k]->distribution, Buckets(ServiceOf(part)));
    EXPECT_EQ(view[k]->distribution, Buckets(ResponseOf(part)));
    done += view[k]->snapshot.records;
  }
  EXPECT_EQ(done, RecordsOf(ops));
  // Closed at a chunk boundary just past the budget.
  EXPECT_GT(view[0]->snapshot.records, 65'536);
  EXPECT_LE(view[0]->snapshot.records, 65'536 + 256);
}

// Merged remote windows (ingest, windows mode) follow the same rule: a
// response window that fills the view closes the run's window with it.
TEST(ResponseViewRecorderTest, AFullMergedViewClosesBothWindowsTogether) {
  auto inbox = std::make_shared<RemoteWindowInbox>();
  Harness h(TimeUnit::kUs, 2'500, /*view=*/true, /*with_skipped=*/false, inbox,
            /*periodic_map_mb=*/1);
  std::vector<Op> ops;
  for (int64_t i = 0; i < 70'000; ++i) {
    const int64_t start = 1'000'000 + 10 * i;
    ops.push_back(Op{start - i, start, start + 5, 1});
  }
  inbox->Push(ClientWindow(ops, /*response=*/false));
  inbox->Push(ClientWindow(ops, /*response=*/true));
  inbox->Push(ClientWindow(kWindow2, /*response=*/false));
  inbox->Push(ClientWindow(kWindow2, /*response=*/true));
  const std::vector<WindowRecord> all = h.OneWindowThenFinish();
  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  ASSERT_EQ(view.size(), 2u);
  ASSERT_EQ(service.size(), 2u);
  EXPECT_TRUE(view[0]->snapshot.closed_full);
  EXPECT_TRUE(service[0]->snapshot.closed_full);
  EXPECT_EQ(view[0]->end_unix_ms, service[0]->end_unix_ms);
  EXPECT_EQ(service[0]->distribution, Buckets(ServiceOf(ops)));
  EXPECT_EQ(view[0]->distribution, Buckets(ResponseOf(ops)));
  EXPECT_EQ(service[1]->distribution, Buckets(ServiceOf(kWindow2)));
  EXPECT_EQ(view[1]->distribution, Buckets(ResponseOf(kWindow2)));
}

TEST(ResponseViewRecorderTest, ScheduleCountersPerWindowAndForTheRun) {
  Harness h(TimeUnit::kUs, 2'500, /*view=*/true);  // late: lag > 2 us
  const std::vector<Op> window4 = Window4();
  h.FeedPaced(kWindow1);
  h.Skip(5);
  h.CloseWindow(1);
  h.FeedPaced(kWindow2);
  h.CloseWindow(2);
  h.Skip(2);  // an empty window that skipped slots
  h.CloseWindow(3);
  h.FeedPaced(window4);
  h.CloseWindow(4);
  h.FeedPaced(kLastWindow);
  h.Skip(1);
  h.Finish(kStartNs + 4 * kIntervalNs + kIntervalNs / 2);
  const std::vector<WindowRecord> all = h.Take();

  // Window 4 by the oracle (700 operations, lag i % 6: 0..5; late: 3, 4, 5).
  const Schedule w4 = ScheduleOf(window4, 2);
  ASSERT_EQ(w4.operations, 700);
  int64_t late4 = 0;
  int64_t lag4 = 0;
  for (int64_t i = 0; i < 700; ++i) {
    late4 += i % 6 > 2 ? 1 : 0;
    lag4 += i % 6;
  }
  ASSERT_EQ(w4.late, late4);
  ASSERT_EQ(w4.total_lag, lag4);
  const std::vector<Schedule> want = {
      {.operations = 4, .late = 2, .skipped = 5, .max_lag = 10, .min_lag = 0, .total_lag = 15},
      {.operations = 2, .late = 1, .skipped = 0, .max_lag = 5, .min_lag = 1, .total_lag = 6},
      {.operations = 0, .late = 0, .skipped = 2, .max_lag = 0, .min_lag = 0, .total_lag = 0},
      {.operations = 700,
       .late = late4,
       .skipped = 0,
       .max_lag = 5,
       .min_lag = 0,
       .total_lag = lag4},
      {.operations = 1, .late = 0, .skipped = 1, .max_lag = 0, .min_lag = 0, .total_lag = 0},
  };
  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  ASSERT_EQ(service.size(), want.size());
  ASSERT_EQ(view.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE("window " + std::to_string(k + 1));
    EXPECT_EQ(service[k]->schedule, want[k]);
    EXPECT_EQ(view[k]->schedule, want[k]);
  }
  // The run's schedule sums the windows'.
  const Schedule run = {.operations = 707,
                        .late = 3 + late4,
                        .skipped = 8,
                        .max_lag = 10,
                        .min_lag = 0,
                        .total_lag = 21 + lag4};
  const auto service_total = Select(all, kServiceId, Kind::kTotal);
  const auto view_total = Select(all, kViewId, Kind::kTotal);
  ASSERT_EQ(service_total.size(), 1u);
  ASSERT_EQ(view_total.size(), 1u);
  EXPECT_EQ(service_total[0]->schedule, run);
  EXPECT_EQ(view_total[0]->schedule, run);
}

// A run's floor: the smallest lag of its window. min_lag is the minimum
// over windows that had operations, whatever their order.
TEST(ResponseViewRecorderTest, RunMinLagIsTheSmallestWindowFloor) {
  Harness h(TimeUnit::kNs, 1'000, /*view=*/true);
  h.FeedPaced({{100, 140, 150, 1}, {200, 250, 260, 1}});  // lags 40, 50
  h.CloseWindow(1);
  h.CloseWindow(2);                                       // empty: no floor
  h.FeedPaced({{300, 307, 310, 1}, {400, 420, 430, 1}});  // lags 7, 20
  h.CloseWindow(3);
  h.FeedPaced({{500, 530, 531, 1}});  // lag 30
  h.Finish(kStartNs + 3 * kIntervalNs + 1);
  const std::vector<WindowRecord> all = h.Take();
  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  ASSERT_EQ(service.size(), 4u);
  EXPECT_EQ(service[0]->schedule.min_lag, 40);
  EXPECT_EQ(service[1]->schedule, Schedule{});
  EXPECT_EQ(service[2]->schedule.min_lag, 7);
  EXPECT_EQ(service[3]->schedule.min_lag, 30);
  const auto total = Select(all, kServiceId, Kind::kTotal);
  ASSERT_EQ(total.size(), 1u);
  EXPECT_EQ(total[0]->schedule, (Schedule{.operations = 5,
                                          .late = 0,
                                          .skipped = 0,
                                          .max_lag = 50,
                                          .min_lag = 7,
                                          .total_lag = 147}));
}

// Each window gets two operations with lags floor and floor + 4; the
// threshold is 2 (2'000 ns in us). Returns the periodic windows' flags
// (service run) and checks the view's are the same.
std::vector<bool> NotSustainedFor(const std::vector<int64_t>& floors, bool* total_flag) {
  Harness h(TimeUnit::kUs, 2'000, /*view=*/true);
  int k = 0;
  for (int64_t floor : floors) {
    const int64_t slot = int64_t{1'000} * (k + 1);
    h.FeedPaced({{slot, slot + floor, slot + floor + 10, 1},
                 {slot + 100, slot + 100 + floor + 4, slot + 100 + floor + 20, 1}});
    h.CloseWindow(++k);
  }
  h.Finish(kStartNs + k * kIntervalNs);  // the last window is closed: nothing more
  const std::vector<WindowRecord> all = h.Take();
  const auto service = Select(all, kServiceId, Kind::kPeriodic);
  const auto view = Select(all, kViewId, Kind::kPeriodic);
  EXPECT_EQ(service.size(), floors.size());
  EXPECT_EQ(view.size(), floors.size());
  std::vector<bool> flags;
  for (size_t i = 0; i < service.size() && i < view.size(); ++i) {
    EXPECT_EQ(service[i]->schedule.min_lag, floors[i]) << i;
    EXPECT_EQ(view[i]->schedule.not_sustained, service[i]->schedule.not_sustained) << i;
    flags.push_back(service[i]->schedule.not_sustained);
  }
  const auto total = Select(all, kServiceId, Kind::kTotal);
  const auto view_total = Select(all, kViewId, Kind::kTotal);
  EXPECT_EQ(total.size(), 1u);
  EXPECT_EQ(view_total.size(), 1u);
  *total_flag = !total.empty() && total[0]->schedule.not_sustained;
  if (!view_total.empty()) {
    EXPECT_EQ(view_total[0]->schedule.not_sustained, *total_flag);
  }
  return flags;
}

static_assert(RunRecorder::kBehindWindows == 3, "the sequences below assume 3");

TEST(ResponseViewRecorderTest, NotSustainedAfterWindowsFallingFurtherBehind) {
  bool total = false;
  // Floors 0, 1, 2 rise but are not above the threshold (2); 3, 4, 5 are
  // above it and rising: the third of them is flagged, and 6 too; 1 caught
  // up (clears it), 4 starts counting again.
  EXPECT_EQ(NotSustainedFor({0, 1, 2, 3, 4, 5, 6, 1, 4}, &total),
            (std::vector<bool>{false, false, false, false, false, true, true, false, false}));
  EXPECT_TRUE(total) << "the run's total keeps that it was not sustained at some window";
}

TEST(ResponseViewRecorderTest, AFloorThatStopsRisingIsNotFallingBehind) {
  bool total = true;
  // Above the threshold throughout, but 4 -> 4 does not rise: the count
  // restarts, and 5, 6 make two windows only.
  EXPECT_EQ(NotSustainedFor({3, 4, 4, 5, 6}, &total),
            (std::vector<bool>{false, false, false, false, false}));
  EXPECT_FALSE(total);
}

TEST(ResponseViewRecorderTest, ClosedLoopAcceptLeavesTheScheduleZero) {
  for (bool view : {false, true}) {
    SCOPED_TRACE(view ? "with a view" : "without a view");
    Harness h(TimeUnit::kNs, 0, view, /*with_skipped=*/false);
    h.FeedClosed({{100, 120, 130, 1}, {200, 260, 270, 2}});  // intended ignored
    h.CloseWindow(1);
    h.FeedClosed({{300, 300, 310, 1}});
    h.Finish(kStartNs + kIntervalNs + 10);
    const std::vector<WindowRecord> all = h.Take();
    const auto service = Select(all, kServiceId, Kind::kPeriodic);
    ASSERT_EQ(service.size(), 2u);
    EXPECT_EQ(service[0]->snapshot.records, 3);
    EXPECT_EQ(service[1]->snapshot.records, 1);
    EXPECT_EQ(service[0]->distribution, (std::vector<LatencyBucket>{{10, 3}}));
    const auto total = Select(all, kServiceId, Kind::kTotal);
    ASSERT_EQ(total.size(), 1u);
    EXPECT_EQ(total[0]->snapshot.records, 4);
    size_t view_windows = 0;
    for (const WindowRecord& w : all) {
      EXPECT_EQ(w.schedule, Schedule{}) << "run " << w.run_id << " seq " << w.seq;
      view_windows += w.run_id == kViewId ? 1 : 0;
    }
    EXPECT_EQ(view_windows, view ? 3u : 0u);
    if (view) {  // closed-loop operations started when intended: response == service
      const auto view_periodic = Select(all, kViewId, Kind::kPeriodic);
      ASSERT_EQ(view_periodic.size(), 2u);
      EXPECT_EQ(view_periodic[0]->distribution, service[0]->distribution);
      EXPECT_EQ(view_periodic[1]->distribution, service[1]->distribution);
      const auto view_total = Select(all, kViewId, Kind::kTotal);
      ASSERT_EQ(view_total.size(), 1u);
      EXPECT_EQ(view_total[0]->snapshot.records, 4);
      EXPECT_EQ(view_total[0]->distribution, total[0]->distribution);
    }
  }
}

// A paced batch on a recorder without a view: the run's windows hold
// service time only (no schedule: a run without a response view is closed
// loop); nothing else is published.
TEST(ResponseViewRecorderTest, PacedWithoutAViewRecordsServiceTimeOnly) {
  Harness h(TimeUnit::kUs, 2'500, /*view=*/false);
  h.FeedPaced(kWindow1);
  h.Finish(kStartNs + kIntervalNs / 2);
  const std::vector<WindowRecord> all = h.Take();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].run_id, kServiceId);
  EXPECT_EQ(all[0].kind, Kind::kPeriodic);
  EXPECT_EQ(all[0].distribution, Buckets(ServiceOf(kWindow1)));
  EXPECT_EQ(all[0].schedule, WindowRecord::Schedule{});
  EXPECT_EQ(all[1].run_id, kServiceId);
  EXPECT_EQ(all[1].kind, Kind::kTotal);
  EXPECT_EQ(all[1].schedule, all[0].schedule);
}

// ---- RunManager: the view is created, fed, ended and linked with its run.

RunSetup PacedSetup(const std::string& name, int producers, double target_rate,
                    std::shared_ptr<const std::atomic<int64_t>> skipped = nullptr) {
  RunSetup s;
  s.spec.name = name;
  s.spec.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
  s.spec.reporting_interval_ms = 20;
  s.spec.target_rate = target_rate;
  s.spec.late_threshold_ns = 1'500;
  s.channels.q_per_worker = 2;
  s.producers = producers;
  s.skipped = std::move(skipped);
  return s;
}

// Producer p's i-th operation: slots 100 ns apart, lag (i % 4) * 1000 ns.
Op PacedOp(int p, int64_t i) {
  const int64_t intended = 1'000'000 + 100 * i;
  const int64_t start = intended + (i % 4) * 1'000;
  return Op{intended, start, start + 1 + (i * 7 + p) % 997, static_cast<int32_t>(1 + i % 3)};
}

std::vector<Op> SendPaced(TimeStampChannels& channels, int producers, int64_t n) {
  for (int p = 0; p < producers; ++p) channels.producer(p).set_paced();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(producers));
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&channels, p, n] {
      for (int64_t i = 0; i < n; ++i) {
        const Op op = PacedOp(p, i);
        channels.producer(p).SendPaced(op.intended, op.start, op.end, op.records, 10);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<Op> all;
  for (int p = 0; p < producers; ++p) {
    for (int64_t i = 0; i < n; ++i) all.push_back(PacedOp(p, i));
  }
  return all;
}

std::vector<LatencyBucket> FinalDistribution(const RunRegistry& registry, RunId id) {
  absl::StatusOr<RunRegistry::DistributionPage> page =
      registry.Distribution(id, std::nullopt, 1'000'000);
  EXPECT_TRUE(page.ok()) << page.status();
  if (!page.ok()) return {};
  EXPECT_FALSE(page->more);
  return page->buckets;
}

int64_t PeriodicRecords(const RunRegistry& registry, RunId id, int64_t* windows) {
  absl::StatusOr<std::vector<WindowRecord>> history = registry.History(id);
  EXPECT_TRUE(history.ok()) << history.status();
  int64_t records = 0;
  *windows = 0;
  if (!history.ok()) return 0;
  for (const WindowRecord& w : *history) {
    if (w.kind != Kind::kPeriodic) continue;
    records += w.snapshot.records;
    ++*windows;
  }
  return records;
}

RunManager::Options ManagerOptions() {
  RunManager::Options options;
  options.recorder.tick_ns = 1'000'000;
  return options;
}

TEST(ResponseViewRunManagerTest, RateControlledRunHasAResponseViewEndedWithIt) {
  constexpr int kProducers = 2;
  constexpr int64_t kN = 20'000;  // a multiple of 4: lags 0, 1000, 2000, 3000
  RunManager manager(ManagerOptions());
  manager.Start();
  auto skipped = std::make_shared<std::atomic<int64_t>>(0);
  absl::StatusOr<CreatedRun> run = manager.CreateRun(PacedSetup("paced", kProducers, 1e6, skipped));
  ASSERT_TRUE(run.ok()) << run.status();
  const RunId id = run->id;
  const RunId view = run->info.response_run;
  ASSERT_NE(view, 0u);
  EXPECT_NE(view, id);
  EXPECT_EQ(run->info.service_run, 0u);
  {
    absl::StatusOr<RunInfo> info = manager.registry().Info(view);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->spec.name, "paced:response");
    EXPECT_EQ(info->service_run, id);
    EXPECT_EQ(info->response_run, 0u);
    EXPECT_EQ(info->state, RunState::kRunning);
    EXPECT_STREQ(LatencyKindOf(*info), "response");
  }
  const std::vector<Op> sent = SendPaced(*run->channels, kProducers, kN);
  skipped->store(3, std::memory_order_relaxed);
  manager.EndRun(id);
  ASSERT_TRUE(manager.WaitEnded(id, absl::Seconds(60)));
  ASSERT_TRUE(manager.WaitEnded(view, absl::Seconds(1)));

  absl::StatusOr<RunView> service_run = manager.registry().Get(id);
  absl::StatusOr<RunView> view_run = manager.registry().Get(view);
  ASSERT_TRUE(service_run.ok());
  ASSERT_TRUE(view_run.ok());
  EXPECT_EQ(service_run->info.spec.name, "paced");
  EXPECT_EQ(service_run->info.response_run, view);
  EXPECT_EQ(service_run->info.service_run, 0u);
  EXPECT_STREQ(LatencyKindOf(service_run->info), "service");
  EXPECT_EQ(view_run->info.spec.name, "paced:response");
  EXPECT_EQ(view_run->info.service_run, id);
  EXPECT_EQ(service_run->info.state, RunState::kFinished);
  EXPECT_EQ(view_run->info.state, RunState::kFinished);
  EXPECT_EQ(service_run->info.end_reason, EndReason::kCompleted);
  EXPECT_EQ(view_run->info.end_reason, EndReason::kCompleted);
  EXPECT_EQ(view_run->info.end_unix_ms, service_run->info.end_unix_ms);
  ASSERT_TRUE(service_run->total_final);
  ASSERT_TRUE(view_run->total_final);

  const int64_t records = RecordsOf(sent);
  EXPECT_EQ(service_run->total.snapshot.records, records);
  EXPECT_EQ(view_run->total.snapshot.records, records);
  EXPECT_EQ(service_run->total.snapshot.invalid, 0);
  EXPECT_EQ(view_run->total.snapshot.invalid, 0);
  EXPECT_EQ(FinalDistribution(manager.registry(), id), Buckets(ServiceOf(sent)));
  EXPECT_EQ(FinalDistribution(manager.registry(), view), Buckets(ResponseOf(sent)));

  // Lags (i % 4) * 1000 ns against a 1500 ns threshold: half are late.
  const Schedule want = {.operations = kProducers * kN,
                         .late = kProducers * kN / 2,
                         .skipped = 3,
                         .max_lag = 3'000,
                         .min_lag = 0,
                         .total_lag = kProducers * (kN / 4) * 6'000};
  EXPECT_EQ(service_run->total.schedule, want);
  EXPECT_EQ(view_run->total.schedule, want);

  // The same windows on both: as many, holding the same records.
  int64_t service_windows = 0;
  int64_t view_windows = 0;
  EXPECT_EQ(PeriodicRecords(manager.registry(), id, &service_windows), records);
  EXPECT_EQ(PeriodicRecords(manager.registry(), view, &view_windows), records);
  EXPECT_EQ(view_windows, service_windows);
  EXPECT_GE(service_windows, 1);
  EXPECT_EQ(manager.registry().running(), 0u);
  manager.Stop();
}

TEST(ResponseViewRunManagerTest, EndingTheViewEndsItsRun) {
  RunManager manager(ManagerOptions());
  manager.Start();
  absl::StatusOr<CreatedRun> run = manager.CreateRun(PacedSetup("both", 2, 500));
  ASSERT_TRUE(run.ok()) << run.status();
  const RunId view = run->info.response_run;
  ASSERT_NE(view, 0u);
  const std::vector<Op> sent = SendPaced(*run->channels, 2, 1'000);
  manager.EndRun(view);
  ASSERT_TRUE(manager.WaitEnded(run->id, absl::Seconds(60)));
  ASSERT_TRUE(manager.WaitEnded(view, absl::Seconds(1)));
  manager.EndRun(run->id);  // idempotent: already ended
  for (RunId id : {run->id, view}) {
    absl::StatusOr<RunView> ended = manager.registry().Get(id);
    ASSERT_TRUE(ended.ok());
    EXPECT_EQ(ended->info.state, RunState::kFinished) << id;
    ASSERT_TRUE(ended->total_final) << id;
    EXPECT_EQ(ended->total.snapshot.records, RecordsOf(sent)) << id;
    EXPECT_EQ(ended->total.schedule.operations, 2'000) << id;
  }
  EXPECT_EQ(manager.registry().running(), 0u);
  manager.Stop();
}

TEST(ResponseViewRunManagerTest, ClosedLoopRunsMakeNoView) {
  RunManager manager(ManagerOptions());
  manager.Start();
  // target_rate 0: closed loop; target_rate > 0 without producers (fed
  // remotely): no paced timestamps to view.
  absl::StatusOr<CreatedRun> closed = manager.CreateRun(PacedSetup("closed", 2, 0));
  ASSERT_TRUE(closed.ok()) << closed.status();
  absl::StatusOr<CreatedRun> remote = manager.CreateRun(PacedSetup("remote", 0, 1000));
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(closed->info.response_run, 0u);
  EXPECT_EQ(remote->info.response_run, 0u);
  EXPECT_EQ(remote->id, closed->id + 1) << "no id taken for a view";
  for (int64_t i = 0; i < 100; ++i) closed->channels->producer(0).Send(i, i + 5, 1, 10);
  manager.EndRun(closed->id);
  manager.EndRun(remote->id);
  ASSERT_TRUE(manager.WaitEnded(closed->id, absl::Seconds(60)));
  ASSERT_TRUE(manager.WaitEnded(remote->id, absl::Seconds(60)));
  const std::vector<RunInfo> runs = manager.registry().List(RunFilter{});
  ASSERT_EQ(runs.size(), 2u);
  for (const RunInfo& info : runs) {
    EXPECT_EQ(info.response_run, 0u) << info.id;
    EXPECT_EQ(info.service_run, 0u) << info.id;
  }
  absl::StatusOr<RunView> ended = manager.registry().Get(closed->id);
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->total.snapshot.records, 100);
  EXPECT_EQ(ended->total.schedule, Schedule{});
  manager.Stop();
}

// Ids are reserved in blocks (Options::reserve_ids) and a rate-controlled
// run takes two (its own and its view's). With one id left in the reserved
// block, CreateRun must reserve the next block, not spin. DISABLED: it
// fails today -- RunManager::ReserveNextId returns early while next_id_ <=
// reserved_through_, so CreateRun's loop (next_id_ + 1 > reserved_through_)
// never ends. A closed-loop run created meanwhile takes the last id and
// unblocks it, so the test never hangs.
TEST(ResponseViewRunManagerTest, APacedRunReservesTheNextBlockForItsView) {
  RunManager::Options options = ManagerOptions();
  options.max_running_runs = 64;
  std::mutex mu;
  std::vector<RunId> reserved;
  options.reserve_ids = [&](RunId through) -> absl::Status {
    std::lock_guard<std::mutex> lock(mu);
    reserved.push_back(through);
    return absl::OkStatus();
  };
  RunManager manager(options);
  manager.Start();
  std::vector<RunId> ids;
  for (RunId i = 1; i < RunManager::kIdBlock; ++i) {  // ids 1..15 of the block 1..16
    absl::StatusOr<CreatedRun> r = manager.CreateRun(PacedSetup("closed", 0, 0));
    ASSERT_TRUE(r.ok()) << r.status();
    ids.push_back(r->id);
  }
  ASSERT_EQ(ids.back(), RunManager::kIdBlock - 1);
  std::atomic<bool> created{false};
  absl::StatusOr<CreatedRun> paced;
  std::thread creator([&] {
    paced = manager.CreateRun(PacedSetup("edge", 1, 1000));
    created.store(true, std::memory_order_release);
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!created.load(std::memory_order_acquire) && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(created.load(std::memory_order_acquire))
      << "CreateRun of a paced run spins with one id left in the reserved block";
  if (!created.load(std::memory_order_acquire)) {  // unblock it: take the last id
    absl::StatusOr<CreatedRun> rescue = manager.CreateRun(PacedSetup("rescue", 0, 0));
    ASSERT_TRUE(rescue.ok()) << rescue.status();
    ids.push_back(rescue->id);
  }
  creator.join();
  ASSERT_TRUE(paced.ok()) << paced.status();
  ASSERT_NE(paced->info.response_run, 0u);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_FALSE(reserved.empty());
    EXPECT_LE(paced->info.response_run, reserved.back()) << "handed out before it was reserved";
  }
  ids.push_back(paced->id);
  for (RunId id : ids) manager.EndRun(id);
  for (RunId id : ids) EXPECT_TRUE(manager.WaitEnded(id, absl::Seconds(30)));
  EXPECT_TRUE(manager.WaitEnded(paced->info.response_run, absl::Seconds(1)));
  manager.Stop();
}

}  // namespace
}  // namespace perld::runs
