// RunManager: several runs under the one recorder thread, attached and ended
// while it runs. Checked against a single-threaded oracle of what was sent.
#include "daemon/runs/run_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/unit/latency_oracle.h"

namespace perld::runs {
namespace {

#ifdef PERLD_TSAN
constexpr int kPerProducer = 20'000;  // TSan runs ~20x slower
#else
constexpr int kPerProducer = 200'000;
#endif

RunSetup MakeSetup(const std::string& name, TimeUnit unit, int producers, int64_t interval_ms) {
  RunSetup s;
  s.spec.name = name;
  s.spec.latency = LatencyConfig::ForUnit(unit);
  s.spec.reporting_interval_ms = interval_ms;
  s.channels.q_per_worker = 2;
  s.producers = producers;
  return s;
}

// Sends a deterministic stream from each producer: latency (i * 7 + p) % 997.
std::vector<testing::Observation> Send(TimeStampChannels& channels, int producers, int n) {
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&channels, p, n] {
      for (int i = 0; i < n; ++i) {
        const int64_t start = 1000 + i;
        channels.producer(p).Send(start, start + (i * 7 + p) % 997, 1 + i % 3, 10);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<testing::Observation> all;
  for (int p = 0; p < producers; ++p) {
    for (int i = 0; i < n; ++i) all.push_back({(i * 7 + p) % 997, 1 + i % 3, 10});
  }
  return all;
}

TEST(RunManagerTest, ConcurrentRunsStaySeparateAndExact) {
  RunManager::Options options;
  options.recorder.tick_ns = 1'000'000;
  RunManager manager(options);
  manager.Start();
  struct Plan {
    std::string name;
    TimeUnit unit;
    int producers;
  };
  const std::vector<Plan> plans = {
      {"a", TimeUnit::kNs, 3}, {"b", TimeUnit::kUs, 1}, {"c", TimeUnit::kMs, 2}};
  std::vector<std::thread> sources;
  std::vector<RunId> ids(plans.size());
  std::vector<std::vector<testing::Observation>> sent(plans.size());
  for (size_t r = 0; r < plans.size(); ++r) {
    sources.emplace_back([&, r] {
      absl::StatusOr<CreatedRun> run =
          manager.CreateRun(MakeSetup(plans[r].name, plans[r].unit, plans[r].producers, 20));
      ASSERT_TRUE(run.ok()) << run.status();
      ids[r] = run->id;
      sent[r] = Send(*run->channels, plans[r].producers, kPerProducer);
      manager.EndRun(run->id);
      EXPECT_TRUE(manager.WaitEnded(run->id, absl::Seconds(60)));
    });
  }
  for (auto& t : sources) t.join();
  for (size_t r = 0; r < plans.size(); ++r) {
    absl::StatusOr<RunView> view = manager.registry().Get(ids[r]);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->info.state, RunState::kFinished);
    EXPECT_EQ(view->info.spec.latency.time_unit, plans[r].unit);
    ASSERT_TRUE(view->total_final);
    testing::SortedVectorOracle oracle(0, view->info.spec.latency.max_latency);
    oracle.Add(sent[r]);
    absl::StatusOr<PercentileSet> set = PercentileSet::Create(view->info.spec.latency.percentiles);
    ASSERT_TRUE(set.ok());
    const LatencySnapshot want = oracle.Expect(*set);
    const LatencySnapshot& got = view->total.snapshot;
    EXPECT_EQ(got.records, want.records) << plans[r].name;
    EXPECT_EQ(got.bytes, want.bytes);
    EXPECT_EQ(got.valid, want.valid);
    EXPECT_EQ(got.invalid, 0);
    EXPECT_EQ(got.min_latency, want.min_latency);
    EXPECT_EQ(got.max_latency, want.max_latency);
    EXPECT_EQ(got.values, want.values);
    EXPECT_EQ(got.counts, want.counts);
    EXPECT_EQ(got.median, want.median);
    // The windows' records add up to the total.
    absl::StatusOr<std::vector<WindowRecord>> history = manager.registry().History(ids[r]);
    ASSERT_TRUE(history.ok());
    int64_t in_windows = 0;
    int64_t seq = 0;
    for (const WindowRecord& w : *history) {
      if (w.kind != WindowRecord::Kind::kPeriodic) continue;
      EXPECT_EQ(w.seq, ++seq);
      in_windows += w.snapshot.records;
    }
    EXPECT_EQ(in_windows, want.records);
  }
  EXPECT_EQ(manager.registry().running(), 0u);
  manager.Stop();
}

TEST(RunManagerTest, RunningTotalMatchesTheFinalTotal) {
  RunManager::Options options;
  options.recorder.tick_ns = 1'000'000;
  RunManager manager(options);
  manager.Start();
  absl::StatusOr<CreatedRun> run = manager.CreateRun(MakeSetup("live", TimeUnit::kNs, 2, 10));
  ASSERT_TRUE(run.ok());
  Send(*run->channels, 2, kPerProducer);
  // Wait until the periodic windows covered everything sent.
  const int64_t sent = [] {
    int64_t n = 0;
    for (int i = 0; i < kPerProducer; ++i) n += 1 + i % 3;
    return 2 * n;
  }();
  absl::StatusOr<RunView> live;
  for (int i = 0; i < 2000; ++i) {
    live = manager.registry().Get(run->id);
    ASSERT_TRUE(live.ok());
    if (live->total.snapshot.records == sent) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(live->total.snapshot.records, sent);
  EXPECT_FALSE(live->total_final);
  absl::StatusOr<PercentileAnswer> live_p =
      manager.registry().Percentiles(run->id, PercentileScope::kTotal, {50, 99.9, 99.999, 100});
  ASSERT_TRUE(live_p.ok());
  manager.EndRun(run->id);
  ASSERT_TRUE(manager.WaitEnded(run->id, absl::Seconds(60)));
  absl::StatusOr<RunView> ended = manager.registry().Get(run->id);
  ASSERT_TRUE(ended.ok());
  EXPECT_TRUE(ended->total_final);
  LatencySnapshot a = live->total.snapshot;
  LatencySnapshot b = ended->total.snapshot;
  a.start_time = b.start_time = a.end_time = b.end_time = 0;
  EXPECT_EQ(a, b);
  absl::StatusOr<PercentileAnswer> final_p =
      manager.registry().Percentiles(run->id, PercentileScope::kTotal, {50, 99.9, 99.999, 100});
  ASSERT_TRUE(final_p.ok());
  EXPECT_EQ(live_p->snapshot.values, final_p->snapshot.values);
  EXPECT_EQ(live_p->snapshot.counts, final_p->snapshot.counts);
  EXPECT_TRUE(final_p->total_final);
  manager.Stop();
}

TEST(RunManagerTest, WatchSeesEveryWindowOnceInOrderThenTheTotal) {
  RunManager::Options options;
  options.recorder.tick_ns = 1'000'000;
  RunManager manager(options);
  manager.Start();
  absl::StatusOr<CreatedRun> run = manager.CreateRun(MakeSetup("watched", TimeUnit::kUs, 1, 10));
  ASSERT_TRUE(run.ok());
  // A watcher as WatchRun follows a run: told of changes, it reads the new events.
  std::mutex mu;
  std::condition_variable cv;
  bool changed = true;  // read once after subscribing
  RunRegistry::Subscription subscription = manager.registry().Subscribe(run->id, [&] {
    std::lock_guard<std::mutex> lock(mu);
    changed = true;
    cv.notify_all();
  });
  std::vector<WindowRecord> seen;
  bool ended = false;
  std::thread watcher([&] {
    int64_t next = 0;
    while (!ended) {
      {
        std::unique_lock<std::mutex> lock(mu);
        ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return changed; }));
        changed = false;
      }
      absl::StatusOr<RunRegistry::WatchBatch> batch = manager.registry().Events(run->id, next);
      ASSERT_TRUE(batch.ok());
      EXPECT_EQ(batch->skipped, 0);
      seen.insert(seen.end(), batch->events.begin(), batch->events.end());
      next = batch->next;
      ended = batch->ended;
    }
  });
  for (int burst = 0; burst < 20; ++burst) {
    for (int i = 0; i < 1000; ++i) run->channels->producer(0).Send(i, i + 5, 1, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  manager.EndRun(run->id);
  watcher.join();
  ASSERT_TRUE(ended);
  ASSERT_GE(seen.size(), 2u);
  int64_t seq = 0;
  int64_t records = 0;
  for (size_t i = 0; i + 1 < seen.size(); ++i) {
    EXPECT_EQ(seen[i].kind, WindowRecord::Kind::kPeriodic);
    EXPECT_EQ(seen[i].seq, ++seq);
    records += seen[i].snapshot.records;
  }
  EXPECT_EQ(seen.back().kind, WindowRecord::Kind::kTotal);
  EXPECT_EQ(seen.back().snapshot.records, 20'000);
  EXPECT_EQ(records, 20'000);
  subscription.reset();
  manager.Stop();
}

// StopRun{wait} waits without a thread: the run's subscribers are told once
// WaitEnded holds (after the registry marked the run ended, the manager
// still has to let it go).
TEST(RunManagerTest, SubscribersAreToldWhenWaitEndedHolds) {
  RunManager::Options options;
  options.recorder.tick_ns = 1'000'000;
  RunManager manager(options);
  manager.Start();
  absl::StatusOr<CreatedRun> run = manager.CreateRun(MakeSetup("stopped", TimeUnit::kUs, 1, 10));
  ASSERT_TRUE(run.ok());
  std::mutex mu;
  std::condition_variable cv;
  bool ended = false;
  RunRegistry::Subscription subscription = manager.registry().Subscribe(run->id, [&] {
    const bool now = manager.WaitEnded(run->id, absl::ZeroDuration());
    std::lock_guard<std::mutex> lock(mu);
    ended = ended || now;
    cv.notify_all();
  });
  run->channels->producer(0).Send(1, 6, 1, 0);
  manager.EndRun(run->id);
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return ended; }));
  lock.unlock();
  subscription.reset();
  manager.Stop();
}

TEST(RunManagerTest, AnEndSentFromAnotherThreadRightAfterTheStartIsNeverLost) {
  // The recorder's command queue orders each sending thread's commands only:
  // an EndRun from another thread can overtake the run's attach.
  RunManager::Options options;
  options.max_running_runs = 1000;
  RunManager manager(options);
  manager.Start();
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<CreatedRun> run = manager.CreateRun(MakeSetup("short", TimeUnit::kMs, 1, 1000));
    ASSERT_TRUE(run.ok());
    std::thread ender([&] {
      for (int k = 0; k < i % 4; ++k) run->channels->producer(0).Send(k, k + 1, 1, 0);
      manager.EndRun(run->id);
    });
    ender.join();
    ASSERT_TRUE(manager.WaitEnded(run->id, absl::Seconds(20))) << "run " << run->id;
    absl::StatusOr<RunView> view = manager.registry().Get(run->id);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->total.snapshot.records, i % 4);
  }
  manager.Stop();
}

