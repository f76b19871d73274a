// Spool under concurrent appenders (TSan in CI): keys are distinct and in
// file order, synced appends return only once durable, the batched flusher
// thread commits beside them; appenders, the flusher, WriteThrough/Commit
// callers and a releasing cursor at once keep every record exactly once.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/lib/spool.h"

namespace perld::client {
namespace {

TEST(SpoolConcurrencyTest, ConcurrentAppendersGetDistinctKeysInFileOrder) {
  for (SpoolMode mode : {SpoolMode::kSynced, SpoolMode::kBatched}) {
    char pattern[] = "/tmp/spool_concurrency_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    Spool::Options o;
    o.dir = std::string(pattern) + "/spool";
    o.mode = mode;
    o.segment_bytes = 16 << 10;  // segments roll while threads append
    o.batch_appends = 16;
    o.batch_ms = 1;
    absl::StatusOr<std::unique_ptr<Spool>> opened = Spool::Open(o);
    ASSERT_TRUE(opened.ok()) << opened.status();
    std::unique_ptr<Spool> spool = std::move(*opened);
    constexpr int kThreads = 4;
    constexpr int kEach = 300;
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kEach; ++i) {
          absl::StatusOr<uint64_t> key = spool->Append("payload");
          ASSERT_TRUE(key.ok()) << key.status();
          if (mode == SpoolMode::kSynced) {
            EXPECT_GE(spool->durable_key(), *key);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    ASSERT_TRUE(spool->Commit().ok());
    uint64_t expected = 1;
    ASSERT_TRUE(spool
                    ->ForEach([&](uint64_t key, std::string_view payload) {
                      EXPECT_EQ(key, expected++);
                      EXPECT_EQ(payload, "payload");
                      return true;
                    })
                    .ok());
    EXPECT_EQ(expected, uint64_t{kThreads} * kEach + 1);
    spool.reset();
    std::filesystem::remove_all(pattern);
  }
}

// A cursor tails the spool while three threads append and segments roll:
// it sees every key once, in order.
TEST(SpoolConcurrencyTest, CursorTailsWritersInOrder) {
  char pattern[] = "/tmp/spool_cursor_test.XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  Spool::Options o;
  o.dir = std::string(pattern) + "/spool";
  o.segment_bytes = 8 << 10;
  o.batch_appends = 8;
  o.batch_ms = 1;
  absl::StatusOr<std::unique_ptr<Spool>> opened = Spool::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Spool& spool = **opened;
  constexpr int kWriters = 3;
  constexpr int kEach = 500;
  std::vector<std::thread> writers;
  writers.reserve(kWriters);
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) ASSERT_TRUE(spool.Append(std::string(100, 'r')).ok());
    });
  }
  Spool::Cursor cursor(spool);
  uint64_t expected = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (expected <= uint64_t{kWriters} * kEach && std::chrono::steady_clock::now() < deadline) {
    uint64_t key = 0;
    std::string payload;
    absl::StatusOr<bool> got = cursor.Next(&key, &payload);
    ASSERT_TRUE(got.ok()) << got.status();
    if (!*got) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(key, expected);
    ASSERT_EQ(payload, std::string(100, 'r'));
    ++expected;
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(expected, uint64_t{kWriters} * kEach + 1);
  opened->reset();
  std::filesystem::remove_all(pattern);
}

// The payload of thread t's i-th append: t and i, then bytes derived from
// them; 1 in 1000 is larger than an append block (4 MiB) to take that path.
std::string StressPayload(uint32_t t, uint32_t i) {
  const size_t size = i % 1000 == 500 ? (size_t{4} << 20) + 100 : 8 + (t * 7919u + i * 31u) % 900;
  std::string p(size, '\0');
  std::memcpy(p.data(), &t, 4);
  std::memcpy(p.data() + 4, &i, 4);
  for (size_t k = 8; k < size; ++k) p[k] = static_cast<char>((t * 131 + i * 17 + k) & 0xff);
  return p;
}

std::pair<uint32_t, uint32_t> StressOrigin(std::string_view payload) {
  uint32_t t = 0;
  uint32_t i = 0;
  if (payload.size() >= 8) {
    std::memcpy(&t, payload.data(), 4);
    std::memcpy(&i, payload.data() + 4, 4);
  }
  return {t, i};
}

