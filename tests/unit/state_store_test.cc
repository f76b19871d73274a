#include "daemon/state/state_store.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/run_total.h"
#include "daemon/state/distribution_codec.h"
#include "daemon/state/sqlite_db.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/state_test_records.h"

namespace perld::state {
namespace {

using runs::RunInfo;
using runs::RunState;
using runs::WindowRecord;
using testing::ExpectSameRun;
using ::testing::HasSubstr;
using testing::MakeRun;
using testing::MakeTotal;
using testing::MakeWindow;
using testing::ScratchDir;
using testing::Stored;
using Kind = runs::WindowRecord::Kind;

std::unique_ptr<StateStore> OpenOrDie(const std::string& dir,
                                      const config::RetentionConfig& retention = {},
                                      StateStoreOptions options = {}) {
  absl::StatusOr<std::unique_ptr<StateStore>> store =
      StateStore::Open(dir, retention, std::move(options));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

std::vector<StoredRun> LoadOrDie(const StateStore& store) {
  absl::StatusOr<std::vector<StoredRun>> runs = store.LoadRuns();
  EXPECT_TRUE(runs.ok()) << runs.status();
  return runs.ok() ? *std::move(runs) : std::vector<StoredRun>{};
}

// Runs SQL on the database with a connection of the test's own.
std::string Sql(const std::string& db_path, const char* sql) {
  absl::StatusOr<SqliteDb> db = SqliteDb::Open(db_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) {
    return "";
  }
  absl::StatusOr<std::string> out = db->QueryText(sql);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

std::vector<int64_t> Seqs(const StoredRun& run, Kind kind) {
  std::vector<int64_t> seqs;
  for (const WindowRecord& w : run.windows) {
    if (w.kind == kind) {
      seqs.push_back(w.seq);
    }
  }
  return seqs;
}

TEST(StateStoreTest, OpenCreatesDirectoriesAndSchemaInWalMode) {
  ScratchDir tmp;
  const std::string dir = tmp / "a/b/state";
  auto store = OpenOrDie(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->path(), dir + "/perld.db");
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0750 & ~mask);
  EXPECT_EQ(Sql(store->path(), "PRAGMA journal_mode"), "wal");  // persistent in the file
  EXPECT_EQ(Sql(store->path(), "SELECT value FROM meta WHERE key = 'schema_version'"), "13");
  EXPECT_EQ(Sql(store->path(), "PRAGMA synchronous"), "2");  // FULL on the store's connection
  EXPECT_EQ(store->MaxRunId(), 0u);
  EXPECT_TRUE(LoadOrDie(*store).empty());
  EXPECT_FALSE(std::filesystem::exists(dir + "/.perld-write-probe"));
}

TEST(StateStoreTest, RoundTripsEveryFieldBitExact) {
  ScratchDir tmp;
  const RunInfo running = MakeRun(1);
  const RunInfo finished = MakeRun(2, RunState::kFinished, 1'700'000'999'000);
  const RunInfo failed = [] {
    RunInfo r = MakeRun(3, RunState::kFailed, 1'700'000'999'500);
    r.spec.checkpointed = true;
    r.spec.slo = "p99<=2ms,invalid=0";
    r.spec.abort_on_fail = true;
    r.spec.bucketed_reason = "imported from HdrHistogram log a.hlog: highest equivalent values";
    r.end_reason = runs::EndReason::kSloFailed;
    r.slo_status.state = runs::SloState::kFailed;
    r.slo_status.window = 7;
    r.slo_status.verdicts = {{"p99<=2ms", true, "PASS p99<=2ms: 1830 us (1.83 ms; the limit 2 ms)"},
                             {"invalid=0", false, "FAIL invalid=0: 3"}};
    return r;
  }();
  std::vector<WindowRecord> windows = {
      MakeWindow(1, Kind::kPeriodic, 1), MakeWindow(1, Kind::kPeriodic, 2),
      MakeWindow(1, Kind::kTotalSegment, 1), MakeWindow(1, Kind::kPeriodic, 3)};
  // A rate-controlled run's schedule (issue 30), every field.
  windows[1].schedule = {.operations = 1000,
                         .late = 12,
                         .skipped = 3,
                         .max_lag = 999'999,
                         .min_lag = 7,
                         .total_lag = 5'000'000'000,
                         .not_sustained = true};
  WindowRecord total = MakeTotal(2, 1000);
  total.schedule = {.operations = 5,
                    .late = 1,
                    .skipped = 0,
                    .max_lag = 9,
                    .min_lag = 0,
                    .total_lag = 11,
                    .not_sustained = false};
  {
    auto store = OpenOrDie(tmp.path());
    store->SaveRun(running);
    store->SaveRun(MakeRun(2));
    store->SaveRun(failed);
    for (const WindowRecord& w : windows) {
      store->SaveWindow(w);
    }
    store->SaveWindow(MakeWindow(2, Kind::kPeriodic, 1));
    store->SaveFinalTotal(finished, total);
    EXPECT_TRUE(store->Flush().ok());
    EXPECT_EQ(store->MaxRunId(), 3u);
  }
  auto store = OpenOrDie(tmp.path());  // a restart
  EXPECT_EQ(store->MaxRunId(), 3u);
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 3u);

  ExpectSameRun(runs[0].info, running);
  // Periodic windows by seq, then total segments.
  ASSERT_EQ(runs[0].windows.size(), 4u);
  EXPECT_EQ(runs[0].windows[0], Stored(windows[0]));
  EXPECT_EQ(runs[0].windows[1], Stored(windows[1]));
  EXPECT_EQ(runs[0].windows[2], Stored(windows[3]));
  EXPECT_EQ(runs[0].windows[3], Stored(windows[2]));
  EXPECT_FALSE(runs[0].total.has_value());

  ExpectSameRun(runs[1].info, finished);
  ASSERT_EQ(runs[1].windows.size(), 1u);
  ASSERT_TRUE(runs[1].total.has_value());
  EXPECT_EQ(*runs[1].total, total);  // every counter, double and bucket
  EXPECT_TRUE(runs[1].distribution_status.ok());

  ExpectSameRun(runs[2].info, failed);
  EXPECT_TRUE(runs[2].windows.empty());
  EXPECT_FALSE(runs[2].total.has_value());

  // sqlite3 users read JSON text.
  EXPECT_EQ(Sql(store->path(), "SELECT percentiles FROM windows WHERE run_id = 2"),
            "[[5,5001,6],[50,50001,51],[99.9,99901,100],[99.99,99991,100],[100,100001,101]]");
  EXPECT_EQ(Sql(store->path(), "SELECT json_extract(labels, '$.host') FROM runs WHERE id = 1"),
            "node-7");
}

// Periodic windows keep their exact distributions (what range queries
// merge) while the run's stored blobs fit
// retention.maxWindowDistributionBytesPerRun; past it a window is stored
// without one. ReadWindowRange selects by number and by wall-clock bounds.
TEST(StateStoreTest, PeriodicWindowsKeepTheirDistributionsWithinTheRunsBudget) {
  ScratchDir tmp;
  const std::vector<LatencyBucket> buckets = {{3, 1}, {4, 2}};
  absl::StatusOr<std::string> blob = EncodeDistribution(buckets);
  ASSERT_TRUE(blob.ok());
  config::RetentionConfig retention;
  retention.max_window_distribution_bytes_per_run = 2 * static_cast<int64_t>(blob->size());
  auto store = OpenOrDie(tmp.path(), retention);
  store->SaveRun(MakeRun(1));
  for (int64_t seq = 1; seq <= 3; ++seq) store->SaveWindow(MakeWindow(1, Kind::kPeriodic, seq));
  store->SaveWindow(MakeWindow(1, Kind::kTotalSegment, 1));
  absl::StatusOr<std::vector<WindowRecord>> all = store->ReadWindowRange(1, {});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);  // periodic windows only
  EXPECT_EQ((*all)[0].distribution, buckets);
  EXPECT_EQ((*all)[1].distribution, buckets);
  EXPECT_TRUE((*all)[2].distribution.empty());  // past the budget
  EXPECT_EQ((*all)[2], Stored(MakeWindow(1, Kind::kPeriodic, 3)));
  StateStore::WindowRange numbers;
  numbers.first_seq = 2;
  numbers.last_seq = 3;
  absl::StatusOr<std::vector<WindowRecord>> two = store->ReadWindowRange(1, numbers);
  ASSERT_TRUE(two.ok() && two->size() == 2u);
  EXPECT_EQ((*two)[0].seq, 2);
  StateStore::WindowRange times;  // windows 2.. start at their start, 1 ends before
  times.from_unix_ms = MakeWindow(1, Kind::kPeriodic, 2).start_unix_ms;
  times.to_unix_ms = MakeWindow(1, Kind::kPeriodic, 2).end_unix_ms;
  absl::StatusOr<std::vector<WindowRecord>> one = store->ReadWindowRange(1, times);
  ASSERT_TRUE(one.ok() && one->size() == 1u);
  EXPECT_EQ((*one)[0].seq, 2);
  // The history loaded at start leaves the distributions on disk.
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  for (const WindowRecord& w : runs[0].windows) EXPECT_TRUE(w.distribution.empty());
}

// `set`'s percentiles of raw data counted by latency (the merges' oracle).
LatencySnapshot ExpectedPercentiles(const std::map<int64_t, int64_t>& counts,
                                    const PercentileSet& set) {
  std::vector<LatencyBucket> all;
  all.reserve(counts.size());
  LatencySnapshot want;
  for (const auto& [latency, count] : counts) {
    all.push_back({latency, count});
    want.valid += count;
  }
  FillPercentiles(set, all, &want);
  return want;
}

// A spilled run total (issue 27): total segments keep their distributions
// within retention.maxTotalSegmentBytesPerRun, retention.maxWindowsPerRun
// does not prune them, and MergeTotalSegments walks the merge of the run's
// newest N segments -- the percentiles of all their data together.
TEST(StateStoreTest, MergeTotalSegmentsIsTheExactTotalOfTheNewestSegments) {
  ScratchDir tmp;
  config::RetentionConfig retention;
  retention.max_windows_per_run = 1;
  auto store = OpenOrDie(tmp.path(), retention);
  store->SaveRun(MakeRun(1));
  std::mt19937_64 rng(27);
  std::map<int64_t, int64_t> newest;  // the last 5 segments' data, counted
  int64_t valid = 0;
  for (int64_t seq = 1; seq <= 6; ++seq) {
    std::map<int64_t, int64_t> counts;
    for (int i = 0; i < 20'000; ++i) ++counts[static_cast<int64_t>(rng() % 1'000'000)];
    WindowRecord w = MakeWindow(1, Kind::kTotalSegment, seq);
    w.distribution.clear();
    for (const auto& [latency, count] : counts) w.distribution.push_back({latency, count});
    w.snapshot.valid = 20'000;
    store->SaveWindow(w);
    if (seq == 1) continue;  // before a warm-up's end, say: not in the total
    for (const auto& [latency, count] : counts) newest[latency] += count;
    valid += 20'000;
  }
  store->SaveWindow(MakeWindow(1, Kind::kPeriodic, 1));  // prunes periodic windows only
  const PercentileSet set = PercentileSet::Default();
  const LatencySnapshot want = ExpectedPercentiles(newest, set);

  LatencySnapshot got;
  got.valid = valid;
  ASSERT_TRUE(store->MergeTotalSegments(1, 5, set, &got).ok());
  EXPECT_EQ(got.values, want.values);
  EXPECT_EQ(got.counts, want.counts);
  EXPECT_EQ(got.median, want.median);
  EXPECT_TRUE(got.percentiles_exact);

  LatencySnapshot more;
  more.valid = valid;
  absl::Status missing = store->MergeTotalSegments(1, 7, set, &more);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  LatencySnapshot wrong;
  wrong.valid = valid + 1;  // counters that do not match the stored data
  EXPECT_EQ(store->MergeTotalSegments(1, 5, set, &wrong).code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(wrong.percentiles_exact);

  // A segment's blob corrupted on disk: DataLoss naming it, never an answer.
  Sql(store->path(),
      "UPDATE windows SET distribution = CAST(substr(distribution, 1, 40) || x'ff' || "
      "substr(distribution, 42) AS BLOB) WHERE kind = 'total_segment' AND seq = 4");
  LatencySnapshot corrupt;
  corrupt.valid = valid;
  absl::Status bad = store->MergeTotalSegments(1, 5, set, &corrupt);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("total segment 4"));
  EXPECT_FALSE(corrupt.percentiles_exact);
}

// A running total past memory: its total segments since the warm-up, then
// the periodic windows after the last of them, merged as one.
TEST(StateStoreTest, MergeRunningTotalMergesSegmentsThenWindows) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  store->SaveRun(MakeRun(1));
  std::map<int64_t, int64_t> counts;
  int64_t valid = 0;
  const auto distribution = [&](int64_t base, bool counted) {
    std::vector<LatencyBucket> d;
    for (int64_t v = 0; v < 1000; ++v) d.push_back({base + 7 * v, 1 + v % 3});
    if (counted) {
      for (const LatencyBucket& b : d) {
        counts[b.latency] += b.count;
        valid += b.count;
      }
    }
    return d;
  };
  for (int64_t seq = 1; seq <= 3; ++seq) {  // segment 1 is the warm-up's
    WindowRecord w = MakeWindow(1, Kind::kTotalSegment, seq);
    w.distribution = distribution(seq * 10, seq >= 2);
    w.snapshot.valid = 0;
    for (const LatencyBucket& b : w.distribution) w.snapshot.valid += b.count;
    store->SaveWindow(w);
  }
  for (int64_t seq = 1; seq <= 6; ++seq) {  // windows 5 and 6 follow segment 3
    WindowRecord w = MakeWindow(1, Kind::kPeriodic, seq);
    w.distribution = distribution(seq * 3, seq >= 5);
    w.snapshot.valid = 0;
    for (const LatencyBucket& b : w.distribution) w.snapshot.valid += b.count;
    store->SaveWindow(w);
  }
  const PercentileSet set = PercentileSet::Default();
  const LatencySnapshot want = ExpectedPercentiles(counts, set);
  LatencySnapshot got;
  got.valid = valid;
  ASSERT_TRUE(store->MergeRunningTotal(1, {2, 3, 5, 6}, set, &got).ok());
  EXPECT_EQ(got.values, want.values);
  EXPECT_EQ(got.median, want.median);
  LatencySnapshot gone;  // window 7 was never stored
  gone.valid = valid;
  absl::Status s = store->MergeRunningTotal(1, {2, 3, 5, 7}, set, &gone);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_FALSE(gone.percentiles_exact);
}

TEST(StateStoreTest, TotalSegmentsPastTheirBudgetAreStoredWithoutADistribution) {
  ScratchDir tmp;
  config::RetentionConfig retention;
  retention.max_total_segment_bytes_per_run = 20;  // one small blob
  auto store = OpenOrDie(tmp.path(), retention);
  store->SaveRun(MakeRun(1));
  for (int64_t seq = 1; seq <= 2; ++seq) {
    WindowRecord w = MakeWindow(1, Kind::kTotalSegment, seq);
    w.snapshot.valid = 3;  // {{3, 1}, {4, 2}}
    store->SaveWindow(w);
  }
  const PercentileSet set = PercentileSet::Default();
  LatencySnapshot both;  // segment 1 has its blob, segment 2 is past the budget
  both.valid = 6;
  absl::Status s = store->MergeTotalSegments(1, 2, set, &both);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("retention.maxTotalSegmentBytesPerRun"));
}

