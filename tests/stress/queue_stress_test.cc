// Stress tests of the timestamp hand-off: millions of records through the raw
// TimeStampMpscQueue (with TimeStampNodePool recycling) and through
// TimeStampChannels + RecorderThread for both queue kinds and the seed's
// topologies, with tiny pending bounds so pool exhaustion, blocking, dropping
// and node recycling boundaries are crossed many times, and with producers
// paused at random points (including by signals, which can stop a producer
// between its tail exchange and its link store: the path where Poll must wait
// for the link rather than report an empty queue or skip the node).
//
// Every test checks exact delivery (each record once) and per-producer order
// against a single-threaded reference (a per-producer, per-queue sequence
// counter); payloads carry a checksum so a torn or stale recycled node shows.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon/core/cpu_relax.h"
#include "daemon/core/recorder_thread.h"
#include "daemon/core/time_stamp.h"
#include "daemon/core/timestamp_channels.h"
#include "daemon/core/timestamp_mpsc_queue.h"
#include "daemon/core/timestamp_node_pool.h"
#include "daemon/core/timestamp_sink.h"
#include "tests/stress/stress_scale.h"

namespace perld {
namespace {

int64_t Scaled(int64_t release_count) { return stress::ScaledCount(release_count, 0.25, 1000); }

// Bound on any wait in a test loop (spins/yields); exceeding it fails the test
// instead of hanging it.
constexpr int64_t kWaitLimit = 200'000'000;

int32_t Checksum(int64_t producer, int64_t seq) {
  return static_cast<int32_t>((static_cast<uint64_t>(seq) * 0x9E3779B97F4A7C15ull) >> 33) ^
         static_cast<int32_t>(producer * 7919);
}

TimeStamp MakeRecord(int producer, int64_t seq) {
  return TimeStamp{producer, seq, 1, Checksum(producer, seq)};
}

// The single-threaded reference: the producer rotates over its queues (lanes)
// once per `batch` records (1: per record; the batch path: per batch node),
// so record `seq` of producer p travels through lane (seq / batch) % lanes, and
// each lane must deliver that producer's records in order, each exactly once.
class DeliveryChecker {
 public:
  DeliveryChecker(int producers, int lanes, int64_t batch = 1)
      : lanes_(lanes),
        batch_(batch),
        next_(static_cast<size_t>(producers)),
        count_(static_cast<size_t>(producers)) {
    for (auto& lane_next : next_) lane_next.assign(static_cast<size_t>(lanes), 0);
  }

  void Check(const TimeStamp& ts) {
    const int64_t p = ts.start;
    const int64_t seq = ts.end;
    if (p < 0 || p >= static_cast<int64_t>(next_.size()) || seq < 0) {
      Fail("record from unknown producer " + std::to_string(p) + " seq " + std::to_string(seq));
      return;
    }
    if (ts.records != 1 || ts.bytes != Checksum(p, seq)) {
      Fail("corrupt payload for producer " + std::to_string(p) + " seq " + std::to_string(seq));
    }
    const int64_t node = seq / batch_;
    const int64_t lane = node % lanes_;
    const int64_t index = (node / lanes_) * batch_ + seq % batch_;  // position within the lane
    int64_t& expected = next_[static_cast<size_t>(p)][static_cast<size_t>(lane)];
    if (index != expected) {
      Fail("producer " + std::to_string(p) + " lane " + std::to_string(lane) +
           ": expected lane index " + std::to_string(expected) + ", got " + std::to_string(index) +
           " (seq " + std::to_string(seq) + ")" +
           (index < expected ? " (duplicate or reordered)" : " (missing or reordered)"));
      if (index > expected) expected = index + 1;
    } else {
      ++expected;
    }
    ++count_[static_cast<size_t>(p)];
  }

  uint64_t count(int p) const { return count_[static_cast<size_t>(p)]; }
  uint64_t total() const {
    uint64_t n = 0;
    for (uint64_t c : count_) n += c;
    return n;
  }
  int64_t errors() const { return errors_; }
  const std::string& first_error() const { return first_error_; }

 private:
  void Fail(const std::string& what) {
    if (errors_++ == 0) first_error_ = what;
  }

