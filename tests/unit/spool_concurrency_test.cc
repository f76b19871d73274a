// Spool under concurrent appenders (TSan in CI): keys are distinct and in
// file order, synced appends return only once durable, the batched flusher
// thread commits beside them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
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

}  // namespace
}  // namespace perld::client