TEST(StateStoreTest, SaveRunUpdatesTheRowAndKeepsItsWindows) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  store->SaveRun(MakeRun(7));
  store->SaveWindow(MakeWindow(7, Kind::kPeriodic, 1));
  store->SaveRun(MakeRun(7, RunState::kFailed, 1'700'000'000'100));  // an UPSERT, no cascade
  ASSERT_TRUE(store->Flush().ok());
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.state, RunState::kFailed);
  EXPECT_EQ(runs[0].info.failure_reason, "client vanished");
  EXPECT_EQ(runs[0].windows.size(), 1u);
}

TEST(StateStoreTest, SavingTheSameWindowTwiceReplacesIt) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  store->SaveRun(MakeRun(1));
  WindowRecord w = MakeWindow(1, Kind::kPeriodic, 1);
  store->SaveWindow(w);
  w.snapshot.records = 424242;
  store->SaveWindow(w);
  ASSERT_TRUE(store->Flush().ok());
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].windows.size(), 1u);
  EXPECT_EQ(runs[0].windows[0].snapshot.records, 424242);
}

TEST(StateStoreTest, FlushReturnsTheFirstErrorOnceAndCountsIt) {
  ScratchDir tmp;
  std::vector<std::string> log;
  std::mutex log_mu;
  StateStoreOptions options;
  options.log = [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(log_mu);
    log.emplace_back(line);
  };
  auto store = OpenOrDie(tmp.path(), {}, std::move(options));
  EXPECT_TRUE(store->Flush().ok());
  store->SaveWindow(MakeWindow(99, Kind::kPeriodic, 1));  // run 99 was never saved
  store->SaveWindow(MakeWindow(98, Kind::kPeriodic, 1));
  store->SaveRun(MakeRun(1));  // the rest of the batch still commits
  const absl::Status s = store->Flush();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("run 99 periodic window 1"));
  EXPECT_THAT(s.message(), HasSubstr("FOREIGN KEY constraint failed"));
  EXPECT_EQ(store->write_errors(), 2u);
  EXPECT_TRUE(store->Flush().ok());  // reported once
  EXPECT_EQ(LoadOrDie(*store).size(), 1u);
  std::lock_guard<std::mutex> lock(log_mu);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_THAT(log[0], HasSubstr("write error"));
  EXPECT_THAT(log[1], HasSubstr("run 98"));
}

