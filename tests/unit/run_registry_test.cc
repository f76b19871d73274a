#include "daemon/runs/run_registry.h"

#include <gtest/gtest.h>

namespace perld::runs {
namespace {

RunInfo Info(RunId id, const std::string& name, RunState state = RunState::kRunning) {
  RunInfo info;
  info.id = id;
  info.spec.name = name;
  info.spec.latency = LatencyConfig::ForUnit(TimeUnit::kNs);
  info.spec.latency.percentiles = {50, 99};
  info.state = state;
  info.start_unix_ms = 1000 + static_cast<int64_t>(id);
  return info;
}

// A periodic window with `n` records at latency `latency`.
WindowRecord Window(RunId id, int64_t seq, int64_t latency, int64_t n) {
  WindowRecord w;
  w.run_id = id;
  w.kind = WindowRecord::Kind::kPeriodic;
  w.seq = seq;
  w.seconds = 1;
  LatencySnapshot& s = w.snapshot;
  s.records = s.valid = n;
  s.total_latency = latency * n;
  s.min_latency = s.max_latency = latency;
  s.percents = {50, 99};
  s.fractions = {0.5, 0.99};
  s.values = {latency, latency};
  s.counts = {n, n};
  s.median = latency;
  w.distribution = {{latency, n}};
  return w;
}

TEST(RunRegistryTest, ResolvesIdsAndUniqueNames) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(1, "alpha"));
  registry.AddRunning(Info(2, "beta"));
  registry.AddRunning(Info(3, "beta"));
  registry.AddRunning(Info(4, "7"));
  EXPECT_EQ(*registry.Resolve("2"), 2u);
  EXPECT_EQ(*registry.Resolve("alpha"), 1u);
  EXPECT_EQ(*registry.Resolve("7"), 4u);  // not an id here: the name
  EXPECT_EQ(registry.Resolve("beta").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(registry.Resolve("beta").status().message().find("2, 3"), std::string::npos);
  EXPECT_EQ(registry.Resolve("gamma").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Get(99).status().code(), absl::StatusCode::kNotFound);
}

TEST(RunRegistryTest, AnyPercentileOfTheLatestWindowAndTheRunningTotal) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(1, "r"));
  EXPECT_EQ(registry.Percentiles(1, PercentileScope::kLatest, {50}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  registry.AddWindow(Window(1, 1, 10, 90));
  registry.AddWindow(Window(1, 2, 20, 10));
  absl::StatusOr<PercentileAnswer> latest =
      registry.Percentiles(1, PercentileScope::kLatest, {99.9, 1});
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->snapshot.values, (std::vector<int64_t>{20, 20}));
  absl::StatusOr<PercentileAnswer> total =
      registry.Percentiles(1, PercentileScope::kTotal, {89, 90, 99.99});
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(total->snapshot.percents, (std::vector<double>{89, 90, 99.99}));
  EXPECT_EQ(total->snapshot.values, (std::vector<int64_t>{10, 20, 20}));
  EXPECT_EQ(total->snapshot.counts, (std::vector<int64_t>{90, 10, 10}));
  EXPECT_EQ(total->snapshot.valid, 100);
  EXPECT_FALSE(total->total_final);
  EXPECT_EQ(registry.Percentiles(1, PercentileScope::kTotal, {0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RunRegistryTest, RestoredWindowsAnswerOnlyTheirStoredPercentiles) {
  RunRegistry registry(config::RetentionConfig{});
  WindowRecord w = Window(5, 1, 10, 4);
  w.distribution.clear();  // as loaded from the state directory
  registry.Restore(Info(5, "old", RunState::kFinished), {w}, std::nullopt);
  absl::StatusOr<PercentileAnswer> stored = registry.Percentiles(5, PercentileScope::kLatest, {99});
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->snapshot.values, (std::vector<int64_t>{10}));
  EXPECT_EQ(registry.Percentiles(5, PercentileScope::kLatest, {75}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RunRegistryTest, RetentionKeepsTheNewestWindowsAndEndedRuns) {
  config::RetentionConfig retention;
  retention.max_windows_per_run = 3;
  retention.max_finished_runs = 2;
  RunRegistry registry(retention);
  for (RunId id = 1; id <= 4; ++id) registry.AddRunning(Info(id, "r"));
  for (int64_t seq = 1; seq <= 5; ++seq) registry.AddWindow(Window(1, seq, 10, 1));
  absl::StatusOr<std::vector<WindowRecord>> history = registry.History(1);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ(history->front().seq, 3);
  absl::StatusOr<RunRegistry::WatchBatch> batch =
      registry.WaitForEvents(1, 0, absl::InfinitePast());
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->skipped, 2);
  EXPECT_EQ(batch->next, 5);
  // Ending three runs keeps the two that ended last; running runs stay.
  std::vector<RunId> evicted;
  for (RunId id : {2, 3, 4}) {
    WindowRecord total;
    for (RunId e : registry.MarkEnded(id, total, RunState::kFinished, "", 100 + id, nullptr)) {
      evicted.push_back(e);
    }
  }
  EXPECT_EQ(evicted, (std::vector<RunId>{2}));
  EXPECT_TRUE(registry.Get(1).ok());
  EXPECT_FALSE(registry.Get(2).ok());
  EXPECT_TRUE(registry.Get(3).ok());
  EXPECT_EQ(registry.running(), 1u);
}

TEST(RunRegistryTest, EndingAppendsTheTotalAndWakesWatchers) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(1, "r"));
  registry.AddWindow(Window(1, 1, 10, 3));
  WindowRecord total = Window(1, 1, 10, 3);
  total.kind = WindowRecord::Kind::kTotal;
  RunInfo ended;
  registry.MarkEnded(1, total, RunState::kFinished, "", 2000, &ended);
  EXPECT_EQ(ended.state, RunState::kFinished);
  EXPECT_EQ(ended.end_unix_ms, 2000);
  absl::StatusOr<RunRegistry::WatchBatch> batch =
      registry.WaitForEvents(1, 1, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(batch->ended);
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->events[0].kind, WindowRecord::Kind::kTotal);
  absl::StatusOr<RunView> view = registry.Get(1);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view->total_final);
  EXPECT_EQ(view->total.snapshot.records, 3);
}

}  // namespace
}  // namespace perld::runs
