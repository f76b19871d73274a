// RunWorker: exact counts with and without the cooperative yield
// (WorkerPlan::yield_every_ns), and the stop flag honoured before the first
// record.
#include "daemon/bench/perlbench_worker.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>

#include <atomic>
#include <memory>

#include "daemon/bench/pacer.h"

namespace perld::bench {
namespace {

struct Harness {
  Harness() {
    ChannelOptions options;
    options.max_pending_per_worker = 1 << 16;  // holds every record: no consumer needed
    channels = std::move(TimeStampChannels::Create(options, 1)).value();
  }
  std::unique_ptr<TimeStampChannels> channels;
  BenchClock clock{std::nullopt, "test"};
};

class RunWorkerTest : public ::testing::TestWithParam<bool> {};

TEST_P(RunWorkerTest, SendsExactlyTheRequestedRecords) {
  Harness h;
  WorkerPlan plan;
  plan.size = 100;
  plan.records = 3 * kStopCheckInterval + 7;  // crosses several yield points
  plan.yield_every_ns = GetParam() ? 1 : 0;   // offers at every stop check
  const std::atomic<bool> stop{false};
  const WorkerResult r = RunWorker(plan, TimeUnit::kNs, h.clock, h.channels->producer(0), stop);
  EXPECT_EQ(r.attempted, plan.records);
  EXPECT_EQ(r.sent, plan.records);
  EXPECT_EQ(h.channels->producer(0).sent(), static_cast<uint64_t>(plan.records));
}

TEST_P(RunWorkerTest, StopBeforeTheFirstRecordSendsNothing) {
  Harness h;
  WorkerPlan plan;
  plan.size = 100;
  plan.records = 1000;
  plan.yield_every_ns = GetParam() ? 1 : 0;
  const std::atomic<bool> stop{true};
  const WorkerResult r = RunWorker(plan, TimeUnit::kNs, h.clock, h.channels->producer(0), stop);
  EXPECT_EQ(r.attempted, 0);
  EXPECT_EQ(r.sent, 0);
}

INSTANTIATE_TEST_SUITE_P(YieldOnAndOff, RunWorkerTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Yield" : "NoYield"; });

// The Pacer never returns before the slot (a rate-controlled run's records
// never start early), returns at once for a slot already past, and leaves the
// thread's timer slack as it found it.
TEST(PacerTest, NeverEarlyAndRestoresTheTimerSlack) {
  const BenchClock clock{std::nullopt, "test"};
  const int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  {
    Pacer<BenchClock> pacer(clock);
    EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1);
    for (int i = 0; i < 200; ++i) {
      const int64_t due = clock.NowNanos() + 5'000 + (i % 7) * 40'000;
      pacer.WaitUntil(due);
      ASSERT_GE(clock.NowNanos(), due) << i;
    }
    const int64_t before = clock.NowNanos();
    pacer.WaitUntil(before - 1'000'000);  // a missed slot: no wait
    EXPECT_GE(pacer.margin_ns(), Pacer<BenchClock>::kMinMarginNs);
    EXPECT_LE(pacer.margin_ns(), Pacer<BenchClock>::kMaxMarginNs);
  }
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), slack);
}

TEST(PacerTest, APacedWorkerSendsEveryRecord) {
  Harness h;
  WorkerPlan plan;
  plan.size = 100;
  plan.records = 300;
  plan.records_per_second = 20'000;  // 15 ms of slots
  const std::atomic<bool> stop{false};
  const WorkerResult r = RunWorker(plan, TimeUnit::kNs, h.clock, h.channels->producer(0), stop);
  EXPECT_EQ(r.attempted, plan.records);
  EXPECT_EQ(r.sent, plan.records);
}

}  // namespace
}  // namespace perld::bench