TEST(StateStoreTest, RejectsAWindowOfKindTotal) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  store->SaveRun(MakeRun(1));
  store->SaveWindow(MakeWindow(1, Kind::kTotal, 1));
  const absl::Status s = store->Flush();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("SaveFinalTotal"));
}

TEST(StateStoreTest, SaveFinalTotalIsAllOrNothing) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  store->SaveRun(MakeRun(1));
  WindowRecord bad = MakeTotal(1, 3);
  bad.distribution[2].latency = bad.distribution[1].latency;  // not ascending
  store->SaveFinalTotal(MakeRun(1, RunState::kFinished, 1'700'000'000'500), bad);
  const absl::Status s = store->Flush();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("final total of run 1"));

  // A total that breaks a constraint after the run row was written: the
  // savepoint takes the run row back too.
  WindowRecord broken = MakeTotal(1, 3);
  broken.snapshot.percents.push_back(1);  // vectors of different lengths
  store->SaveFinalTotal(MakeRun(1, RunState::kFinished, 1'700'000'000'500), broken);
  EXPECT_EQ(store->Flush().code(), absl::StatusCode::kInvalidArgument);

  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.state, RunState::kRunning);  // the run row did not change either
  EXPECT_FALSE(runs[0].total.has_value());
  EXPECT_EQ(store->write_errors(), 2u);
}