TEST(RunManagerTest, LimitsAndShutdownRefuseNewRuns) {
  RunManager::Options options;
  options.max_running_runs = 1;
  RunManager manager(options);
  manager.Start();
  absl::StatusOr<CreatedRun> first = manager.CreateRun(MakeSetup("one", TimeUnit::kMs, 1, 1000));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(manager.CreateRun(MakeSetup("two", TimeUnit::kMs, 1, 1000)).status().code(),
            absl::StatusCode::kResourceExhausted);
  RunSetup bad = MakeSetup("bad", TimeUnit::kMs, 1, 1000);
  bad.spec.latency.percentiles = {50, 50};
  EXPECT_EQ(manager.CreateRun(bad).status().code(), absl::StatusCode::kInvalidArgument);
  manager.EndRun(first->id);
  ASSERT_TRUE(manager.WaitEnded(first->id, absl::Seconds(10)));
  manager.StopAccepting();
  EXPECT_EQ(manager.CreateRun(MakeSetup("late", TimeUnit::kMs, 1, 1000)).status().code(),
            absl::StatusCode::kUnavailable);
  manager.Stop();
}

// Unnamed runs never share a default name: "<source>-<id>".
TEST(RunManagerTest, AnUnnamedRunIsNamedAfterItsSourceAndId) {
  RunManager manager(RunManager::Options{});
  manager.Start();
  std::vector<RunId> ids;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CreatedRun> run = manager.CreateRun(MakeSetup("", TimeUnit::kMs, 1, 1000));
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->info.spec.name, absl::StrCat("bench-", run->id));
    absl::StatusOr<RunInfo> listed = manager.registry().Info(run->id);
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(listed->spec.name, run->info.spec.name);
    ids.push_back(run->id);
  }
  EXPECT_NE(ids[0], ids[1]);
  absl::StatusOr<CreatedRun> named = manager.CreateRun(MakeSetup("mine", TimeUnit::kMs, 1, 1000));
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->info.spec.name, "mine");
  for (RunId id : ids) manager.EndRun(id);
  manager.EndRun(named->id);
  for (RunId id : ids) ASSERT_TRUE(manager.WaitEnded(id, absl::Seconds(10)));
  ASSERT_TRUE(manager.WaitEnded(named->id, absl::Seconds(10)));
  manager.Stop();
}