  const int lanes_;
  const int64_t batch_;
  std::vector<std::vector<int64_t>> next_;
  std::vector<uint64_t> count_;
  int64_t errors_ = 0;
  std::string first_error_;
};

// Runs on the recorder thread; read by the test after StopAndDrain (joined).
class VerifyingSink : public TimeStampSink {
 public:
  VerifyingSink(int producers, int lanes, int64_t batch = 1) : checker_(producers, lanes, batch) {}
  void Accept(const TimeStamp* batch, size_t n) override {
    if (n == 0 || n > TimeStampChannels::kBatch) ++bad_batches_;
    for (size_t i = 0; i < n; ++i) checker_.Check(batch[i]);
  }
  void Tick(int64_t) override { ++ticks_; }

  const DeliveryChecker& checker() const { return checker_; }
  int64_t bad_batches() const { return bad_batches_; }
  int64_t ticks() const { return ticks_; }

 private:
  DeliveryChecker checker_;
  int64_t bad_batches_ = 0;
  int64_t ticks_ = 0;
};

// ---------------------------------------------------------------------------
// Raw queue + pools.

struct RawRunOptions {
  int producers = 1;
  int64_t per_producer = 1000;
  size_t pool_capacity = 1024;
  // Random sleeps/yields between and around adds.
  bool random_pauses = false;
  // A helper thread interrupts producers at random instants with a signal
  // whose handler sleeps, pausing them at arbitrary instructions.
  bool signal_pauses = false;
};

struct RawRunResult {
  uint64_t delivered = 0;
  int64_t errors = 0;
  std::string first_error;
  bool wait_limit_hit = false;
  size_t allocated_nodes = 0;
  int64_t slow_polls = 0;  // non-empty polls that took > 20 us (waited for a link)
  int64_t signals = 0;
};

std::atomic<int64_t> g_signals_handled{0};

void PauseHandler(int) {
  const int saved_errno = errno;
  g_signals_handled.fetch_add(1, std::memory_order_relaxed);
  timespec pause{0, 30'000};
  nanosleep(&pause, nullptr);
  errno = saved_errno;
}

void RandomPause(std::mt19937& rng) {
  const int dice = std::uniform_int_distribution<int>(0, 999)(rng);
  if (dice < 900) return;
  if (dice < 960) {
    for (int i = std::uniform_int_distribution<int>(1, 200)(rng); i > 0; --i) CpuRelax();
  } else if (dice < 995) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(dice - 990));
  }
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The calling thread is the queue's only consumer.
RawRunResult RunRawQueue(const RawRunOptions& o) {
  RawRunResult result;
  std::vector<std::unique_ptr<TimeStampNodePool>> pools;
  for (int p = 0; p < o.producers; ++p) {
    pools.push_back(std::make_unique<TimeStampNodePool>(o.pool_capacity));
  }
  TimeStampMpscQueue queue;  // destroyed before the pools
  std::atomic<bool> wait_limit_hit{false};
  std::atomic<int> finished{0};
  std::atomic<bool> may_exit{false};

  std::vector<std::thread> producers;
  std::vector<pthread_t> handles(static_cast<size_t>(o.producers));
  std::atomic<int> started{0};
  for (int p = 0; p < o.producers; ++p) {
    producers.emplace_back([&, p] {
      handles[static_cast<size_t>(p)] = pthread_self();
      started.fetch_add(1);
      std::mt19937 rng(static_cast<uint32_t>(p) * 7 + 1);
      TimeStampNodePool& pool = *pools[static_cast<size_t>(p)];
      for (int64_t seq = 0; seq < o.per_producer; ++seq) {
        if (o.random_pauses) RandomPause(rng);
        TimeStampNode* node = pool.Acquire();
        for (int64_t w = 0; node == nullptr && w < kWaitLimit; ++w) {
          if (w < 64) {
            CpuRelax();
          } else {
            std::this_thread::yield();
          }
          node = pool.Acquire();
        }
        if (node == nullptr) {
          wait_limit_hit.store(true);
          break;
        }
        node->ts = MakeRecord(p, seq);
        queue.Add(node);
        if (o.random_pauses) RandomPause(rng);
      }
      finished.fetch_add(1);
      // Stay alive (signal target) until the pauser has stopped.
      for (int64_t w = 0; !may_exit.load() && w < kWaitLimit; ++w) std::this_thread::yield();
    });
  }

  std::thread pauser;
  if (o.signal_pauses) {
    for (int64_t w = 0; started.load() < o.producers && w < kWaitLimit; ++w) {
      std::this_thread::yield();
    }
    pauser = std::thread([&] {
      std::mt19937 rng(99);
      for (int64_t i = 0; finished.load() < o.producers && i < kWaitLimit; ++i) {
        const int p = std::uniform_int_distribution<int>(0, o.producers - 1)(rng);
        pthread_kill(handles[static_cast<size_t>(p)], SIGUSR1);
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::uniform_int_distribution<int>(20, 300)(rng)));
      }
    });
  }