TEST(StateStoreTest, PeriodicWindowsBeyondTheQueueBoundAreDroppedAndCounted) {
  ScratchDir tmp;
  std::atomic<int> drop_lines{0};
  StateStoreOptions options;
  options.max_queued_bytes = 1;  // every window is over the bound
  options.log = [&](std::string_view line) {
    if (line.find("dropped") != std::string_view::npos) {
      ++drop_lines;
    }
  };
  auto store = OpenOrDie(tmp.path(), {}, std::move(options));
  store->SaveRun(MakeRun(1));  // never dropped
  for (int i = 1; i <= 3; ++i) {
    store->SaveWindow(MakeWindow(1, Kind::kPeriodic, i));
  }
  // A total segment waits for room instead (a spilled total needs it):
  // with an empty queue, one larger than the bound goes in.
  WindowRecord segment = MakeWindow(1, Kind::kTotalSegment, 1);
  segment.distribution.clear();
  for (int64_t v = 0; v < 10'000; ++v) segment.distribution.push_back({3 * v, 1});
  segment.snapshot.valid = 10'000;
  store->SaveWindow(segment);
  store->SaveFinalTotal(MakeRun(1, RunState::kFinished, 5), MakeTotal(1, 10));  // never dropped
  const absl::Status s = store->Flush();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("3 window(s) dropped"));
  EXPECT_EQ(store->dropped_windows(), 3u);
  EXPECT_EQ(store->write_errors(), 0u);
  EXPECT_TRUE(store->Flush().ok());
  LatencySnapshot merged;
  merged.valid = 10'000;
  EXPECT_TRUE(store->MergeTotalSegments(1, 1, PercentileSet::Default(), &merged).ok());
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].windows.size(), 1u);  // the segment only
  EXPECT_EQ(runs[0].windows[0].kind, Kind::kTotalSegment);
  EXPECT_TRUE(runs[0].total.has_value());
  store.reset();  // the writer logs drops before it stops
  EXPECT_GE(drop_lines.load(), 1);
}

TEST(StateStoreTest, DestructorCommitsWhatIsQueued) {
  ScratchDir tmp;
  {
    auto store = OpenOrDie(tmp.path());
    store->SaveRun(MakeRun(1));
    for (int i = 1; i <= 100; ++i) {
      store->SaveWindow(MakeWindow(1, Kind::kPeriodic, i));
    }
  }
  auto store = OpenOrDie(tmp.path());
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].windows.size(), 100u);
}

TEST(StateStoreTest, RetentionKeepsTheRunsThatEndedLastAndEveryRunningRun) {
  ScratchDir tmp;
  config::RetentionConfig retention;
  retention.max_finished_runs = 2;
  auto store = OpenOrDie(tmp.path(), retention);
  store->SaveRun(MakeRun(1));  // running: never pruned
  // Ids and end times in different orders: run 5 ended first.
  const std::pair<runs::RunId, int64_t> ended[] = {{2, 300}, {3, 100}, {4, 400}, {5, 50}};
  for (const auto& [id, end] : ended) {
    store->SaveRun(MakeRun(id));
    store->SaveWindow(MakeWindow(id, Kind::kPeriodic, 1));
    store->SaveFinalTotal(MakeRun(id, RunState::kFinished, end), MakeTotal(id, 5));
  }
  ASSERT_TRUE(store->Flush().ok());
  std::vector<runs::RunId> ids;
  for (const StoredRun& r : LoadOrDie(*store)) {
    ids.push_back(r.info.id);
  }
  EXPECT_EQ(ids, (std::vector<runs::RunId>{1, 2, 4}));
  // Deleted runs took their windows and totals with them.
  EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM windows"), "2");
  EXPECT_EQ(Sql(store->path(), "SELECT group_concat(run_id) FROM totals"), "2,4");
  // Run 5 is gone, but its id is never handed out again.
  store.reset();
  store = OpenOrDie(tmp.path(), retention);
  EXPECT_EQ(store->MaxRunId(), 5u);
}

