// What the state store costs on this machine: prints the figures quoted in
// state_store.h; asserts only that the data arrived, never a time.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "daemon/core/latency_config.h"
#include "daemon/state/distribution_codec.h"
#include "daemon/state/state_store.h"
#include "gtest/gtest.h"
#include "tests/unit/state_test_records.h"

namespace perld::state {
namespace {

using testing::MakeRun;
using testing::MakeTotal;
using testing::MakeWindow;
using testing::ScratchDir;
using Kind = runs::WindowRecord::Kind;
using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU time of the whole process (every thread, user + system), in ms: on a
// shared machine it says more than the wall clock.
double CpuMillis() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto ms = [](const timeval& t) {
    return 1e3 * static_cast<double>(t.tv_sec) + 1e-3 * static_cast<double>(t.tv_usec);
  };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// A periodic window with SBK's default percentile set (23 percentiles).
runs::WindowRecord DefaultWindow(runs::RunId run, int64_t seq) {
  runs::WindowRecord w = MakeWindow(run, Kind::kPeriodic, seq);
  LatencySnapshot& s = w.snapshot;
  s.percents = DefaultPercentiles();
  s.fractions.clear();
  s.values.clear();
  s.counts.clear();
  for (const double p : s.percents) {
    s.fractions.push_back(p / 100.0);
    s.values.push_back(static_cast<int64_t>(p * 1234.5));
    s.counts.push_back(17);
  }
  w.distribution.clear();
  return w;
}

void TenThousandWindows(int64_t max_windows_per_run) {
  ScratchDir tmp;
  config::RetentionConfig retention;
  retention.max_windows_per_run = max_windows_per_run;
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(tmp.path(), retention);
  ASSERT_TRUE(store.ok()) << store.status();
  (*store)->SaveRun(MakeRun(1));
  ASSERT_TRUE((*store)->Flush().ok());
  constexpr int kWindows = 10'000;
  std::vector<runs::WindowRecord> windows;
  for (int seq = 1; seq <= kWindows; ++seq) {
    windows.push_back(DefaultWindow(1, seq));
  }
  const double cpu_start = CpuMillis();
  const Clock::time_point start = Clock::now();
  for (const runs::WindowRecord& w : windows) {
    (*store)->SaveWindow(w);
  }
  const double enqueue_ms = MillisSince(start);
  ASSERT_TRUE((*store)->Flush().ok());
  const double total_ms = MillisSince(start);
  const double cpu_ms = CpuMillis() - cpu_start;
  absl::StatusOr<std::vector<StoredRun>> runs = (*store)->LoadRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)[0].windows.size(),
            static_cast<size_t>(std::min<int64_t>(kWindows, max_windows_per_run)));
  std::printf(
      "[cost] 10,000 SaveWindow + Flush (23 percentiles, retention %lld windows/run): "
      "%.1f ms wall (%.2f us per window), %.1f ms CPU (%.2f us per window); the SaveWindow "
      "calls alone %.1f ms wall (%.2f us each)\n",
      static_cast<long long>(max_windows_per_run), total_ms, 1000.0 * total_ms / kWindows, cpu_ms,
      1000.0 * cpu_ms / kWindows, enqueue_ms, 1000.0 * enqueue_ms / kWindows);
}

TEST(StateStoreCostTest, TenThousandWindowsThenFlush) {
  TenThousandWindows(10'000);  // every window kept
  TenThousandWindows(2'048);   // the default retention prunes as it goes
}

TEST(StateStoreCostTest, FinalTotalWithAMillionBuckets) {
  ScratchDir tmp;
  constexpr size_t kBuckets = 1'000'000;
  const runs::WindowRecord total = MakeTotal(1, kBuckets);

  Clock::time_point start = Clock::now();
  absl::StatusOr<std::string> blob = EncodeDistribution(total.distribution);
  const double encode_ms = MillisSince(start);
  ASSERT_TRUE(blob.ok());
  start = Clock::now();
  absl::StatusOr<std::vector<LatencyBucket>> decoded = DecodeDistribution(*blob);
  const double decode_ms = MillisSince(start);
  ASSERT_TRUE(decoded.ok());

  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(tmp.path(), {});
  ASSERT_TRUE(store.ok());
  (*store)->SaveRun(MakeRun(1));
  ASSERT_TRUE((*store)->Flush().ok());
  const double cpu_start = CpuMillis();
  start = Clock::now();
  (*store)->SaveFinalTotal(MakeRun(1, runs::RunState::kFinished, 1), total);
  const double call_ms = MillisSince(start);
  ASSERT_TRUE((*store)->Flush().ok());
  const double save_ms = MillisSince(start);
  const double save_cpu_ms = CpuMillis() - cpu_start;
  start = Clock::now();
  absl::StatusOr<std::vector<StoredRun>> runs = (*store)->LoadRuns();
  const double load_ms = MillisSince(start);
  ASSERT_TRUE(runs.ok());
  ASSERT_TRUE((*runs)[0].total.has_value());
  EXPECT_EQ((*runs)[0].total->distribution.size(), kBuckets);
  store->reset();
  start = Clock::now();
  store = StateStore::Open(tmp.path(), {});
  const double open_ms = MillisSince(start);
  ASSERT_TRUE(store.ok());
  std::printf(
      "[cost] 1,000,000-bucket distribution: blob %zu bytes (%.2f B/bucket; 16 in memory), "
      "encode %.1f ms, decode %.1f ms\n"
      "[cost] SaveFinalTotal + Flush: %.1f ms wall, %.1f ms CPU (the call itself %.1f ms: the "
      "copy); LoadRuns %.1f ms; reopen (quick_check of a %ju-byte file) %.1f ms\n",
      blob->size(), static_cast<double>(blob->size()) / kBuckets, encode_ms, decode_ms, save_ms,
      save_cpu_ms, call_ms, load_ms,
      static_cast<uintmax_t>(std::filesystem::file_size(tmp / "perld.db")), open_ms);
}

}  // namespace
}  // namespace perld::state
