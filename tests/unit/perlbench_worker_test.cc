// RunWorker: exact counts with and without the cooperative yield
// (WorkerPlan::yield_every_ns), and the stop flag honoured before the first
// record.
#include "daemon/bench/perlbench_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

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

// A rate-controlled worker (paced on its slots) sends every record too.
TEST(PacedWorkerTest, SendsEveryRecord) {
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
