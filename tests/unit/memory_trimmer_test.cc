// MemoryTrimmer: trims every mallocTrimIntervalMs, follows a reload, and
// stops at once whatever the interval.
#include "daemon/server/memory_trimmer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "daemon/config/current_config.h"

namespace perld::server {
namespace {

config::DaemonConfig WithInterval(int64_t ms) {
  config::DaemonConfig c;
  c.malloc_trim_interval_ms = ms;
  return c;
}

// Waits (bounded) until `trimmer` has trimmed at least `n` times.
bool TrimmedAtLeast(const MemoryTrimmer& trimmer, uint64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (trimmer.trims() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(MemoryTrimmerTest, TrimsEveryIntervalAndCountsTheTime) {
  config::CurrentConfig current(WithInterval(10));
  MemoryTrimmer trimmer(current);
  ASSERT_TRUE(TrimmedAtLeast(trimmer, 3));
  EXPECT_GT(trimmer.trim_ns(), 0);
  EXPECT_GT(trimmer.max_trim_ns(), 0);
  EXPECT_LE(trimmer.max_trim_ns(), trimmer.trim_ns());
  bool counted = false;
  for (const prometheus::MetricFamily& f : trimmer.Collect()) {
    if (f.name == "perld_malloc_trims_total") counted = f.metric.at(0).counter.value >= 3;
  }
  EXPECT_TRUE(counted);
}

TEST(MemoryTrimmerTest, AReloadToZeroStopsTrimming) {
  config::CurrentConfig current(WithInterval(10));
  MemoryTrimmer trimmer(current);
  ASSERT_TRUE(TrimmedAtLeast(trimmer, 1));
  current.Set(WithInterval(0));
  // The interval in progress ends within 10 ms (and a trim under way with
  // it); 500 ms leaves room for a loaded machine's scheduling.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const uint64_t off = trimmer.trims();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(trimmer.trims(), off);
}

TEST(MemoryTrimmerTest, StopsAtOnceWhateverTheInterval) {
  config::CurrentConfig current(WithInterval(3'600'000));
  const auto start = std::chrono::steady_clock::now();
  {
    MemoryTrimmer trimmer(current);
    trimmer.Stop();
    trimmer.Stop();  // twice: a no-op
    EXPECT_EQ(trimmer.trims(), 0u);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace perld::server