// Total segments are kept whole: a spilled total merges them all (their
// bytes have their own budget, retention.maxTotalSegmentBytesPerRun).
TEST(StateStoreTest, RetentionKeepsTheNewestPeriodicWindowsAndEveryTotalSegment) {
  ScratchDir tmp;
  config::RetentionConfig retention;
  retention.max_windows_per_run = 3;
  auto store = OpenOrDie(tmp.path(), retention);
  store->SaveRun(MakeRun(1));
  for (int i = 1; i <= 10; ++i) {
    store->SaveWindow(MakeWindow(1, Kind::kPeriodic, i));
    if (i <= 5) {
      store->SaveWindow(MakeWindow(1, Kind::kTotalSegment, i));
    }
    if (i % 4 == 0) {
      ASSERT_TRUE(store->Flush().ok());  // several batches
    }
  }
  ASSERT_TRUE(store->Flush().ok());
  std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(Seqs(runs[0], Kind::kPeriodic), (std::vector<int64_t>{8, 9, 10}));
  EXPECT_EQ(Seqs(runs[0], Kind::kTotalSegment), (std::vector<int64_t>{1, 2, 3, 4, 5}));

  // SetRetention applies to everything already stored, in queue order.
  retention.max_windows_per_run = 1;
  store->SetRetention(retention);
  ASSERT_TRUE(store->Flush().ok());
  runs = LoadOrDie(*store);
  EXPECT_EQ(Seqs(runs[0], Kind::kPeriodic), (std::vector<int64_t>{10}));
  EXPECT_EQ(Seqs(runs[0], Kind::kTotalSegment), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

TEST(StateStoreTest, OpenAppliesASmallerRetention) {
  ScratchDir tmp;
  {
    auto store = OpenOrDie(tmp.path());
    for (runs::RunId id = 1; id <= 4; ++id) {
      store->SaveRun(MakeRun(id, RunState::kFinished, static_cast<int64_t>(id)));
      for (int i = 1; i <= 5; ++i) {
        store->SaveWindow(MakeWindow(id, Kind::kPeriodic, i));
      }
    }
  }
  config::RetentionConfig retention;
  retention.max_finished_runs = 2;
  retention.max_windows_per_run = 2;
  auto store = OpenOrDie(tmp.path(), retention);
  ASSERT_TRUE(store->Flush().ok());
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].info.id, 3u);
  EXPECT_EQ(Seqs(runs[0], Kind::kPeriodic), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(Seqs(runs[1], Kind::kPeriodic), (std::vector<int64_t>{4, 5}));
}

TEST(StateStoreTest, DeleteRunsCascades) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  for (runs::RunId id = 1; id <= 3; ++id) {
    store->SaveRun(MakeRun(id));
    store->SaveWindow(MakeWindow(id, Kind::kPeriodic, 1));
  }
  store->SaveFinalTotal(MakeRun(2, RunState::kFinished, 9), MakeTotal(2, 4));
  store->DeleteRuns({2, 3, 42});
  ASSERT_TRUE(store->Flush().ok());
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.id, 1u);
  EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM windows"), "1");
  EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM totals"), "0");
  EXPECT_EQ(store->MaxRunId(), 3u);
}

TEST(StateStoreTest, ACorruptDistributionMarksItsRunOnly) {
  ScratchDir tmp;
  const WindowRecord total = MakeTotal(2, 100);
  {
    auto store = OpenOrDie(tmp.path());
    store->SaveRun(MakeRun(1));
    store->SaveFinalTotal(MakeRun(2, RunState::kFinished, 9), total);
  }
  {  // Flip one bit in the middle of the blob.
    absl::StatusOr<SqliteDb> db = SqliteDb::Open(tmp / "perld.db", SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.ok());
    absl::StatusOr<SqliteStatement> read = db->Prepare("SELECT distribution FROM totals");
    ASSERT_TRUE(read.ok() && *read->Step());
    std::string blob(read->ColumnBlob(0));
    blob[blob.size() / 2] ^= 0x10;
    absl::StatusOr<SqliteStatement> write = db->Prepare("UPDATE totals SET distribution = ?1");
    ASSERT_TRUE(write.ok());
    write->BindBlob(1, blob);
    ASSERT_TRUE(write->Run().ok());
  }
  auto store = OpenOrDie(tmp.path());
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[0].distribution_status.ok());
  EXPECT_EQ(runs[1].distribution_status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(runs[1].distribution_status.message(), HasSubstr("run 2: total distribution"));
  EXPECT_THAT(runs[1].distribution_status.message(), HasSubstr("checksum mismatch"));
  ASSERT_TRUE(runs[1].total.has_value());
  EXPECT_TRUE(runs[1].total->distribution.empty());
  EXPECT_EQ(runs[1].total->snapshot, total.snapshot);  // counters and percentiles intact
}

TEST(StateStoreTest, AnUnreadableRowFailsLoadRunsNamingRunAndColumn) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  store->SaveRun(MakeRun(4));
  ASSERT_TRUE(store->Flush().ok());
  Sql(store->path(), "UPDATE runs SET state = 'paused'");
  absl::StatusOr<std::vector<StoredRun>> runs = store->LoadRuns();
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(runs.status().message(), HasSubstr("run 4: column state"));
  EXPECT_THAT(runs.status().message(), HasSubstr(store->path()));
  Sql(store->path(), "UPDATE runs SET state = 'running', labels = '{\"a\":1}'");
  runs = store->LoadRuns();
  EXPECT_THAT(runs.status().message(), HasSubstr("run 4: column labels"));
}

TEST(StateStoreTest, LoadRunsSkipsRowsOfDeletedRuns) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  store->SaveRun(MakeRun(1));
  store->SaveRun(MakeRun(2));
  store->SaveWindow(MakeWindow(1, Kind::kPeriodic, 1));
  store->SaveWindow(MakeWindow(2, Kind::kPeriodic, 1));
  ASSERT_TRUE(store->Flush().ok());
  Sql(store->path(), "DELETE FROM runs WHERE id = 1");  // foreign keys are off here, as in sqlite3
  const std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.id, 2u);
  EXPECT_EQ(runs[0].windows.size(), 1u);
}

// --- errors at Open ----------------------------------------------------------

