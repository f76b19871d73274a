#include "daemon/runs/run_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

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
  // --p 0 is the minimum, --p 100 the maximum (issue 26).
  absl::StatusOr<PercentileAnswer> ends =
      registry.Percentiles(1, PercentileScope::kTotal, {0, 100});
  ASSERT_TRUE(ends.ok()) << ends.status();
  EXPECT_EQ(ends->snapshot.values, (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(registry.Percentiles(1, PercentileScope::kTotal, {-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Percentiles(1, PercentileScope::kTotal, {100.5}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Issue 27: a total that is not exact answers no percentile at all -- also
// one from an older state directory that still carried percentiles computed
// from its last segments -- while a total rebuilt from stored windows (no
// distribution, no percentiles) keeps refusing with its reason.
TEST(RunRegistryTest, AnInexactTotalAnswersNoPercentile) {
  RunRegistry registry(config::RetentionConfig{});
  WindowRecord total = Window(6, 1, 5, 70'001);
  total.kind = WindowRecord::Kind::kTotal;
  total.exact_total = false;  // its percentiles say 5: the last segment's one record
  registry.Restore(Info(6, "wide", RunState::kFinished), {}, total);
  absl::StatusOr<PercentileAnswer> answer =
      registry.Percentiles(6, PercentileScope::kTotal, {50, 99});
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_FALSE(answer->exact);
  EXPECT_FALSE(answer->snapshot.percentiles_exact);
  EXPECT_TRUE(answer->snapshot.values.empty());
  EXPECT_EQ(answer->snapshot.median, 0);
  EXPECT_EQ(answer->snapshot.valid, 70'001) << "the counters stay";
  absl::StatusOr<RunView> view = registry.Get(6);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view->total.snapshot.values.empty());
  EXPECT_TRUE(view->total.distribution.empty());

  WindowRecord rebuilt = total;
  rebuilt.distribution.clear();
  ClearPercentiles(&rebuilt.snapshot);
  rebuilt.snapshot.percentiles_exact = true;  // as RunHistory rebuilds it
  registry.Restore(Info(7, "crashed", RunState::kFailed), {}, rebuilt);
  EXPECT_EQ(registry.Percentiles(7, PercentileScope::kTotal, {50}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A running total past its memory budget has no percentile of its own; where
// a user asks (merge_running), the registry hands the store its parts: the
// total segments since the warm-up and the periodic windows after the last
// of them.
TEST(RunRegistryTest, ARunningTotalPastMemoryIsMergedFromItsStoredParts) {
  std::vector<RunningTotalParts> asked;
  StoredTotals stored;
  stored.running_total = [&asked](RunId, const RunningTotalParts& parts, const PercentileSet&,
                                  LatencySnapshot* out) {
    asked.push_back(parts);
    out->values = {4242, 4243};
    out->percentiles_exact = true;
    return absl::OkStatus();
  };
  RunRegistry registry(config::RetentionConfig{}, stored);
  RunInfo info = Info(8, "long");
  info.spec.latency.total_max_hash_map_size_mb = 1;  // 65,536 distinct latencies
  registry.AddRunning(info);
  // 40,000 distinct latencies per window: two no longer fit the live total.
  const auto wide = [](int64_t seq, bool warmup) {
    WindowRecord w = Window(8, seq, 0, 40'000);
    w.warmup = warmup;
    w.distribution.clear();
    for (int64_t v = 0; v < 40'000; ++v) w.distribution.push_back({seq * 100'000 + v, 1});
    return w;
  };
  const auto segment = [](int64_t seq, int64_t through) {
    WindowRecord w = Window(8, seq, 0, 1);
    w.kind = WindowRecord::Kind::kTotalSegment;
    w.through_window = through;
    w.snapshot.closed_full = true;
    return w;
  };
  registry.AddWindow(wide(1, /*warmup=*/true));
  registry.AddWindow(segment(1, 1));  // the warm-up's: not the live total's
  for (int64_t seq = 2; seq <= 4; ++seq) registry.AddWindow(wide(seq, false));
  registry.AddWindow(segment(2, 3));
  registry.AddWindow(segment(3, 4));
  registry.AddWindow(wide(5, false));
  registry.AddWindow(wide(6, false));

  absl::StatusOr<PercentileAnswer> plain =
      registry.Percentiles(8, PercentileScope::kTotal, {50, 99});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->exact);
  EXPECT_TRUE(plain->snapshot.values.empty()) << "no percentile from part of the run";
  EXPECT_TRUE(asked.empty()) << "only where a user asked";

  absl::StatusOr<PercentileAnswer> merged =
      registry.Percentiles(8, PercentileScope::kTotal, {50, 99}, /*merge_running=*/true);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (RunningTotalParts{2, 3, 5, 6}));
  EXPECT_TRUE(merged->exact);
  EXPECT_EQ(merged->snapshot.values, (std::vector<int64_t>{4242, 4243}));
  EXPECT_EQ(merged->snapshot.valid, 5 * 40'000) << "the windows after the warm-up";

  // A failed merge leaves the answer without percentiles, never an error.
  RunRegistry failing(config::RetentionConfig{},
                      StoredTotals{nullptr, [](RunId, const RunningTotalParts&,
                                               const PercentileSet&, LatencySnapshot*) {
                                     return absl::FailedPreconditionError("window 5 not stored");
                                   }});
  failing.AddRunning(info);
  for (int64_t seq = 1; seq <= 2; ++seq) failing.AddWindow(wide(seq, false));
  absl::StatusOr<PercentileAnswer> none =
      failing.Percentiles(8, PercentileScope::kTotal, {50}, /*merge_running=*/true);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->exact);
  EXPECT_TRUE(none->snapshot.values.empty());
}

// perlctl export reads an ended run's exact total distribution in pages;
// a running run, an inexact total or one whose distribution was not kept
// is refused rather than answered from less.
TEST(RunRegistryTest, AnEndedRunsDistributionInPages) {
  RunRegistry registry(config::RetentionConfig{});
  WindowRecord total = Window(3, 1, 10, 6);
  total.kind = WindowRecord::Kind::kTotal;
  total.distribution = {{10, 1}, {20, 2}, {30, 1}, {40, 1}, {50, 1}};
  total.snapshot.valid = total.snapshot.records = 6;
  registry.Restore(Info(3, "done", RunState::kFinished), {}, total);
  std::vector<LatencyBucket> read;
  std::optional<int64_t> after;
  int pages = 0;
  for (;;) {
    absl::StatusOr<RunRegistry::DistributionPage> page = registry.Distribution(3, after, 2);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    EXPECT_EQ(page->total.snapshot.valid, 6);
    read.insert(read.end(), page->buckets.begin(), page->buckets.end());
    if (!page->more) break;
    after = page->buckets.back().latency;
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(read, total.distribution);

  registry.AddRunning(Info(4, "running"));
  EXPECT_EQ(registry.Distribution(4, std::nullopt, 10).status().code(),
            absl::StatusCode::kFailedPrecondition);
  WindowRecord inexact = total;
  inexact.exact_total = false;
  registry.Restore(Info(5, "wide", RunState::kFinished), {}, inexact);
  EXPECT_EQ(registry.Distribution(5, std::nullopt, 10).status().code(),
            absl::StatusCode::kFailedPrecondition);
  WindowRecord lost = total;
  lost.distribution.clear();
  registry.Restore(Info(6, "lost", RunState::kFinished), {}, lost);
  EXPECT_EQ(registry.Distribution(6, std::nullopt, 10).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry.Distribution(99, std::nullopt, 10).status().code(),
            absl::StatusCode::kNotFound);
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
  absl::StatusOr<RunRegistry::WatchBatch> batch = registry.Events(1, 0);
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

TEST(RunRegistryTest, EndingAppendsTheTotal) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(1, "r"));
  registry.AddWindow(Window(1, 1, 10, 3));
  WindowRecord total = Window(1, 1, 10, 3);
  total.kind = WindowRecord::Kind::kTotal;
  RunInfo ended;
  registry.MarkEnded(1, total, RunState::kFinished, "", 2000, &ended);
  EXPECT_EQ(ended.state, RunState::kFinished);
  EXPECT_EQ(ended.end_unix_ms, 2000);
  absl::StatusOr<RunRegistry::WatchBatch> batch = registry.Events(1, 1);
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(batch->ended);
  ASSERT_EQ(batch->events.size(), 1u);
  EXPECT_EQ(batch->events[0].kind, WindowRecord::Kind::kTotal);
  absl::StatusOr<RunView> view = registry.Get(1);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view->total_final);
  EXPECT_EQ(view->total.snapshot.records, 3);
}

// Subscribers of a run are called after each change of it, outside the
// registry's lock (a callback reads the registry, which would deadlock
// under it), and see the change; nothing after reset().
TEST(RunRegistryTest, SubscribersAreToldOfTheirRunsChanges) {
  config::RetentionConfig retention;
  retention.max_finished_runs = 1;
  RunRegistry registry(retention);
  registry.AddRunning(Info(1, "watched"));
  registry.AddRunning(Info(2, "other"));
  std::vector<std::string> seen;  // what each call read
  RunRegistry::Subscription subscription = registry.Subscribe(1, [&] {
    absl::StatusOr<RunRegistry::WatchBatch> batch = registry.Events(1, 0);
    seen.push_back(batch.ok() ? absl::StrCat(batch->next, batch->ended ? " ended" : "")
                              : std::string(batch.status().message()));
  });
  registry.AddWindow(Window(1, 1, 10, 3));
  registry.AddWindow(Window(2, 1, 10, 3));  // another run: not told
  EXPECT_EQ(seen, (std::vector<std::string>{"1"}));
  registry.Notify(1);
  WindowRecord total = Window(1, 1, 10, 3);
  registry.MarkEnded(1, total, RunState::kFinished, "", 2000, nullptr);
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "1", "2 ended"}));
  // Run 2 ends later: run 1 is evicted (one ended run is kept).
  registry.MarkEnded(2, total, RunState::kFinished, "", 3000, nullptr);
  EXPECT_EQ(seen.back(), "run 1 not found");
  subscription.reset();
  registry.Notify(1);
  EXPECT_EQ(seen.size(), 4u);
}

// reset() returns only once a call in progress has returned.
TEST(RunRegistryTest, ResetWaitsForACallInProgress) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(1, "r"));
  std::mutex mu;
  std::condition_variable cv;
  bool inside = false, release = false;
  std::atomic<bool> reset_returned{false};
  RunRegistry::Subscription subscription = registry.Subscribe(1, [&] {
    std::unique_lock<std::mutex> lock(mu);
    inside = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  std::thread writer([&] { registry.AddWindow(Window(1, 1, 10, 1)); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return inside; });
  }
  std::thread resetter([&] {
    subscription.reset();
    reset_returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(reset_returned.load());
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    cv.notify_all();
  }
  writer.join();
  resetter.join();
  EXPECT_TRUE(reset_returned.load());
}

// The memory estimate counts a run's labels, parameters and percentiles, so
// retention.maxBytes bounds them: heavy runs are evicted where light ones fit.
TEST(RunRegistryTest, TheMemoryEstimateCountsLabelsAndParameters) {
  RunRegistry registry(config::RetentionConfig{});
  registry.AddRunning(Info(1, "light"));
  const int64_t light = registry.ApproxBytes();
  RunInfo heavy = Info(2, "heavy");
  for (int i = 0; i < 32; ++i) {
    heavy.spec.labels[absl::StrCat(i, std::string(100, 'k'))] = std::string(1000, 'v');
  }
  heavy.spec.parameters = std::string(5000, 'p');
  registry.AddRunning(heavy);
  const int64_t heavy_bytes = registry.ApproxBytes() - light;
  EXPECT_GE(heavy_bytes - light, 32 * 1100 + 5000);
  EXPECT_EQ(RunRegistry::InfoBytes(Info(3, "x")), static_cast<int64_t>(2 * sizeof(double)));
  EXPECT_GE(RunRegistry::InfoBytes(heavy), 32 * 1100 + 5000);

  // A failure reason counts from the run's end on; the estimate stays consistent.
  WindowRecord total;
  registry.MarkEnded(2, total, RunState::kFailed, std::string(10'000, 'r'), 5000, nullptr);
  registry.MarkEnded(1, total, RunState::kFinished, "", 5000, nullptr);
  EXPECT_GE(registry.ApproxBytes() - light, heavy_bytes + 10'000);

  // 40 heavy ended runs against a 1 MiB budget: the oldest go.
  config::RetentionConfig small;
  small.max_bytes = 1 << 20;
  RunRegistry bounded(small);
  for (RunId id = 1; id <= 40; ++id) {
    RunInfo info = heavy;
    info.id = id;
    info.state = RunState::kFinished;
    info.end_unix_ms = 1000 + static_cast<int64_t>(id);
    bounded.Restore(info, {}, std::nullopt);
  }
  EXPECT_LE(bounded.ApproxBytes(), 1 << 20);
  EXPECT_LT(bounded.size(), 40u);
  EXPECT_GT(bounded.size(), 10u);
  EXPECT_TRUE(bounded.Info(40).ok());
  EXPECT_FALSE(bounded.Info(1).ok());
}

TEST(RunRegistryTest, ListsInPagesInAscendingId) {
  RunRegistry registry(config::RetentionConfig{});
  for (RunId id = 1; id <= 25; ++id) {
    RunInfo info = Info(id, absl::StrCat("r", id));
    if (id % 2 == 0) info.spec.labels["even"] = "yes";
    registry.AddRunning(info);
  }
  std::vector<RunId> seen;
  RunId after = 0;
  int pages = 0;
  for (bool more = true; more && pages < 100; ++pages) {
    RunPage page = registry.List(RunFilter{}, after, 10);
    EXPECT_LE(page.runs.size(), 10u);
    for (const RunInfo& info : page.runs) seen.push_back(info.id);
    more = page.more;
    if (!page.runs.empty()) after = page.runs.back().id;
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 25u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i + 1);
  // The filter applies before the page is cut; an exact last page says no more.
  RunFilter even;
  even.labels["even"] = "yes";
  RunPage first = registry.List(even, 0, 6);
  ASSERT_EQ(first.runs.size(), 6u);
  EXPECT_EQ(first.runs.back().id, 12u);
  EXPECT_TRUE(first.more);
  RunPage last = registry.List(even, 12, 6);
  ASSERT_EQ(last.runs.size(), 6u);
  EXPECT_EQ(last.runs.back().id, 24u);
  EXPECT_FALSE(last.more);
  EXPECT_TRUE(registry.List(RunFilter{}, 25, 10).runs.empty());
}

}  // namespace
}  // namespace perld::runs
