// The state store under concurrent callers, and WAL readers against the
// writer. Labelled `concurrency`: the TSan build runs it.
#include <atomic>
#include <thread>
#include <vector>

#include "daemon/state/sqlite_db.h"
#include "daemon/state/state_store.h"
#include "gtest/gtest.h"
#include "tests/unit/state_test_records.h"

namespace perld::state {
namespace {

using testing::MakeRun;
using testing::MakeWindow;
using testing::ScratchDir;
using Kind = runs::WindowRecord::Kind;

// Writer threads save windows of their own run (flushing now and then, all
// concurrently) while a reader loads every run on its own connection. Each
// load must see, per run, a gap-free prefix 1..k of its windows that never
// shrinks: batches commit atomically in queue order.
TEST(StateStoreConcurrencyTest, WritersAndALoadingReader) {
  ScratchDir tmp;
  absl::StatusOr<std::unique_ptr<StateStore>> opened = StateStore::Open(tmp.path(), {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  StateStore& store = **opened;
  constexpr int kWriters = 4;
  constexpr int kWindows = 1500;
  for (runs::RunId id = 1; id <= kWriters; ++id) {
    store.SaveRun(MakeRun(id));
  }
  ASSERT_TRUE(store.Flush().ok());

  std::atomic<int> writers_left{kWriters};
  std::vector<std::thread> writers;
  for (runs::RunId id = 1; id <= kWriters; ++id) {
    writers.emplace_back([&store, &writers_left, id] {
      for (int seq = 1; seq <= kWindows; ++seq) {
        store.SaveWindow(MakeWindow(id, Kind::kPeriodic, seq));
        if (seq % 250 == 0) {
          EXPECT_TRUE(store.Flush().ok());
        }
      }
      writers_left.fetch_sub(1, std::memory_order_release);  // pairs with the reader's acquire
    });
  }
  int loads = 0;
  std::vector<size_t> seen(kWriters + 1, 0);
  std::thread reader([&] {
    do {
      absl::StatusOr<std::vector<StoredRun>> runs = store.LoadRuns();
      ASSERT_TRUE(runs.ok()) << runs.status();
      ASSERT_EQ(runs->size(), static_cast<size_t>(kWriters));
      for (const StoredRun& run : *runs) {
        for (size_t i = 0; i < run.windows.size(); ++i) {
          ASSERT_EQ(run.windows[i].seq, static_cast<int64_t>(i + 1)) << "run " << run.info.id;
        }
        ASSERT_GE(run.windows.size(), seen[run.info.id]);
        seen[run.info.id] = run.windows.size();
      }
      ++loads;
    } while (writers_left.load(std::memory_order_acquire) > 0);
  });
  for (std::thread& t : writers) {
    t.join();
  }
  reader.join();
  ASSERT_TRUE(store.Flush().ok());
  absl::StatusOr<std::vector<StoredRun>> runs = store.LoadRuns();
  ASSERT_TRUE(runs.ok());
  for (const StoredRun& run : *runs) {
    EXPECT_EQ(run.windows.size(), static_cast<size_t>(kWindows));
  }
  EXPECT_GE(loads, 1);
  EXPECT_EQ(store.write_errors(), 0u);
  EXPECT_EQ(store.dropped_windows(), 0u);
}

// In WAL mode a reader holding a read transaction open neither blocks the
// writer's commits nor sees them until it ends its transaction.
TEST(StateStoreConcurrencyTest, AnOpenReadTransactionDoesNotBlockTheWriter) {
  ScratchDir tmp;
  absl::StatusOr<std::unique_ptr<StateStore>> opened = StateStore::Open(tmp.path(), {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  StateStore& store = **opened;
  store.SaveRun(MakeRun(1));
  ASSERT_TRUE(store.Flush().ok());

  absl::StatusOr<SqliteDb> reader = SqliteDb::Open(store.path(), SQLITE_OPEN_READONLY);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(reader->Exec("BEGIN").ok());
  EXPECT_EQ(*reader->QueryText("SELECT count(*) FROM windows"), "0");  // the snapshot starts

  std::thread writer([&store] {
    for (int seq = 1; seq <= 1000; ++seq) {
      store.SaveWindow(MakeWindow(1, Kind::kPeriodic, seq));
      if (seq % 100 == 0) {
        EXPECT_TRUE(store.Flush().ok());  // commits while the read transaction is open
      }
    }
  });
  writer.join();
  EXPECT_EQ(*reader->QueryText("SELECT count(*) FROM windows"), "0");
  ASSERT_TRUE(reader->Exec("COMMIT").ok());
  EXPECT_EQ(*reader->QueryText("SELECT count(*) FROM windows"), "1000");
  EXPECT_EQ(store.write_errors(), 0u);
}

// Open-time state (MaxRunId, counters) is safe to read while saving, and the
// log callback may be replaced while the writer uses it.
TEST(StateStoreConcurrencyTest, AccessorsAndLogCallbackAreThreadSafe) {
  ScratchDir tmp;
  absl::StatusOr<std::unique_ptr<StateStore>> opened = StateStore::Open(tmp.path(), {});
  ASSERT_TRUE(opened.ok());
  StateStore& store = **opened;
  std::atomic<int> lines{0};
  std::thread saver([&store] {
    for (runs::RunId id = 1; id <= 200; ++id) {
      store.SaveRun(MakeRun(id));
      store.SaveWindow(MakeWindow(id + 1000, Kind::kPeriodic, 1));  // an error: no such run
    }
  });
  runs::RunId last = 0;
  for (int i = 0; i < 200; ++i) {
    store.SetLogCallback([&lines](std::string_view) { lines.fetch_add(1); });
    const runs::RunId now = store.MaxRunId();
    EXPECT_GE(now, last);
    last = now;
    static_cast<void>(store.write_errors());
  }
  saver.join();
  EXPECT_FALSE(store.Flush().ok());
  EXPECT_EQ(store.MaxRunId(), 200u);
  EXPECT_EQ(store.write_errors(), 200u);
}

}  // namespace
}  // namespace perld::state