// Several appenders (their reservations and copies interleave; blocks fill
// and are handed over), the flusher committing every 32 appends or 1 ms, a
// thread calling WriteThrough and Commit, and a cursor that releases what it
// read, while segments roll. The cursor sees keys 1, 2, 3, ... each once,
// each with the payload its appender was given that key for; each
// appender's keys rise; after a reopen the spool holds exactly the keys from
// first_key() to the last, with their payloads.
TEST(SpoolConcurrencyTest, AppendersFlusherAndReleasingReaderKeepEveryRecordOnce) {
  for (SpoolMode mode : {SpoolMode::kBatched, SpoolMode::kSynced}) {
    SCOPED_TRACE(mode == SpoolMode::kBatched ? "batched" : "synced");
    char pattern[] = "/tmp/spool_stress_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    Spool::Options o;
    o.dir = std::string(pattern) + "/spool";
    o.mode = mode;
    o.segment_bytes = 64 << 10;
    o.max_bytes = int64_t{256} << 20;
    o.batch_appends = 32;
    o.batch_ms = 1;
    absl::StatusOr<std::unique_ptr<Spool>> opened = Spool::Open(o);
    ASSERT_TRUE(opened.ok()) << opened.status();
    Spool& spool = **opened;
    constexpr uint32_t kThreads = 4;
    const uint32_t each = mode == SpoolMode::kBatched ? 3000 : 300;
    const uint64_t total = uint64_t{kThreads} * each;
    // keys[t][i]: the key thread t's i-th append got.
    std::vector<std::vector<uint64_t>> keys(kThreads, std::vector<uint64_t>(each, 0));
    std::atomic<bool> appending{true};
    std::vector<std::thread> appenders;
    appenders.reserve(kThreads);
    for (uint32_t t = 0; t < kThreads; ++t) {
      appenders.emplace_back([&, t] {
        for (uint32_t i = 0; i < each; ++i) {
          absl::StatusOr<uint64_t> key = spool.Append(StressPayload(t, i));
          ASSERT_TRUE(key.ok()) << key.status();
          if (i > 0) {
            ASSERT_GT(*key, keys[t][i - 1]);
          }
          keys[t][i] = *key;
        }
      });
    }
    std::thread committer([&] {
      int n = 0;
      while (appending.load()) {
        const uint64_t last = spool.last_key();
        ASSERT_TRUE(spool.WriteThrough(last).ok());
        EXPECT_GE(spool.written_key(), last);
        if (++n % 8 == 0) {
          ASSERT_TRUE(spool.Commit().ok());
          EXPECT_GE(spool.durable_key(), last);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    // The cursor: what it read, in order.
    std::vector<std::pair<uint64_t, std::pair<uint32_t, uint32_t>>> seen;
    seen.reserve(total);
    {
      Spool::Cursor cursor(spool);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      while (seen.size() < total && std::chrono::steady_clock::now() < deadline) {
        uint64_t key = 0;
        std::string payload;
        absl::StatusOr<bool> got = cursor.Next(&key, &payload);
        ASSERT_TRUE(got.ok()) << got.status();
        if (!*got) {
          std::this_thread::yield();
          continue;
        }
        const auto [t, i] = StressOrigin(payload);
        ASSERT_LT(t, kThreads) << "key " << key;
        ASSERT_LT(i, each) << "key " << key;
        ASSERT_EQ(payload, StressPayload(t, i)) << "key " << key;
        ASSERT_EQ(key, seen.size() + 1) << "a gap, a duplicate or a reordering";
        seen.emplace_back(key, std::make_pair(t, i));
        if (key % 97 == 0) spool.Release(key - 1);
      }
    }
    for (std::thread& a : appenders) a.join();
    appending.store(false);
    committer.join();
    ASSERT_EQ(seen.size(), total);
    for (const auto& [key, origin] : seen) {
      ASSERT_EQ(keys[origin.first][origin.second], key) << "the cursor's record is not the one "
                                                        << "its appender was given the key for";
    }
    const uint64_t first = spool.first_key();
    ASSERT_GE(first, 1u);
    opened->reset();  // commits what is buffered

    absl::StatusOr<std::unique_ptr<Spool>> reopened = Spool::Open(o);
    ASSERT_TRUE(reopened.ok()) << reopened.status();
    EXPECT_EQ((*reopened)->truncated_bytes(), 0u);
    EXPECT_EQ((*reopened)->first_key(), first);
    EXPECT_EQ((*reopened)->last_key(), total);
    uint64_t expected = first;
    ASSERT_TRUE((*reopened)
                    ->ForEach([&](uint64_t key, std::string_view payload) {
                      EXPECT_EQ(key, expected);
                      const auto [t, i] = StressOrigin(payload);
                      EXPECT_TRUE(t < kThreads && i < each && keys[t][i] == key &&
                                  payload == StressPayload(t, i))
                          << "key " << key;
                      ++expected;
                      return !testing::Test::HasFailure();
                    })
                    .ok());
    EXPECT_EQ(expected, total + 1);
    reopened->reset();
    std::filesystem::remove_all(pattern);
  }
}

}  // namespace
}  // namespace perld::client
