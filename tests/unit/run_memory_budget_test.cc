// RunMemoryBudget: a run's worst case as the recorder builder sizes it, and
// the accounting -- reserve, refuse past the budget, give back -- without
// gRPC; then the same through RunManager::CreateRun (refused, counted,
// released when the run ends).
#include "daemon/runs/run_memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <utility>

#include "daemon/runs/run_manager.h"

namespace perld::runs {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(RunMemoryBudgetTest, TheNeedFollowsTheRecorderPolicy) {
  ChannelOptions channels;
  channels.max_pending_per_worker = 1000;
  // ms, 0..180000: a dense array of 180001 counters; the total's map budget.
  LatencyConfig ms = LatencyConfig::ForUnit(TimeUnit::kMs);
  RunMemoryNeed need = RunMemoryNeedFor(ms, false, channels, 3);
  EXPECT_EQ(need.periodic_kind, RecorderKind::kArray);
  EXPECT_EQ(need.periodic, 180'001 * 8);
  EXPECT_EQ(need.total, ms.total_max_hash_map_size_mb * kMiB);
  EXPECT_EQ(need.pending, 3 * 1000 * 48);
  EXPECT_EQ(need.bytes(), need.periodic + need.total + need.pending);
  // ns: the range is too wide for the array: the periodic map's budget.
  LatencyConfig ns = LatencyConfig::ForUnit(TimeUnit::kNs);
  need = RunMemoryNeedFor(ns, false, channels, 0);
  EXPECT_EQ(need.periodic_kind, RecorderKind::kLongHashMap);
  EXPECT_EQ(need.periodic, ns.max_hash_map_size_mb * kMiB);
  EXPECT_EQ(need.pending, 0);
  // An aggregate ns run: SBM's hybrid pages and their two caps.
  need = RunMemoryNeedFor(ns, true, channels, 0);
  EXPECT_EQ(need.periodic, ns.exact_latency_max_memory_mb * kMiB);
  EXPECT_EQ(need.total, ns.exact_total_latency_max_memory_mb * kMiB);
  EXPECT_THAT(need.Describe(), HasSubstr("exactTotalLatencyMaxMemoryMB"));
}

TEST(RunMemoryBudgetTest, ReservesRefusesAndGivesBack) {
  RunMemoryBudget budget(100);
  RunMemoryNeed forty;
  forty.total = 40;
  absl::StatusOr<RunMemoryBudget::Reservation> a = budget.Reserve(forty);
  absl::StatusOr<RunMemoryBudget::Reservation> b = budget.Reserve(forty);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(budget.reserved(), 80);
  EXPECT_EQ(budget.reservations(), 2);
  // 80 + 40 > 100: refused, naming the key, what is reserved and what it needs.
  absl::StatusOr<RunMemoryBudget::Reservation> c = budget.Reserve(forty);
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("limits.maxMemoryBytes: this run needs 40 bytes"));
  EXPECT_THAT(c.status().message(), HasSubstr("80 of 100 are reserved by 2 running run(s)"));
  EXPECT_THAT(c.status().message(), HasSubstr("totalMaxHashMapSizeMB"));
  EXPECT_EQ(budget.reserved(), 80);
  // A moved reservation gives back once; a released one not again.
  RunMemoryBudget::Reservation moved = *std::move(a);
  moved.Release();
  moved.Release();
  EXPECT_EQ(budget.reserved(), 40);
  ASSERT_TRUE(budget.Reserve(forty).ok());  // destroyed at once: given back
  EXPECT_EQ(budget.reserved(), 40);
  { RunMemoryBudget::Reservation scoped = *std::move(b); }
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(budget.reservations(), 0);
  // A lowered limit refuses new runs only; no limit refuses nothing.
  absl::StatusOr<RunMemoryBudget::Reservation> kept = budget.Reserve(forty);
  budget.SetLimit(50);
  EXPECT_FALSE(budget.Reserve(forty).ok());
  budget.SetLimit(0);
  RunMemoryNeed huge;
  huge.total = int64_t{1} << 60;
  EXPECT_TRUE(budget.Reserve(huge).ok());
}

RunSetup AggregateNs(const std::string& name) {
  RunSetup s;
  s.spec.name = name;
  s.spec.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
  s.spec.latency.exact_latency_max_memory_mb = 8;
  s.spec.latency.exact_total_latency_max_memory_mb = 16;
  s.spec.reporting_interval_ms = 1000;
  s.producers = 0;
  s.inbox = std::make_shared<RemoteWindowInbox>();
  s.aggregate = true;
  return s;
}

TEST(RunMemoryBudgetTest, CreateRunRefusesPastTheBudgetAndAnEndedRunGivesBack) {
  RunManager::Options options;
  options.max_memory_bytes = 50 * kMiB;  // two runs of 24 MiB fit, a third does not
  RunManager manager(options);
  manager.Start();
  absl::StatusOr<CreatedRun> one = manager.CreateRun(AggregateNs("one"));
  absl::StatusOr<CreatedRun> two = manager.CreateRun(AggregateNs("two"));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(manager.memory_budget().reserved(), 48 * kMiB);
  absl::StatusOr<CreatedRun> three = manager.CreateRun(AggregateNs("three"));
  ASSERT_EQ(three.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(three.status().message(), HasSubstr("limits.maxMemoryBytes"));
  EXPECT_THAT(three.status().message(), HasSubstr("needs 25165824 bytes"));
  EXPECT_EQ(manager.refused(RunRefusal::kMemory), 1u);
  EXPECT_EQ(manager.registry().size(), 2u);  // nothing of it was registered
  // A smaller run still fits beside them.
  RunSetup small = AggregateNs("small");
  small.spec.latency.exact_latency_max_memory_mb = 1;
  small.spec.latency.exact_total_latency_max_memory_mb = 1;
  absl::StatusOr<CreatedRun> fits = manager.CreateRun(std::move(small));
  ASSERT_TRUE(fits.ok()) << fits.status();
  // Once a run has ended (WaitEnded, or its state in the registry), its share is free.
  manager.EndRun(one->id);
  ASSERT_TRUE(manager.WaitEnded(one->id, absl::Seconds(10)));
  EXPECT_EQ(manager.memory_budget().reserved(), 26 * kMiB);
  absl::StatusOr<CreatedRun> again = manager.CreateRun(AggregateNs("again"));
  ASSERT_TRUE(again.ok()) << again.status();
  // SIGHUP: a smaller budget refuses new runs; the running ones keep theirs.
  manager.SetLimits(16, 10 * kMiB);
  EXPECT_EQ(manager.CreateRun(AggregateNs("late")).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(manager.refused(RunRefusal::kMemory), 2u);
  for (RunId id : {two->id, fits->id, again->id}) {
    manager.EndRun(id);
    ASSERT_TRUE(manager.WaitEnded(id, absl::Seconds(10)));
  }
  EXPECT_EQ(manager.memory_budget().reserved(), 0);
  EXPECT_EQ(manager.memory_budget().reservations(), 0);
  manager.Stop();
}

TEST(RunMemoryBudgetTest, RunningRunsLimitIsReloadedAndCounted) {
  RunManager::Options options;
  options.max_running_runs = 1;
  RunManager manager(options);
  manager.Start();
  absl::StatusOr<CreatedRun> one = manager.CreateRun(AggregateNs("one"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(manager.CreateRun(AggregateNs("two")).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(manager.refused(RunRefusal::kRunningRuns), 1u);
  EXPECT_EQ(manager.memory_budget().reservations(), 1);  // the refused run's share went back
  manager.SetLimits(2, 0);
  absl::StatusOr<CreatedRun> two = manager.CreateRun(AggregateNs("two"));
  ASSERT_TRUE(two.ok()) << two.status();
  for (RunId id : {one->id, two->id}) {
    manager.EndRun(id);
    ASSERT_TRUE(manager.WaitEnded(id, absl::Seconds(10)));
  }
  manager.Stop();
}

}  // namespace
}  // namespace perld::runs