TEST(StateStoreTest, RefusesANewerSchema) {
  ScratchDir tmp;
  OpenOrDie(tmp.path()).reset();
  Sql(tmp / "perld.db", "UPDATE meta SET value = 14 WHERE key = 'schema_version'");
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(tmp.path(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("'" + (tmp / "perld.db") + "'"));
  EXPECT_THAT(store.status().message(),
              HasSubstr("schema version 14 is newer than this perld supports (13)"));
}

// Turns a current database back into one of `version`: drops the tables
// later versions added and sets meta.schema_version.
void DowngradeTo(const std::string& db, int version) {
  const std::pair<int, std::vector<const char*>> added[] = {
      {9, {"slo", "abort_on_fail", "slo_state", "slo_window", "slo_verdicts"}},
      {11, {"bucketed_reason"}},
      {12,
       {"response_run", "service_run", "target_rate", "late_threshold_ns", "rate_not_sustained"}}};
  for (const auto& [since, columns] : added) {
    if (version >= since) continue;
    for (const char* column : columns) {
      Sql(db, absl::StrCat("ALTER TABLE runs DROP COLUMN ", column).c_str());
    }
  }
  for (const char* table : {"windows", "totals", "checkpoints"}) {
    for (const char* column :
         {"operations", "late", "skipped", "max_lag", "min_lag", "total_lag", "not_sustained"}) {
      Sql(db, absl::StrCat("ALTER TABLE ", table, " DROP COLUMN schedule_", column).c_str());
    }
  }
  if (version < 8) Sql(db, "ALTER TABLE windows DROP COLUMN distribution");
  if (version < 7) {
    for (const char* table : {"windows", "totals", "checkpoints"}) {
      Sql(db, absl::StrCat("ALTER TABLE ", table, " DROP COLUMN rate_seconds").c_str());
    }
  }
  if (version < 6) Sql(db, "ALTER TABLE runs DROP COLUMN end_reason");
  if (version < 5) Sql(db, "ALTER TABLE runs DROP COLUMN checkpointed");
  if (version < 4) {
    Sql(db, "DROP TABLE run_clients");
    Sql(db, "DELETE FROM meta WHERE key = 'reserved_run_id'");
  }
  if (version < 3) {
    Sql(db, "DROP TABLE upstream_messages");
    Sql(db, "DROP TABLE upstream_streams");
  }
  if (version < 2) {
    Sql(db, "DROP TABLE checkpoint_clients");
    Sql(db, "DROP TABLE checkpoints");
  }
  Sql(db,
      absl::StrCat("UPDATE meta SET value = ", version, " WHERE key = 'schema_version'").c_str());
}

TEST(StateStoreTest, UpgradesVersion1To12Databases) {
  for (int version : {1, 2, 3, 4, 5, 6, 7, 8, 12}) {
    SCOPED_TRACE(version);
    ScratchDir tmp;
    {
      auto store = OpenOrDie(tmp.path());
      store->SaveRun(MakeRun(3));
      store->SaveWindow(MakeWindow(3, Kind::kPeriodic, 1));
    }
    DowngradeTo(tmp / "perld.db", version);
    auto store = OpenOrDie(tmp.path());
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(Sql(store->path(), "SELECT value FROM meta WHERE key = 'schema_version'"), "13");
    EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM run_clients"), "0");
    EXPECT_EQ(Sql(store->path(),
                  "SELECT count(*) FROM runs WHERE response_run = 0 AND "
                  "service_run = 0 AND target_rate = 0"),
              "1");
    EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM runs WHERE slo = '' AND slo_state = ''"),
              "1");
    EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM runs WHERE end_reason = ''"), "1");
    if (version < 5) {
      EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM runs WHERE checkpointed = 0"), "1");
    }
    if (version < 4) {  // added by version 4
      EXPECT_EQ(Sql(store->path(), "SELECT value FROM meta WHERE key = 'reserved_run_id'"), "0");
    }
    EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM checkpoints"), "0");
    EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM upstream_streams"), "0");
    EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM upstream_messages"), "0");
    const std::vector<StoredRun> runs = LoadOrDie(*store);
    ASSERT_EQ(runs.size(), 1u);  // the runs stay
    ASSERT_EQ(runs[0].windows.size(), 1u);
    if (version < 7) {  // a window written before version 7 rates over its own seconds
      EXPECT_EQ(runs[0].windows[0].rate_seconds, 0);
      EXPECT_EQ(runs[0].windows[0].RateSeconds(), runs[0].windows[0].seconds);
    }
    // A window stored before version 8 has no distribution: a range over it
    // is refused by RangePercentiles (range_percentiles_test).
    absl::StatusOr<std::vector<WindowRecord>> range = store->ReadWindowRange(3, {});
    ASSERT_TRUE(range.ok()) << range.status();
    ASSERT_EQ(range->size(), 1u);
    EXPECT_EQ((*range)[0].distribution.empty(), version < 8);
  }
}