  DeliveryChecker checker(o.producers, 1);
  const uint64_t total = static_cast<uint64_t>(o.producers) * static_cast<uint64_t>(o.per_producer);
  int64_t idle = 0;
  while (checker.total() < total && idle < kWaitLimit) {
    const int64_t before = o.signal_pauses ? NowNs() : 0;
    TimeStampNode* node = queue.Poll();
    if (node == nullptr) {
      if (++idle % 64 == 0) std::this_thread::yield();
      if (wait_limit_hit.load()) break;
      continue;
    }
    if (o.signal_pauses && NowNs() - before > 20'000) ++result.slow_polls;
    idle = 0;
    checker.Check(node->ts);
    TimeStampNodePool::Release(node);
  }
  if (pauser.joinable()) pauser.join();
  may_exit.store(true);
  for (auto& t : producers) t.join();

  result.delivered = checker.total();
  result.errors = checker.errors();
  result.first_error = checker.first_error();
  result.wait_limit_hit = wait_limit_hit.load() || idle >= kWaitLimit;
  for (auto& pool : pools) result.allocated_nodes += pool->allocated();
  if (queue.Poll() != nullptr) {
    ++result.errors;
    if (result.first_error.empty()) result.first_error = "extra record after the last one";
  }
  return result;
}

void ExpectExactDelivery(const RawRunOptions& o, const RawRunResult& r) {
  EXPECT_FALSE(r.wait_limit_hit) << "a wait exceeded its bound";
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_EQ(r.delivered,
            static_cast<uint64_t>(o.producers) * static_cast<uint64_t>(o.per_producer));
  EXPECT_LE(r.allocated_nodes, static_cast<size_t>(o.producers) * o.pool_capacity)
      << "a pool exceeded its capacity";
}

TEST(TimeStampMpscQueueStressTest, ExactDeliveryAndPerProducerOrderWith1To8Producers) {
  const int64_t total = Scaled(1'500'000);  // per producer count
  for (int producers = 1; producers <= 8; ++producers) {
    RawRunOptions o;
    o.producers = producers;
    o.per_producer = total / producers;
    // Alternate tiny and roomy pools so producers both starve and run free.
    static constexpr size_t kCapacities[] = {2, 7, 64, 4096};
    o.pool_capacity = kCapacities[producers % 4];
    SCOPED_TRACE("producers=" + std::to_string(producers) +
                 " capacity=" + std::to_string(o.pool_capacity));
    ExpectExactDelivery(o, RunRawQueue(o));
  }
}

TEST(TimeStampMpscQueueStressTest, PreemptedProducersAreAwaitedNotSkipped) {
  struct sigaction action = {};
  struct sigaction previous = {};
  action.sa_handler = PauseHandler;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);
  g_signals_handled.store(0);
  int64_t slow_polls = 0;
  for (int producers : {2, 3, 5}) {
    RawRunOptions o;
    o.producers = producers;
    o.per_producer = Scaled(300'000) / producers;
    o.pool_capacity = producers == 3 ? 3 : 256;
    o.random_pauses = true;
    o.signal_pauses = true;
    SCOPED_TRACE("producers=" + std::to_string(producers));
    const RawRunResult r = RunRawQueue(o);
    ExpectExactDelivery(o, r);
    slow_polls += r.slow_polls;
  }
  ASSERT_EQ(sigaction(SIGUSR1, &previous, nullptr), 0);
  // Evidence only (scheduling dependent, never asserted).
  std::printf("  %lld pause signals handled, %lld non-empty polls took > 20 us\n",
              static_cast<long long>(g_signals_handled.load()), static_cast<long long>(slow_polls));
}

// ---------------------------------------------------------------------------
// TimeStampChannels + RecorderThread.

struct ChannelRun {
  ChannelOptions options;
  int workers = 4;
  int64_t per_worker = 1000;
  bool random_pauses = false;
};

std::string Describe(const ChannelRun& run) {
  return std::string(run.options.queue == QueueKind::kLibrary ? "kLibrary"
                     : run.options.mpsc_batched               ? "kMpsc(batch)"
                                                              : "kMpsc(record)") +
         " maxQs=" + std::to_string(run.options.max_qs) +
         " qPerWorker=" + std::to_string(run.options.q_per_worker) +
         " pending=" + std::to_string(run.options.max_pending_per_worker) +
         (run.options.overflow == OverflowPolicy::kDrop ? " drop" : " block") +
         " workers=" + std::to_string(run.workers);
}

int Lanes(const ChannelOptions& o) { return o.max_qs > 0 ? o.max_qs : o.q_per_worker; }

struct ChannelResult {
  uint64_t attempted = 0;
  uint64_t sent = 0;
  uint64_t dropped = 0;
  uint64_t blocked = 0;
  uint64_t delivered = 0;
  uint64_t consumed = 0;
};

// Sends per_worker records from each worker thread; record seq is the
// worker's count of accepted sends, so lanes stay exact under kDrop too.
ChannelResult RunChannels(const ChannelRun& run) {
  ChannelResult result;
  auto created = TimeStampChannels::Create(run.options, run.workers);
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return result;
  TimeStampChannels& channels = **created;
  const bool batched = run.options.queue == QueueKind::kMpsc && run.options.mpsc_batched;
  VerifyingSink sink(run.workers, Lanes(run.options),
                     batched ? channels.producer(0).batch_capacity() : 1);
  RecorderThread recorder(channels, sink);
  recorder.Start();
  std::vector<std::thread> workers;
  std::vector<uint64_t> attempted(static_cast<size_t>(run.workers));
  for (int w = 0; w < run.workers; ++w) {
    workers.emplace_back([&, w] {
      TimeStampProducer& producer = channels.producer(w);
      std::mt19937 rng(static_cast<uint32_t>(w) * 13 + 5);
      for (int64_t i = 0; i < run.per_worker; ++i) {
        if (run.random_pauses) RandomPause(rng);
        const auto seq = static_cast<int64_t>(producer.sent());
        const TimeStamp ts = MakeRecord(w, seq);
        const bool accepted = producer.Send(ts.start, ts.end, ts.records, ts.bytes);
        if (accepted != (producer.sent() == static_cast<uint64_t>(seq) + 1)) {
          ADD_FAILURE() << "Send returned " << accepted << " but sent() moved to "
                        << producer.sent();
        }
        if (run.random_pauses) RandomPause(rng);
      }
      attempted[static_cast<size_t>(w)] = static_cast<uint64_t>(run.per_worker);
    });
  }
  for (auto& t : workers) t.join();
  recorder.StopAndDrain();

  const DeliveryChecker& checker = sink.checker();
  EXPECT_EQ(checker.errors(), 0) << checker.first_error();
  EXPECT_EQ(sink.bad_batches(), 0);
  EXPECT_GE(sink.ticks(), 1) << "StopAndDrain must deliver a final Tick";
  for (int w = 0; w < run.workers; ++w) {
    const TimeStampProducer& producer = channels.producer(w);
    EXPECT_EQ(producer.sent() + producer.dropped(), attempted[static_cast<size_t>(w)])
        << "worker " << w << ": sent + dropped != attempted";
    EXPECT_EQ(checker.count(w), producer.sent()) << "worker " << w << ": delivered != sent";
    result.sent += producer.sent();
  }
  for (uint64_t a : attempted) result.attempted += a;
  result.dropped = channels.dropped();
  result.blocked = channels.blocked();
  result.delivered = checker.total();
  result.consumed = recorder.consumed();
  EXPECT_EQ(result.consumed, result.delivered) << "RecorderThread::consumed() disagrees";
  return result;
}

std::vector<ChannelRun> Topologies(QueueKind kind, OverflowPolicy overflow, int64_t per_worker) {
  std::vector<ChannelRun> runs;
  struct Shape {
    int max_qs;
    int q_per_worker;
    size_t pending;
  };
  for (const Shape s :
       {Shape{0, 1, 4}, Shape{0, 10, 16}, Shape{1, 10, 5}, Shape{1, 10, 64}, Shape{3, 10, 2}}) {
    ChannelRun run;
    run.options.queue = kind;
    run.options.overflow = overflow;
    run.options.max_qs = s.max_qs;
    run.options.q_per_worker = s.q_per_worker;
    run.options.max_pending_per_worker = s.pending;
    run.workers = s.max_qs == 1 ? 5 : 3;
    run.per_worker = per_worker / run.workers;
    runs.push_back(run);
  }
  return runs;
}

void RunBlockingTopologies(QueueKind kind) {
  for (const ChannelRun& run : Topologies(kind, OverflowPolicy::kBlock, Scaled(1'200'000))) {
    SCOPED_TRACE(Describe(run));
    const ChannelResult r = RunChannels(run);
    EXPECT_EQ(r.dropped, 0u);
    EXPECT_EQ(r.sent, r.attempted);
    EXPECT_EQ(r.delivered, r.attempted);
    // The bound is tiny, so producers must have hit it (and blocked) often.
    EXPECT_GT(r.blocked, 0u);
    std::printf("  %s: %llu delivered, %llu blocked sends\n", Describe(run).c_str(),
                static_cast<unsigned long long>(r.delivered),
                static_cast<unsigned long long>(r.blocked));
  }
}

TEST(TimeStampChannelsStressTest, MpscBlockingDeliversEveryRecordOnceInOrder) {
  RunBlockingTopologies(QueueKind::kMpsc);
}

TEST(TimeStampChannelsStressTest, LibraryBlockingDeliversEveryRecordOnceInOrder) {
  RunBlockingTopologies(QueueKind::kLibrary);
}

void RunDroppingTopologies(QueueKind kind) {
  for (const ChannelRun& run : Topologies(kind, OverflowPolicy::kDrop, Scaled(3'000'000))) {
    SCOPED_TRACE(Describe(run));
    const ChannelResult r = RunChannels(run);
    EXPECT_EQ(r.sent + r.dropped, r.attempted);
    EXPECT_EQ(r.delivered, r.sent);
    EXPECT_EQ(r.blocked, 0u);
    std::printf("  %s: %llu sent, %llu dropped\n", Describe(run).c_str(),
                static_cast<unsigned long long>(r.sent),
                static_cast<unsigned long long>(r.dropped));
  }
}

TEST(TimeStampChannelsStressTest, MpscDropPolicyCountsEveryRecord) {
  RunDroppingTopologies(QueueKind::kMpsc);
}

TEST(TimeStampChannelsStressTest, LibraryDropPolicyCountsEveryRecord) {
  RunDroppingTopologies(QueueKind::kLibrary);
}

TEST(TimeStampChannelsStressTest, MpscPerRecordVariantBlockingDeliversEveryRecordOnceInOrder) {
  for (ChannelRun run : Topologies(QueueKind::kMpsc, OverflowPolicy::kBlock, Scaled(300'000))) {
    run.options.mpsc_batched = false;
    SCOPED_TRACE(Describe(run));
    const ChannelResult r = RunChannels(run);
    EXPECT_EQ(r.delivered, r.attempted);
  }
}

// Issue 14: every legal pending bound keeps the pipeline moving. The whole
// range of small bounds (and a few large ones), both topologies, one and two
// writers, through the real RecorderThread: every record arrives exactly once
// and in lane order. Asserts completion and counts, never time.
TEST(TimeStampChannelsStressTest, EveryPendingBoundCompletes) {
  std::vector<size_t> bounds;
  for (size_t b = 2; b <= 80; ++b) bounds.push_back(b);
  for (size_t b : {100, 127, 128, 129, 255, 256, 257, 1000, 4096, 65536}) bounds.push_back(b);
  for (size_t pending : bounds) {
    for (int workers : {1, 2}) {
      for (int max_qs : {0, 1}) {
        ChannelRun run;
        run.options.queue = QueueKind::kMpsc;
        run.options.max_qs = max_qs;
        run.options.max_pending_per_worker = pending;
        run.workers = workers;
        run.per_worker = Scaled(5'000);
        SCOPED_TRACE(Describe(run));
        const ChannelResult r = RunChannels(run);
        EXPECT_EQ(r.delivered, r.attempted);
        EXPECT_EQ(r.dropped, 0u);
      }
    }
  }
}

TEST(TimeStampChannelsStressTest, RandomlyPausedProducersOnOneSharedQueue) {
  for (int variant = 0; variant < 3; ++variant) {
    for (OverflowPolicy overflow : {OverflowPolicy::kBlock, OverflowPolicy::kDrop}) {
      ChannelRun run;
      run.options.queue = variant == 2 ? QueueKind::kLibrary : QueueKind::kMpsc;
      run.options.mpsc_batched = variant == 0;
      run.options.overflow = overflow;
      run.options.max_qs = 1;
      run.options.max_pending_per_worker = 8;
      run.workers = 4;
      run.per_worker = Scaled(200'000) / run.workers;
      run.random_pauses = true;
      SCOPED_TRACE(Describe(run));
      const ChannelResult r = RunChannels(run);
      EXPECT_EQ(r.sent + r.dropped, r.attempted);
      EXPECT_EQ(r.delivered, r.sent);
      if (overflow == OverflowPolicy::kBlock) {
        EXPECT_EQ(r.delivered, r.attempted);
      }
    }
  }
}

}  // namespace
}  // namespace perld
