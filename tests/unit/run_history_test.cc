#include "daemon/state/run_history.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/state_test_records.h"

namespace perld::state {
namespace {

using runs::RunState;
using runs::WindowRecord;
using ::testing::HasSubstr;
using testing::MakeRun;
using testing::MakeWindow;
using testing::ScratchDir;
using Kind = runs::WindowRecord::Kind;

std::unique_ptr<RunHistory> OpenHistory(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(dir, {});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::make_unique<RunHistory>(*std::move(store)) : nullptr;
}

// A daemon killed mid-run (kill -9) leaves a running run with closed windows
// in the database. The next start restores it as failed, with a total whose
// counters are the sum of its stored periodic windows, and stores that total
// so a second restart shows the same.
TEST(RunHistoryTest, RunningRunComesBackFailedWithTheSumOfItsStoredWindows) {
  ScratchDir dir;
  const runs::RunInfo running = MakeRun(7, RunState::kRunning);
  std::vector<WindowRecord> windows = {
      MakeWindow(7, Kind::kPeriodic, 1), MakeWindow(7, Kind::kPeriodic, 2),
      MakeWindow(7, Kind::kTotalSegment, 1), MakeWindow(7, Kind::kPeriodic, 3)};
  for (WindowRecord& w : windows) w.snapshot.total_latency = 1'000 * w.seq;  // sums fit int64
  windows[1].snapshot.min_latency = 1;
  windows[2].snapshot.max_latency = int64_t{1} << 62;  // a segment: not summed
  windows[2].snapshot.records = 1'000'000;
  {
    std::unique_ptr<RunHistory> history = OpenHistory(dir.path());
    ASSERT_NE(history, nullptr);
    history->OnRunStarted(running);
    for (const WindowRecord& w : windows) history->OnWindow(running, w);
    ASSERT_TRUE(history->store().Flush().ok());
  }  // no OnRunEnded: the daemon died

  LatencySnapshot want;
  for (const WindowRecord& w : windows) {
    if (w.kind != Kind::kPeriodic) continue;
    want.records += w.snapshot.records;
    want.bytes += w.snapshot.bytes;
    want.total_latency += w.snapshot.total_latency;
    want.invalid += w.snapshot.invalid;
    want.valid += w.snapshot.valid;
    want.lower_discard += w.snapshot.lower_discard;
    want.higher_discard += w.snapshot.higher_discard;
  }
  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE(restart);
    std::unique_ptr<RunHistory> history = OpenHistory(dir.path());
    ASSERT_NE(history, nullptr);
    runs::RunRegistry registry({});
    ASSERT_TRUE(history->Restore(registry).ok());
    absl::StatusOr<runs::RunView> view = registry.Get(7);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->info.state, RunState::kFailed);
    EXPECT_THAT(view->info.failure_reason, HasSubstr("rebuilt from 3 stored periodic window"));
    EXPECT_NE(view->info.end_unix_ms, 0);
    ASSERT_TRUE(view->total_final);
    const LatencySnapshot& got = view->total.snapshot;
    EXPECT_EQ(got.records, want.records);
    EXPECT_EQ(got.bytes, want.bytes);
    EXPECT_EQ(got.total_latency, want.total_latency);
    EXPECT_EQ(got.invalid, want.invalid);
    EXPECT_EQ(got.valid, want.valid);
    EXPECT_EQ(got.lower_discard, want.lower_discard);
    EXPECT_EQ(got.higher_discard, want.higher_discard);
    EXPECT_EQ(got.min_latency, 1);
    EXPECT_EQ(got.max_latency, windows[0].snapshot.max_latency);
    EXPECT_EQ(got.start_time, windows[0].snapshot.start_time);
    EXPECT_EQ(got.end_time, windows[3].snapshot.end_time);
    EXPECT_EQ(view->total.segments, 2);
    EXPECT_FALSE(view->total.exact_total);
    // No distribution: percentiles are refused with the reason, not invented.
    absl::StatusOr<runs::PercentileAnswer> p =
        registry.Percentiles(7, runs::PercentileScope::kTotal, {50});
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(p.status().message(), HasSubstr("rebuilt from its stored windows"));
  }
}

}  // namespace
}  // namespace perld::state