// A forwarded run's messages to its parent: stored in the transaction of
// the checkpoint that carries them (and durable with it), read back from a
// sequence on, released once the parent made them durable, kept after the
// run's final total, and gone with the stream.
TEST(StateStoreTest, UpstreamMessagesGoWithTheirCheckpointAndStayUntilReleased) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_NE(store, nullptr);
  store->SaveRun(MakeRun(7));
  store->SaveRun(MakeRun(8));
  const std::vector<UpstreamMessage> first = {{1, "one"}, {2, std::string("t\0o", 3)}};
  Checkpoint c;
  c.total = MakeTotal(7, 50);
  c.periodic_seq = 2;
  c.upstream = first;
  c.upstream_next_sequence = 3;
  int durable = 0;
  store->SaveCheckpoint(c, [&] { ++durable; });
  // A second checkpoint right behind: if it replaces the first in the queue
  // it carries the first's messages; either way all three are stored.
  c.periodic_seq = 3;
  c.upstream = {{3, "three"}};
  c.upstream_next_sequence = 4;
  store->SaveCheckpoint(c, [&] { ++durable; });
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_GE(durable, 1);

  absl::StatusOr<std::vector<UpstreamBacklog>> streams = store->LoadUpstream();
  ASSERT_TRUE(streams.ok()) << streams.status();
  ASSERT_EQ(streams->size(), 1u);
  EXPECT_EQ((*streams)[0].run, 7u);
  EXPECT_EQ((*streams)[0].first_sequence, 1u);
  EXPECT_EQ((*streams)[0].next_sequence, 4u);
  absl::StatusOr<std::vector<UpstreamMessage>> all = store->LoadUpstreamMessages(7, 1, 10);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, (std::vector<UpstreamMessage>{first[0], first[1], {3, "three"}}));
  absl::StatusOr<std::vector<UpstreamMessage>> one = store->LoadUpstreamMessages(7, 2, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (std::vector<UpstreamMessage>{first[1]}));
  EXPECT_TRUE(store->LoadUpstreamMessages(8, 1, 10)->empty());

  // The run ends: its final total ends the checkpoint, not the stream, and
  // carries the last window's messages.
  bool last_durable = false;
  store->SaveFinalTotal(MakeRun(7, RunState::kFinished, 1'700'000'999'000), MakeTotal(7, 10),
                        UpstreamTail{{{4, "four"}}, 5, [&] { last_durable = true; }});
  store->ReleaseUpstream(7, 2);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(last_durable);
  EXPECT_FALSE(LoadOrDie(*store)[0].checkpoint.has_value());
  streams = store->LoadUpstream();
  ASSERT_EQ(streams->size(), 1u);
  EXPECT_EQ((*streams)[0].first_sequence, 3u);
  EXPECT_EQ((*streams)[0].next_sequence, 5u);
  EXPECT_EQ(*store->LoadUpstreamMessages(7, 0, 10),
            (std::vector<UpstreamMessage>{{3, "three"}, {4, "four"}}));

  // Everything released: the stream stays (its next sequence) until it ends.
  store->ReleaseUpstream(7, 4);
  ASSERT_TRUE(store->Flush().ok());
  streams = store->LoadUpstream();
  ASSERT_EQ(streams->size(), 1u);
  EXPECT_EQ((*streams)[0].first_sequence, 5u);
  EXPECT_EQ((*streams)[0].next_sequence, 5u);
  bool five_durable = false;
  // (A final total saved again replaces the first, carrying one more.)
  store->SaveFinalTotal(MakeRun(7, RunState::kFinished, 1'700'000'999'000), MakeTotal(7, 10),
                        UpstreamTail{{{5, "five"}}, 6, [&] { five_durable = true; }});
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(five_durable);
  EXPECT_EQ(store->LoadUpstream()->at(0).first_sequence, 5u);
  store->EndUpstream(7);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(store->LoadUpstream()->empty());
  EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM upstream_messages"), "0");

  // Deleting a run deletes its stream.
  Checkpoint of8;
  of8.total = MakeTotal(8, 5);
  of8.upstream = {{1, "x"}};
  of8.upstream_next_sequence = 2;
  store->SaveCheckpoint(of8, nullptr);
  ASSERT_TRUE(store->Flush().ok());
  ASSERT_EQ(store->LoadUpstream()->size(), 1u);
  store->DeleteRuns({8});
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(store->LoadUpstream()->empty());
  EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM upstream_messages"), "0");
}

// A checkpoint round-trips with its clients and distribution, calls its
// durable callback after the commit, is replaced by the next one, and is
// deleted with the run's final total.
TEST(StateStoreTest, CheckpointsRoundTripAndEndWithTheFinalTotal) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_NE(store, nullptr);
  store->SaveRun(MakeRun(7));
  Checkpoint c;
  c.total = MakeTotal(7, 50);
  c.total.schedule = {.operations = 50,
                      .late = 2,
                      .skipped = 4,
                      .max_lag = 3'000,
                      .min_lag = 1,
                      .total_lag = 9'000,
                      .not_sustained = true};
  c.periodic_seq = 4;
  c.segment_seq = 1;
  c.clients = {CheckpointClient{0, "a", "host a", true, 12, false},
               CheckpointClient{1, "b", "host b", false, 3, true}};
  int durable = 0;
  store->SaveCheckpoint(c, [&] { ++durable; });
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(durable, 1);
  std::vector<StoredRun> runs = LoadOrDie(*store);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_TRUE(runs[0].checkpoint.has_value());
  EXPECT_EQ(runs[0].checkpoint->periodic_seq, 4);
  EXPECT_EQ(runs[0].checkpoint->segment_seq, 1);
  EXPECT_EQ(runs[0].checkpoint->clients, c.clients);
  EXPECT_EQ(runs[0].checkpoint->total.distribution, c.total.distribution);
  EXPECT_EQ(runs[0].checkpoint->total.snapshot.records, c.total.snapshot.records);
  EXPECT_EQ(runs[0].checkpoint->total.schedule, c.total.schedule) << "a resumed run counts on";

  c.clients[0].closed = true;
  store->SaveCheckpointClients(7, {c.clients[0]}, [&] { ++durable; });
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(durable, 2);
  EXPECT_EQ(LoadOrDie(*store)[0].checkpoint->clients, c.clients);

  store->SaveFinalTotal(MakeRun(7, RunState::kFinished, 1'700'000'999'000), MakeTotal(7, 10));
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_FALSE(LoadOrDie(*store)[0].checkpoint.has_value());
  EXPECT_EQ(Sql(store->path(), "SELECT count(*) FROM checkpoint_clients"), "0");
}

