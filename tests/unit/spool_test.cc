// Spool: FIFO order, release, bounds, recovery of torn tails, and a writer
// process killed with SIGKILL at random points many times -- after each
// kill every record it reported durable is present exactly once, in order,
// with its exact payload.
#include "client/lib/spool.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace perld::client {
namespace {

std::string PayloadOf(uint64_t key) {
  // 20..531 bytes, content derived from the key.
  std::string p(20 + (key * 7919) % 512, '\0');
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>((key * 131 + i * 17) & 0xff);
  return p;
}

class SpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/spool_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Spool::Options Options(SpoolMode mode) const {
    Spool::Options o;
    o.dir = dir_ + "/spool";
    o.mode = mode;
    o.segment_bytes = 64 << 10;
    o.max_bytes = 64 << 20;
    return o;
  }
  std::unique_ptr<Spool> OpenOrDie(const Spool::Options& o) {
    absl::StatusOr<std::unique_ptr<Spool>> spool = Spool::Open(o);
    EXPECT_TRUE(spool.ok()) << spool.status();
    return spool.ok() ? std::move(*spool) : nullptr;
  }
  // Every record, checked against PayloadOf; returns the keys in order.
  static std::vector<uint64_t> Keys(Spool& spool) {
    std::vector<uint64_t> keys;
    const absl::Status s = spool.ForEach([&](uint64_t key, std::string_view payload) {
      EXPECT_EQ(payload, PayloadOf(key)) << key;
      keys.push_back(key);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s;
    return keys;
  }
  std::vector<std::string> Segments() const {
    std::vector<std::string> names;
    DIR* d = opendir((dir_ + "/spool").c_str());
    if (d == nullptr) return names;
    while (const dirent* e = readdir(d)) {  // NOLINT(concurrency-mt-unsafe): one thread
      if (std::string(e->d_name).rfind("seg-", 0) == 0) names.push_back(e->d_name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

TEST_F(SpoolTest, KeepsOrderAcrossSegmentsAndReopens) {
  for (SpoolMode mode : {SpoolMode::kSynced, SpoolMode::kBatched}) {
    std::filesystem::remove_all(dir_ + "/spool");
    {
      std::unique_ptr<Spool> spool = OpenOrDie(Options(mode));
      for (uint64_t k = 1; k <= 600; ++k) ASSERT_TRUE(spool->Append(k, PayloadOf(k)).ok());
      EXPECT_EQ(spool->last_key(), 600u);
      ASSERT_TRUE(spool->Commit().ok());
      EXPECT_EQ(spool->durable_key(), 600u);
      EXPECT_GT(Segments().size(), 2u);  // 64 KiB segments
    }
    std::unique_ptr<Spool> spool = OpenOrDie(Options(mode));
    EXPECT_EQ(spool->records_recovered(), 600u);
    EXPECT_EQ(spool->truncated_bytes(), 0u);
    const std::vector<uint64_t> keys = Keys(*spool);
    ASSERT_EQ(keys.size(), 600u);
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(keys[i], i + 1);
    // Appends continue after the recovered keys; lower keys are refused.
    EXPECT_FALSE(spool->Append(600, "x").ok());
    absl::StatusOr<uint64_t> next = spool->Append(PayloadOf(601));
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(*next, 601u);
  }
}

TEST_F(SpoolTest, ReleaseDeletesWholeAcknowledgedSegmentsOnly) {
  std::unique_ptr<Spool> spool = OpenOrDie(Options(SpoolMode::kBatched));
  for (uint64_t k = 1; k <= 600; ++k) ASSERT_TRUE(spool->Append(k, PayloadOf(k)).ok());
  const size_t before = Segments().size();
  const int64_t bytes = spool->bytes();
  spool->Release(300);
  EXPECT_LT(Segments().size(), before);
  EXPECT_LT(spool->bytes(), bytes);
  std::vector<uint64_t> keys = Keys(*spool);
  ASSERT_FALSE(keys.empty());
  EXPECT_LE(keys.front(), 301u);  // nothing unacknowledged was released
  EXPECT_EQ(keys.back(), 600u);
  spool->Release(600);  // the active segment stays: it holds the last key
  EXPECT_EQ(Segments().size(), 1u);
  EXPECT_EQ(spool->last_key(), 600u);
}

TEST_F(SpoolTest, FullSpoolRefusesVisiblyAndCountsIt) {
  Spool::Options o = Options(SpoolMode::kSynced);
  o.segment_bytes = 4096;
  o.max_bytes = 16384;
  std::unique_ptr<Spool> spool = OpenOrDie(o);
  const std::string payload(1000, 'x');
  uint64_t k = 0;
  absl::Status s;
  while ((s = spool->Append(++k, payload)).ok()) {
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(spool->full_refusals(), 1u);
  EXPECT_LE(spool->bytes(), o.max_bytes);
  spool->Release(k - 1);  // acknowledged: room again
  EXPECT_TRUE(spool->Append(k, payload).ok());
}

TEST_F(SpoolTest, TornTailsAreTruncatedNeverReplayed) {
  {
    std::unique_ptr<Spool> spool = OpenOrDie(Options(SpoolMode::kSynced));
    for (uint64_t k = 1; k <= 10; ++k) ASSERT_TRUE(spool->Append(k, PayloadOf(k)).ok());
  }
  const std::string segment = dir_ + "/spool/" + Segments().back();
  struct stat st = {};
  ASSERT_EQ(stat(segment.c_str(), &st), 0);
  const off_t good = st.st_size;
  // 1: half a header.  2: a whole header, half a payload.  3: a complete
  // record whose CRC is wrong.  4: a record whose key goes backwards.
  std::vector<std::string> tails;
  tails.emplace_back("\x10\x00\x00", 3);
  {
    std::string h(16, '\0');
    h[0] = 100;
    h[8] = 11;
    tails.push_back(h + std::string(40, 'a'));
    std::string bad_crc(16, '\0');
    bad_crc[0] = 4;
    bad_crc[8] = 11;
    tails.push_back(bad_crc + "abcd");
  }
  for (const std::string& tail : tails) {
    ASSERT_EQ(truncate(segment.c_str(), good), 0);
    std::ofstream(segment, std::ios::app | std::ios::binary) << tail;
    std::unique_ptr<Spool> spool = OpenOrDie(Options(SpoolMode::kSynced));
    EXPECT_EQ(spool->truncated_bytes(), tail.size());
    EXPECT_EQ(spool->records_recovered(), 10u);
    EXPECT_EQ(Keys(*spool).size(), 10u);
    ASSERT_EQ(stat(segment.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, good);  // truncated on disk
  }
  // A later segment after a corrupt one is not trusted either.
  {
    std::unique_ptr<Spool> spool = OpenOrDie(Options(SpoolMode::kSynced));
    for (uint64_t k = 11; k <= 1000; ++k) ASSERT_TRUE(spool->Append(k, PayloadOf(k)).ok());
  }
  const std::vector<std::string> names = Segments();
  ASSERT_GT(names.size(), 2u);
  const std::string middle = dir_ + "/spool/" + names[1];
  ASSERT_EQ(stat(middle.c_str(), &st), 0);
  {
    std::fstream f(middle, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(st.st_size / 2);
    f.put('\x5a');  // flips a payload byte: that record's CRC fails
  }
  std::unique_ptr<Spool> spool = OpenOrDie(Options(SpoolMode::kSynced));
  const std::vector<uint64_t> keys = Keys(*spool);
  ASSERT_FALSE(keys.empty());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(keys[i], i + 1);  // a clean prefix
  EXPECT_LT(keys.back(), 1000u);
  EXPECT_GT(spool->truncated_bytes(), 0u);
}

// The child appends from the spool's last key on and writes each durable
// key to `report` (synced: after each Append; batched: after each commit
// it observes). It never returns: the parent kills it.
[[noreturn]] void WriterChild(const Spool::Options& o, int report) {
  absl::StatusOr<std::unique_ptr<Spool>> spool = Spool::Open(o);
  if (!spool.ok()) _exit(3);
  uint64_t key = (*spool)->last_key();
  uint64_t reported = 0;
  for (;;) {
    ++key;
    if (!(*spool)->Append(key, PayloadOf(key)).ok()) _exit(4);
    // Every seventh key the way a sender sends it: written through first
    // (then it survives the process being killed, synced or not).
    if (key % 7 == 0 && !(*spool)->WriteThrough(key).ok()) _exit(6);
    const uint64_t kept = std::max((*spool)->durable_key(), (*spool)->written_key());
    if (kept > reported) {
      reported = kept;
      if (write(report, &reported, sizeof(reported)) != sizeof(reported)) _exit(5);
    }
  }
}

// A batched spool buffers appends; WriteThrough writes them to the file at
// once (no sync), so a sender never sends a message the spool does not hold.
TEST_F(SpoolTest, WriteThroughPutsBufferedRecordsInTheFile) {
  Spool::Options o = Options(SpoolMode::kBatched);
  o.batch_appends = 1 << 20;
  o.batch_ms = 60'000;  // the flusher stays away
  std::unique_ptr<Spool> spool = OpenOrDie(o);
  for (uint64_t key = 1; key <= 5; ++key) ASSERT_TRUE(spool->Append(key, PayloadOf(key)).ok());
  EXPECT_EQ(spool->written_key(), 0u);
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/spool/" + Segments().front()), 0u);
  ASSERT_TRUE(spool->WriteThrough(3).ok());
  EXPECT_EQ(spool->written_key(), 5u);  // everything buffered goes at once
  EXPECT_LT(spool->durable_key(), 5u);  // written, not synced
  // What a process killed now leaves: another spool reading the files.
  std::filesystem::copy(dir_ + "/spool", dir_ + "/copy");
  Spool::Options copy = o;
  copy.dir = dir_ + "/copy";
  std::unique_ptr<Spool> reopened = OpenOrDie(copy);
  EXPECT_EQ(Keys(*reopened), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(reopened->first_key(), 1u);
}

TEST_F(SpoolTest, KillNineAtRandomPointsLosesNothingDurableAndReplaysNothingTwice) {
  std::mt19937_64 random(20261204);
  for (SpoolMode mode : {SpoolMode::kSynced, SpoolMode::kBatched}) {
    std::filesystem::remove_all(dir_ + "/spool");
    Spool::Options o = Options(mode);
    o.batch_appends = 64;
    o.batch_ms = 2;
    uint64_t promised = 0;  // the highest key any child reported durable or written
    for (int round = 0; round < 25; ++round) {
      int pipe_fds[2];
      ASSERT_EQ(pipe(pipe_fds), 0);
      const pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        close(pipe_fds[0]);
        WriterChild(o, pipe_fds[1]);
      }
      close(pipe_fds[1]);
      std::this_thread::sleep_for(std::chrono::microseconds(10'000 + random() % 50'000));
      kill(child, SIGKILL);
      int status = 0;
      ASSERT_EQ(waitpid(child, &status, 0), child);
      ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed on its own, status " << status;
      uint64_t reported = 0;
      while (read(pipe_fds[0], &reported, sizeof(reported)) == sizeof(reported)) {
        promised = std::max(promised, reported);
      }
      close(pipe_fds[0]);
      std::unique_ptr<Spool> spool = OpenOrDie(o);
      const std::vector<uint64_t> keys = Keys(*spool);  // payloads checked too
      ASSERT_GE(keys.size(), promised) << "round " << round;
      for (size_t i = 0; i < keys.size(); ++i) {
        ASSERT_EQ(keys[i], i + 1) << "round " << round << ": a gap or a duplicate";
      }
    }
    EXPECT_GT(promised, 100u);  // the children really wrote
  }
}

}  // namespace
}  // namespace perld::client
