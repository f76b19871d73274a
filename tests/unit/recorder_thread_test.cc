#include "daemon/core/recorder_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace perld {
namespace {

class CountingSink : public TimeStampSink {
 public:
  void Accept(const TimeStamp* batch, size_t n) override {
    for (size_t i = 0; i < n; ++i) {
      records += batch[i].records;
      sum_start += batch[i].start;
    }
  }
  void Tick(int64_t) override { ticks.fetch_add(1, std::memory_order_relaxed); }
  int64_t records = 0;  // recorder thread only; read after StopAndDrain
  int64_t sum_start = 0;
  std::atomic<int> ticks{0};
};

TEST(RecorderThreadTest, StopAndDrainDeliversEveryQueuedTimestamp) {
  for (QueueKind kind : {QueueKind::kMpsc, QueueKind::kLibrary}) {
    ChannelOptions o;
    o.queue = kind;
    o.q_per_worker = 4;
    o.max_pending_per_worker = 1 << 20;  // never blocks: everything may still be queued
    auto channels = TimeStampChannels::Create(o, 4);
    ASSERT_TRUE(channels.ok());
    CountingSink sink;
    RecorderThread recorder(**channels, sink, RecorderOptions{});
    recorder.Start();
#ifdef PERLD_TSAN
    constexpr int kPerWorker = 20'000;  // TSan runs ~20x slower
#else
    constexpr int kPerWorker = 200'000;
#endif
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
      workers.emplace_back([&, w] {
        for (int i = 0; i < kPerWorker; ++i) (*channels)->producer(w).Send(i, i + 5, 1, 0);
      });
    }
    for (auto& t : workers) t.join();
    recorder.StopAndDrain();
    EXPECT_EQ(sink.records, 4 * kPerWorker);
    EXPECT_EQ(sink.sum_start, 4LL * kPerWorker * (kPerWorker - 1) / 2);
    EXPECT_EQ(recorder.consumed(), 4u * kPerWorker);
    EXPECT_GE(sink.ticks.load(), 1) << "final Tick";
  }
}

TEST(RecorderThreadTest, BlockingProducersNeverLoseRecordsAtATinyBound) {
  ChannelOptions o;
  o.max_pending_per_worker = 2;
  o.q_per_worker = 2;
  auto channels = TimeStampChannels::Create(o, 3);
  ASSERT_TRUE(channels.ok());
  CountingSink sink;
  RecorderThread recorder(**channels, sink, RecorderOptions{});
  recorder.Start();
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      for (int i = 0; i < 50'000; ++i) ASSERT_TRUE((*channels)->producer(w).Send(i, i, 1, 0));
    });
  }
  for (auto& t : workers) t.join();
  recorder.StopAndDrain();
  EXPECT_EQ(sink.records, 150'000);
  EXPECT_EQ((*channels)->dropped(), 0u);
  EXPECT_GT((*channels)->blocked(), 0u) << "the bound was actually hit";
}

}  // namespace
}  // namespace perld