TEST(StateStoreTest, RefusesAFileThatIsNotADatabase) {
  ScratchDir tmp;
  std::ofstream(tmp / "perld.db") << std::string(8192, 'x');
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(tmp.path(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr("state database '" + (tmp / "perld.db")));
  EXPECT_THAT(store.status().message(), HasSubstr("file is not a database"));
}

TEST(StateStoreTest, RefusesACorruptDatabase) {
  ScratchDir tmp;
  {
    auto store = OpenOrDie(tmp.path());
    store->SaveRun(MakeRun(1));
    for (int i = 1; i <= 200; ++i) {  // many pages
      store->SaveWindow(MakeWindow(1, Kind::kPeriodic, i));
    }
  }
  ASSERT_FALSE(std::filesystem::exists(tmp / "perld.db-wal"));  // checkpointed at close
  const auto size = std::filesystem::file_size(tmp / "perld.db");
  ASSERT_GT(size, 16u * 4096);
  {
    // Garbage over pages 3..6: b-tree pages of the tables.
    std::fstream f(tmp / "perld.db", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff{2} * 4096);
    const std::string garbage(size_t{4} * 4096, '\xA5');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(tmp.path(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("state database '" + (tmp / "perld.db")));
}

TEST(StateStoreTest, RefusesAnotherApplicationsDatabase) {
  ScratchDir tmp;
  Sql(tmp / "perld.db", "CREATE TABLE photos (id INTEGER)");
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(tmp.path(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("not a perld state database (tables: photos)"));
}

TEST(StateStoreTest, RefusesADirectoryUnderARegularFile) {
  ScratchDir tmp;
  std::ofstream(tmp / "file") << "x";
  const std::string dir = tmp / "file/sub";
  absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(dir, {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.status().message(), "state directory '" + dir + "': cannot create: '" +
                                          (tmp / "file") + "' is not a directory");
}

// Runs Open(dir) without root's privileges: as root (tests run as root, and
// root ignores permission bits) in a child process that first drops to
// uid/gid 65534 (nobody); otherwise in this process. Returns the status
// message ("OK" on success), or nullopt when privileges cannot be dropped.
std::optional<std::string> OpenUnprivileged(const std::string& dir) {
  if (::geteuid() != 0) {
    absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(dir, {});
    return store.status().ToString();
  }
  int fds[2];
  if (::pipe(fds) != 0) {
    return std::nullopt;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      ::_exit(77);
    }
    absl::StatusOr<std::unique_ptr<StateStore>> store = StateStore::Open(dir, {});
    const std::string message = store.status().ToString();
    const ssize_t written = ::write(fds[1], message.data(), message.size());
    ::_exit(written == static_cast<ssize_t>(message.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) {
    message.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 77) {
    return std::nullopt;
  }
  return message;
}

TEST(StateStoreTest, RefusesAnUnwritableDirectory) {
  ScratchDir tmp;
  const std::string dir = tmp / "readonly";
  ASSERT_EQ(::mkdir(dir.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);         // no umask
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);  // others may reach it
  const std::optional<std::string> message = OpenUnprivileged(dir);
  if (!message) {
    GTEST_SKIP() << "cannot drop root privileges here";
  }
  EXPECT_EQ(*message,
            "PERMISSION_DENIED: state directory '" + dir + "': not writable: Permission denied");
}

// One daemon per state directory: a second store on the same directory is
// refused while the first is open (naming its pid), and allowed once it
// closes. flock(2) conflicts between open files, not only between
// processes, so one process shows it; the daemon integration tests start two.
TEST(StateStoreTest, OneOpenStorePerDirectory) {
  ScratchDir tmp;
  {
    auto first = OpenOrDie(tmp.path());
    ASSERT_NE(first, nullptr);
    absl::StatusOr<std::unique_ptr<StateStore>> second = StateStore::Open(tmp.path(), {});
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(second.status().message(),
                HasSubstr("is in use by another perld (pid " + std::to_string(::getpid())));
  }
  EXPECT_NE(OpenOrDie(tmp.path()), nullptr);  // released on close
}

// Run ids handed out before their run row commits are reserved durably: a
// crash (no clean stop) leaves the next start above every reserved id; a
// clean stop gives the unused ones back.
TEST(StateStoreTest, ReservedRunIdsAreNeverReusedAfterACrash) {
  ScratchDir tmp;
  {
    auto store = OpenOrDie(tmp.path());
    ASSERT_NE(store, nullptr);
    store->SaveRun(MakeRun(1));
    ASSERT_TRUE(store->ReserveRunIds(16).ok());
    EXPECT_EQ(store->MaxRunId(), 16u);
    // A crash: what is committed stays, the clean-stop release never runs.
    ASSERT_TRUE(store->Flush().ok());
    ASSERT_EQ(Sql(store->path(), "SELECT value FROM meta WHERE key = 'reserved_run_id'"), "16");
    const std::string copy = tmp / "crashed";
    std::filesystem::create_directory(copy);
    for (const char* f : {"perld.db", "perld.db-wal"}) {
      if (std::filesystem::exists(tmp / f)) std::filesystem::copy_file(tmp / f, copy + "/" + f);
    }
    auto crashed = OpenOrDie(copy);
    ASSERT_NE(crashed, nullptr);
    EXPECT_EQ(crashed->MaxRunId(), 16u);  // run 2..16 may have been told to a client
  }
  // The clean stop above gave 2..16 back.
  auto reopened = OpenOrDie(tmp.path());
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->MaxRunId(), 1u);
}

// An ended remote run's clients: stored, read back by run, replaced whole.
TEST(StateStoreTest, RunClientsRoundTrip) {
  ScratchDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_NE(store, nullptr);
  store->SaveRun(MakeRun(4));
  const std::vector<CheckpointClient> clients = {{0, "a", "host a", true, 17, true},
                                                 {1, "b", "host b", false, 3, false}};
  bool durable = false;
  store->SaveRunClients(4, clients, [&durable] { durable = true; });
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(durable);
  absl::StatusOr<std::vector<CheckpointClient>> loaded = store->LoadRunClients(4);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, clients);
  store->SaveRunClients(4, {clients[1]}, nullptr);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(*store->LoadRunClients(4), std::vector<CheckpointClient>{clients[1]});
  EXPECT_TRUE(store->LoadRunClients(5)->empty());
}

}  // namespace
}  // namespace perld::state