TEST(RunManagerTest, TheJudgeDecidesTheFinalState) {
  RunManager manager(RunManager::Options{});
  manager.Start();
  RunSetup setup = MakeSetup("judged", TimeUnit::kMs, 1, 1000);
  setup.judge = [](const WindowRecord& total, std::string* reason) {
    *reason = "saw " + std::to_string(total.snapshot.records);
    return RunState::kFailed;
  };
  absl::StatusOr<CreatedRun> run = manager.CreateRun(std::move(setup));
  ASSERT_TRUE(run.ok());
  run->channels->producer(0).Send(0, 1, 1, 0);
  manager.EndRun(run->id);
  ASSERT_TRUE(manager.WaitEnded(run->id, absl::Seconds(10)));
  absl::StatusOr<RunInfo> info = manager.registry().Info(run->id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, RunState::kFailed);
  EXPECT_EQ(info->failure_reason, "saw 1");
  EXPECT_GT(info->end_unix_ms, 0);
  manager.Stop();
}

// Ids are reserved durably in blocks before any is handed out; a failed
// reservation refuses the run and hands out nothing.
TEST(RunManagerTest, ReservesRunIdsInBlocksBeforeHandingThemOut) {
  std::vector<RunId> reserved;
  bool fail = false;
  RunManager::Options options;
  options.first_id = 5;
  options.max_running_runs = 64;
  options.reserve_ids = [&](RunId through) -> absl::Status {
    if (fail) return absl::UnavailableError("disk gone");
    reserved.push_back(through);
    return absl::OkStatus();
  };
  RunManager manager(options);
  manager.Start();
  std::vector<RunId> ids;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<CreatedRun> r = manager.CreateRun(MakeSetup("r", TimeUnit::kMs, 0, 1000));
    ASSERT_TRUE(r.ok()) << r.status();
    ids.push_back(r->id);
    EXPECT_LE(r->id, reserved.back()) << "handed out before it was reserved";
  }
  EXPECT_EQ(ids.front(), 5u);
  EXPECT_EQ(ids.back(), 24u);
  EXPECT_EQ(reserved,
            (std::vector<RunId>{5 + RunManager::kIdBlock - 1, 5 + 2 * RunManager::kIdBlock - 1}));
  // Ids left in the block need no reservation; past it, a failure refuses.
  fail = true;
  for (RunId id = 25; id <= reserved.back(); ++id) {
    absl::StatusOr<CreatedRun> r = manager.CreateRun(MakeSetup("r", TimeUnit::kMs, 0, 1000));
    ASSERT_TRUE(r.ok()) << r.status();
    ids.push_back(r->id);
  }
  absl::StatusOr<CreatedRun> refused = manager.CreateRun(MakeSetup("r", TimeUnit::kMs, 0, 1000));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  for (RunId id : ids) manager.EndRun(id);
  for (RunId id : ids) EXPECT_TRUE(manager.WaitEnded(id, absl::Seconds(30)));
  manager.Stop();
}

}  // namespace
}  // namespace perld::runs
