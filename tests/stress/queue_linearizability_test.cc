// Linearizability of TimeStampMpscQueue: a Wing & Gong checker
// (linearizability_checker.h) is first tested against hand-made and random
// histories (cross-checked by brute force), then fed thousands of small
// concurrent histories recorded from the real queue, with fresh nodes and with
// nodes recycled through a tiny TimeStampNodePool, and from a deliberately
// broken queue that it must reject.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/core/cpu_relax.h"
#include "daemon/core/time_stamp.h"
#include "daemon/core/timestamp_mpsc_queue.h"
#include "daemon/core/timestamp_node_pool.h"
#include "tests/stress/linearizability_checker.h"
#include "tests/stress/stress_scale.h"

namespace perld::stress {
namespace {

int Scaled(int release_iterations) {
  return static_cast<int>(ScaledCount(release_iterations, 0.5, 1));
}

// ---------------------------------------------------------------------------
// The checker on hand-made histories. Times are written as small integers;
// each operation is [invoke, response].

QueueOp A(int t, int64_t v, uint64_t inv, uint64_t res) { return QueueOp::Add(t, v, inv, res); }
QueueOp P(int t, int64_t v, uint64_t inv, uint64_t res) { return QueueOp::Poll(t, v, inv, res); }
QueueOp E(int t, uint64_t inv, uint64_t res) { return QueueOp::PollEmpty(t, inv, res); }

void ExpectLinearizable(const History& h) {
  const CheckResult r = CheckFifoLinearizable(h);
  EXPECT_TRUE(r.linearizable) << r.reason << "\n" << FormatHistory(h);
  EXPECT_EQ(r.best_order.size(), h.size());
}

void ExpectNotLinearizable(const History& h) {
  const CheckResult r = CheckFifoLinearizable(h);
  EXPECT_FALSE(r.linearizable) << FormatHistory(h);
  EXPECT_FALSE(r.reason.empty());
}

TEST(LinearizabilityCheckerTest, AcceptsEmptyAndSequentialFifoHistories) {
  ExpectLinearizable({});
  ExpectLinearizable({E(0, 1, 2)});
  ExpectLinearizable({A(1, 10, 1, 2), A(1, 20, 3, 4), P(0, 10, 5, 6), P(0, 20, 7, 8), E(0, 9, 10)});
}

TEST(LinearizabilityCheckerTest, AcceptsOverlappingAddsPolledInEitherOrder) {
  // add(1) and add(2) overlap, so either may be first.
  ExpectLinearizable({A(1, 1, 1, 4), A(2, 2, 2, 3), P(0, 1, 5, 6), P(0, 2, 7, 8)});
  ExpectLinearizable({A(1, 1, 1, 4), A(2, 2, 2, 3), P(0, 2, 5, 6), P(0, 1, 7, 8)});
}

TEST(LinearizabilityCheckerTest, RejectsFifoOrderViolation) {
  // add(1) returned before add(2) was invoked, yet 2 came out first.
  ExpectNotLinearizable({A(1, 1, 1, 2), A(2, 2, 3, 4), P(0, 2, 5, 6), P(0, 1, 7, 8)});
  // The same, by a single producer (per-producer order).
  ExpectNotLinearizable({A(1, 1, 1, 2), A(1, 2, 3, 4), P(0, 2, 5, 6)});
}

TEST(LinearizabilityCheckerTest, RejectsPollEmptyWhileACompletedAddIsUnconsumed) {
  ExpectNotLinearizable({A(1, 7, 1, 2), E(0, 3, 4)});
  // Vyukov's original pop reports empty here: producer 1 exchanged the tail but
  // has not linked yet (its add is still running), producer 2's later add has
  // completed. Not linearizable: add(2) finished before the poll began.
  ExpectNotLinearizable({A(1, 1, 1, 20), A(2, 2, 2, 3), E(0, 4, 5), P(0, 1, 21, 22)});
  // ...whereas a poll waiting for the link (what TimeStampMpscQueue does) is.
  ExpectLinearizable({A(1, 1, 1, 20), A(2, 2, 2, 3), P(0, 1, 4, 21), P(0, 2, 22, 23)});
}

TEST(LinearizabilityCheckerTest, AcceptsPollEmptyConcurrentWithAdd) {
  ExpectLinearizable({A(1, 7, 1, 4), E(0, 2, 3), P(0, 7, 5, 6)});
  ExpectLinearizable({A(1, 7, 2, 3), E(0, 1, 4), P(0, 7, 5, 6)});
}

TEST(LinearizabilityCheckerTest, RejectsValueReturnedTwice) {
  ExpectNotLinearizable({A(1, 5, 1, 2), P(0, 5, 3, 4), P(0, 5, 5, 6)});
  const CheckResult r = CheckFifoLinearizable({A(1, 5, 1, 2), P(0, 5, 3, 4), P(0, 5, 5, 6)});
  EXPECT_NE(r.reason.find("polled 2 times but added 1"), std::string::npos) << r.reason;
  // A value added twice may be returned twice.
  ExpectLinearizable({A(1, 5, 1, 2), A(1, 5, 3, 4), P(0, 5, 5, 6), P(0, 5, 7, 8)});
}

TEST(LinearizabilityCheckerTest, RejectsValueNeverAdded) {
  ExpectNotLinearizable({A(1, 5, 1, 2), P(0, 6, 3, 4)});
  const CheckResult r = CheckFifoLinearizable({P(0, 6, 3, 4)});
  EXPECT_FALSE(r.linearizable);
  EXPECT_NE(r.reason.find("never added"), std::string::npos) << r.reason;
}

TEST(LinearizabilityCheckerTest, RejectsPollOfAValueAddedAfterThePollReturned) {
  ExpectNotLinearizable({P(0, 5, 1, 2), A(1, 5, 3, 4)});
  // Overlapping is fine.
  ExpectLinearizable({P(0, 5, 1, 3), A(1, 5, 2, 4)});
}

TEST(LinearizabilityCheckerTest, RejectsLostValueFollowedByEmpty) {
  // Two completed adds, one poll, then empty: a value vanished.
  ExpectNotLinearizable({A(1, 1, 1, 2), A(2, 2, 3, 4), P(0, 1, 5, 6), E(0, 7, 8)});
}

TEST(LinearizabilityCheckerTest, FindsOrdersThatNeedBacktracking) {
  // Three overlapping adds; the polls force the order 3, 1, 2, and the empty
  // poll overlapping everything must go first.
  ExpectLinearizable({E(0, 1, 9), A(1, 1, 2, 8), A(2, 2, 3, 8), A(3, 3, 4, 7), P(0, 3, 10, 11),
                      P(0, 1, 12, 13), P(0, 2, 14, 15)});
  // Same, but add(1) finished before add(3) began: 3 cannot precede 1.
  ExpectNotLinearizable({A(1, 1, 2, 3), A(2, 2, 4, 8), A(3, 3, 5, 7), P(0, 3, 10, 11),
                         P(0, 1, 12, 13), P(0, 2, 14, 15)});
}

TEST(LinearizabilityCheckerTest, ReportsMalformedAndOversizedHistories) {
  EXPECT_FALSE(CheckFifoLinearizable({A(1, 1, 3, 3)}).linearizable);
  History big;
  for (uint64_t i = 0; i < kMaxOps + 1; ++i) big.push_back(A(1, 1, 2 * i + 1, 2 * i + 2));
  const CheckResult r = CheckFifoLinearizable(big);
  EXPECT_FALSE(r.linearizable);
  EXPECT_NE(r.reason.find("limit"), std::string::npos);
}

TEST(LinearizabilityCheckerTest, HandlesSixtyFourOperations) {
  History h;
  uint64_t t = 1;
  for (int64_t v = 0; v < 32; ++v, t += 2) h.push_back(A(1, v, t, t + 1));
  for (int64_t v = 0; v < 32; ++v, t += 2) h.push_back(P(0, v, t, t + 1));
  ExpectLinearizable(h);
  std::swap(h[40].value, h[41].value);
  ExpectNotLinearizable(h);
}

// Reference decision procedure: every permutation.
bool BruteForceLinearizable(const History& h) {
  std::vector<size_t> perm(h.size());
  std::iota(perm.begin(), perm.end(), 0);
  do {
    bool ok = true;
    for (size_t i = 0; i < perm.size() && ok; ++i) {
      for (size_t j = i + 1; j < perm.size() && ok; ++j) {
        if (h[perm[j]].response < h[perm[i]].invoke) ok = false;  // real time violated
      }
    }
    std::deque<int64_t> q;
    for (size_t i = 0; i < perm.size() && ok; ++i) {
      const QueueOp& op = h[perm[i]];
      if (op.kind == QueueOp::Kind::kAdd) {
        q.push_back(op.value);
      } else if (op.empty) {
        ok = q.empty();
      } else if (q.empty() || q.front() != op.value) {
        ok = false;
      } else {
        q.pop_front();
      }
    }
    if (ok) return true;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return false;
}

// A random history: a legal sequential FIFO run whose operations get random
// intervals around their linearization points, then (half the time) one
// result corrupted, which may or may not break linearizability.
History RandomHistory(std::mt19937_64& rng) {
  const int n = std::uniform_int_distribution<int>(1, 7)(rng);
  std::deque<int64_t> model;
  History h;
  const uint64_t span = 4 * static_cast<uint64_t>(n) + 4;
  // Linearization points 10, 20, ...; intervals stretch up to `span` points.
  for (int i = 0; i < n; ++i) {
    const uint64_t point = 10 * (static_cast<uint64_t>(i) + 1);
    const uint64_t before = std::uniform_int_distribution<uint64_t>(1, span * 3)(rng);
    const uint64_t after = std::uniform_int_distribution<uint64_t>(1, span * 3)(rng);
    const uint64_t invoke = point > before ? point - before : 1;
    const uint64_t response = point + after;
    const int thread = std::uniform_int_distribution<int>(0, 2)(rng);
    if (std::bernoulli_distribution(0.55)(rng)) {
      const int64_t v = std::uniform_int_distribution<int64_t>(1, 3)(rng);
      model.push_back(v);
      h.push_back(A(thread, v, invoke, response));
    } else if (model.empty()) {
      h.push_back(E(thread, invoke, response));
    } else {
      h.push_back(P(thread, model.front(), invoke, response));
      model.pop_front();
    }
  }
  if (std::bernoulli_distribution(0.7)(rng)) {
    QueueOp& op = h[std::uniform_int_distribution<size_t>(0, h.size() - 1)(rng)];
    if (op.kind == QueueOp::Kind::kPoll && std::bernoulli_distribution(0.3)(rng)) {
      op.empty = !op.empty;
      op.value = 1;
    } else {
      op.value = std::uniform_int_distribution<int64_t>(1, 3)(rng);
    }
  }
  // Make every instant distinct (the real clock never repeats) without
  // changing the order between different instants.
  std::vector<std::pair<uint64_t, size_t>> instants;
  for (size_t i = 0; i < h.size(); ++i) {
    instants.push_back({h[i].invoke * 2, 2 * i});            // invokes before responses
    instants.push_back({h[i].response * 2 + 1, 2 * i + 1});  // at the same instant
  }
  std::shuffle(instants.begin(), instants.end(), rng);
  std::stable_sort(instants.begin(), instants.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t k = 0; k < instants.size(); ++k) {
    const size_t i = instants[k].second / 2;
    (instants[k].second % 2 == 0 ? h[i].invoke : h[i].response) = k + 1;
  }
  return h;
}

TEST(LinearizabilityCheckerTest, AgreesWithBruteForceOnRandomHistories) {
  std::mt19937_64 rng(20260727);
  int accepted = 0;
  int rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    const History h = RandomHistory(rng);
    const CheckResult r = CheckFifoLinearizable(h);
    const bool expected = BruteForceLinearizable(h);
    ASSERT_EQ(r.linearizable, expected) << "history " << i << "\n" << FormatHistory(h);
    (expected ? accepted : rejected)++;
  }
  // Both verdicts must be exercised for the comparison to mean anything.
  EXPECT_GT(accepted, 400);
  EXPECT_GT(rejected, 400);
}

// ---------------------------------------------------------------------------
// Recording concurrent histories.

// A small random pause at an operation boundary: nothing, a short spin, a
// yield, or (rarely) a sleep, so threads interleave differently every run.
void RandomPause(std::mt19937& rng) {
  const int dice = std::uniform_int_distribution<int>(0, 99)(rng);
  if (dice < 50) return;
  if (dice < 85) {
    const int spins = std::uniform_int_distribution<int>(1, 64)(rng);
    for (int i = 0; i < spins; ++i) CpuRelax();
  } else if (dice < 97) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(dice - 96));
  }
}

// Occasionally yields inside a recorded interval (after the invocation was
// stamped, before or after the real call). Widening an interval keeps the
// history truthful (the call still happened inside it), and lets the other
// threads run in the middle of it, so recorded operations overlap even when
// the machine gives this test only one core at a time.
void MaybeYieldInside(std::mt19937& rng) {
  if (std::uniform_int_distribution<int>(0, 99)(rng) < 12) std::this_thread::yield();
}

constexpr int kMaxProducers = 4;
// Bound on waits inside one iteration (a producer waiting for a node, the
// consumer waiting for the last values); exceeding it fails the test.
constexpr int64_t kWaitLimit = 50'000'000;

struct Plan {
  int adds[kMaxProducers] = {};
  int polls = 0;
  int total_adds = 0;
  uint32_t seed = 0;
};

struct CampaignResult {
  int iterations = 0;
  int violations = 0;
  int overlapping = 0;  // histories where some add overlapped some poll
  size_t max_ops = 0;
  std::string first_violation;
  bool wait_limit_hit = false;
};

// Adapter interface used by RunCampaign (all node based):
//   void BeginIteration(int producers)      main thread, workers parked
//   TimeStampNode* Acquire(int producer)    producer thread; nullptr: retry later
//   void Add(TimeStampNode*)                producer thread
//   TimeStampNode* Poll()                   consumer thread
//   void Release(TimeStampNode*)            consumer thread
//   void EndIteration()                     main thread, workers parked
template <class Adapter>
CampaignResult RunCampaign(Adapter& adapter, int producers, int iterations, uint64_t seed,
                           bool stop_at_first_violation) {
  CampaignResult result;
  HistoryClock* clock = nullptr;
  std::unique_ptr<HistoryClock> clock_holder;
  std::vector<std::unique_ptr<ThreadLog>> logs;
  Plan plan;
  std::atomic<bool> stop{false};
  std::atomic<bool> wait_limit_hit{false};
  std::barrier sync(producers + 2);  // producers, consumer, main
  // After the barrier, workers also wait (yielding, bounded) until every one
  // of them is runnable, so the recorded operations really overlap instead of
  // running in the order the barrier happened to wake the threads.
  std::atomic<int> ready{0};
  auto gate = [&] {
    ready.fetch_add(1);
    for (int64_t w = 0; ready.load() < producers + 1 && w < kWaitLimit; ++w) {
      std::this_thread::yield();
    }
  };

  // Logs are rebuilt per iteration with a fresh clock (by main, while parked).
  auto reset_logs = [&] {
    clock_holder = std::make_unique<HistoryClock>();
    clock = clock_holder.get();
    logs.clear();
    for (int t = 0; t <= producers; ++t) {
      logs.push_back(std::make_unique<ThreadLog>(t, clock));
      logs.back()->Reserve(16);
    }
  };
  reset_logs();

  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (;;) {
        sync.arrive_and_wait();
        if (stop.load(std::memory_order_relaxed)) return;
        gate();
        std::mt19937 rng(plan.seed * 31 + static_cast<uint32_t>(p) + 1);
        ThreadLog& log = *logs[static_cast<size_t>(p) + 1];
        for (int k = 0; k < plan.adds[p]; ++k) {
          const int64_t value = (p + 1) * 100 + k;
          RandomPause(rng);
          auto* node = adapter.Acquire(p);
          for (int64_t w = 0; node == nullptr && w < kWaitLimit; ++w) {
            std::this_thread::yield();
            node = adapter.Acquire(p);
          }
          if (node == nullptr) {
            wait_limit_hit.store(true);
            break;
          }
          adapter.Fill(node, value);
          log.RecordAdd(value, [&] {
            MaybeYieldInside(rng);
            adapter.Add(node);
            MaybeYieldInside(rng);
          });
        }
        sync.arrive_and_wait();
      }
    });
  }
  threads.emplace_back([&] {
    for (;;) {
      sync.arrive_and_wait();
      if (stop.load(std::memory_order_relaxed)) return;
      gate();
      std::mt19937 rng(plan.seed * 31);
      ThreadLog& log = *logs[0];
      int received = 0;
      auto poll = [&](int64_t* value) {
        auto* node = adapter.Poll();
        if (node == nullptr) return false;
        *value = adapter.Value(node);
        adapter.Release(node);
        return true;
      };
      auto recorded_poll = [&](int64_t* value) {
        MaybeYieldInside(rng);
        const bool got = poll(value);
        MaybeYieldInside(rng);
        return got;
      };
      for (int j = 0; j < plan.polls; ++j) {
        RandomPause(rng);
        int64_t value = 0;
        if (log.RecordPoll(recorded_poll, &value)) ++received;
      }
      // Unrecorded drain so the next iteration starts empty. Dropping trailing
      // operations of the only consumer keeps a linearizable history
      // linearizable, so the recorded part is still checked soundly.
      for (int64_t w = 0; received < plan.total_adds && w < kWaitLimit; ++w) {
        int64_t value = 0;
        if (poll(&value)) {
          ++received;
        } else {
          std::this_thread::yield();
        }
      }
      if (received != plan.total_adds) wait_limit_hit.store(true);
      sync.arrive_and_wait();
    }
  });

  std::mt19937_64 rng(seed);
  for (int it = 0; it < iterations; ++it) {
    plan = Plan{};
    plan.seed = static_cast<uint32_t>(rng());
    const int max_adds = producers >= 4 ? 2 : 3;
    for (int p = 0; p < producers; ++p) {
      plan.adds[p] = std::uniform_int_distribution<int>(1, max_adds)(rng);
      plan.total_adds += plan.adds[p];
    }
    plan.polls = std::uniform_int_distribution<int>(2, 6)(rng);
    reset_logs();
    ready.store(0);
    adapter.BeginIteration(producers);
    sync.arrive_and_wait();  // go
    sync.arrive_and_wait();  // done
    adapter.EndIteration();
    ++result.iterations;
    if (wait_limit_hit.load()) {
      result.wait_limit_hit = true;
      break;
    }
    std::vector<const ThreadLog*> parts;
    for (const auto& log : logs) parts.push_back(log.get());
    const History history = MergeLogs(parts);
    result.max_ops = std::max(result.max_ops, history.size());
    bool overlap = false;
    for (const QueueOp& a : history) {
      for (const QueueOp& b : history) {
        if (a.kind == QueueOp::Kind::kAdd && b.kind == QueueOp::Kind::kPoll &&
            a.invoke < b.response && b.invoke < a.response) {
          overlap = true;
        }
      }
    }
    result.overlapping += overlap ? 1 : 0;
    const CheckResult check = CheckFifoLinearizable(history);
    if (!check.linearizable) {
      if (result.violations++ == 0) {
        result.first_violation = "iteration " + std::to_string(it) + " (plan seed " +
                                 std::to_string(plan.seed) + "): " + check.reason + "\nhistory:\n" +
                                 FormatHistory(history);
      }
      if (stop_at_first_violation) break;
    }
  }
  stop.store(true, std::memory_order_relaxed);
  sync.arrive_and_wait();
  for (auto& t : threads) t.join();
  return result;
}

// Fresh (never recycled) nodes, one queue per iteration.
class FreshNodeAdapter {
 public:
  static void Fill(TimeStampNode* node, int64_t value) {
    node->ts = TimeStamp{value, value + 1, 1, static_cast<int32_t>(value)};
  }
  static int64_t Value(const TimeStampNode* node) { return node->ts.start; }
  void BeginIteration(int producers) {
    queue_ = std::make_unique<TimeStampMpscQueue>();
    nodes_.clear();
    for (int p = 0; p < producers; ++p) {
      nodes_.push_back(std::make_unique<TimeStampNode[]>(kPerProducer));
      next_[p] = 0;
    }
  }
  TimeStampNode* Acquire(int p) { return &nodes_[static_cast<size_t>(p)][next_[p]++]; }
  void Add(TimeStampNode* node) { queue_->Add(node); }
  TimeStampNode* Poll() { return queue_->Poll(); }
  void Release(TimeStampNode*) {}
  void EndIteration() {}

 private:
  static constexpr int kPerProducer = 4;
  std::unique_ptr<TimeStampMpscQueue> queue_;
  std::vector<std::unique_ptr<TimeStampNode[]>> nodes_;
  int next_[kMaxProducers] = {};
};

// Nodes recycled through one tiny pool per producer that lives for the whole
// campaign; one queue for the whole campaign too, so the stub, recycled nodes
// and the pool's return path all cross iteration boundaries.
class PooledNodeAdapter {
 public:
  static void Fill(TimeStampNode* node, int64_t value) {
    node->ts = TimeStamp{value, value + 1, 1, static_cast<int32_t>(value)};
  }
  static int64_t Value(const TimeStampNode* node) { return node->ts.start; }
  PooledNodeAdapter(int producers, size_t capacity) {
    for (int p = 0; p < producers; ++p) {
      pools_.push_back(std::make_unique<TimeStampNodePool>(capacity));
      seen_.emplace_back();
    }
  }
  void BeginIteration(int) {}
  TimeStampNode* Acquire(int p) {
    TimeStampNode* node = pools_[static_cast<size_t>(p)]->Acquire();
    if (node != nullptr && !seen_[static_cast<size_t>(p)].insert(node).second) ++reused_[p];
    return node;
  }
  void Add(TimeStampNode* node) { queue_.Add(node); }
  TimeStampNode* Poll() { return queue_.Poll(); }
  void Release(TimeStampNode* node) { TimeStampNodePool::Release(node); }
  void EndIteration() {}

  int64_t reused() const { return std::accumulate(std::begin(reused_), std::end(reused_), 0); }
  size_t allocated() const {
    size_t n = 0;
    for (const auto& pool : pools_) n += pool->allocated();
    return n;
  }

 private:
  // Pools are declared first so they outlive the queue that holds their nodes.
  std::vector<std::unique_ptr<TimeStampNodePool>> pools_;
  TimeStampMpscQueue queue_;
  std::vector<std::set<TimeStampNode*>> seen_;
  int64_t reused_[kMaxProducers] = {};
};

// The default channel's shape: batch nodes through TimeStampBatchQueue,
// recycled whole through one tiny TimeStampBatchPool per producer (its return
// ring), queue and pools living for the whole campaign. A history value is one
// batch: the node carries 1..3 entries, all stamped with the value, and the
// consumer checks every entry (a torn or recycled-too-early batch shows up as
// a mismatch, counted in corrupt()).
class BatchNodeAdapter {
 public:
  BatchNodeAdapter(int producers, size_t capacity) {
    for (int p = 0; p < producers; ++p) {
      pools_.push_back(std::make_unique<TimeStampBatchPool>(capacity, nullptr));
      seen_.emplace_back();
    }
  }
  void BeginIteration(int) {}
  TimeStampBatchNode* Acquire(int p) {
    TimeStampBatchNode* node = pools_[static_cast<size_t>(p)]->Acquire();
    if (node != nullptr) {
      node->origin = pools_[static_cast<size_t>(p)].get();
      if (!seen_[static_cast<size_t>(p)].insert(node).second) ++reused_[p];
    }
    return node;
  }
  static void Fill(TimeStampBatchNode* node, int64_t value) {
    const uint32_t n = 1 + static_cast<uint32_t>(value % 3);
    for (uint32_t i = 0; i < n; ++i) {
      node->ts[i] = TimeStamp{value, value + i, 1, static_cast<int32_t>(value)};
      node->count.store(i + 1, std::memory_order_release);
    }
  }
  int64_t Value(const TimeStampBatchNode* node) {
    const int64_t value = node->ts[0].start;
    const uint32_t n = node->count.load(std::memory_order_acquire);
    if (n != 1 + static_cast<uint32_t>(value % 3)) ++corrupt_;
    for (uint32_t i = 0; i < n; ++i) {
      if (node->ts[i].start != value || node->ts[i].end != value + i) ++corrupt_;
    }
    return value;
  }
  void Add(TimeStampBatchNode* node) { queue_.Add(node); }
  TimeStampBatchNode* Poll() { return queue_.Poll(); }
  void Release(TimeStampBatchNode* node) {
    static_cast<TimeStampBatchPool*>(node->origin)->Release(node);
  }
  void EndIteration() {}

  int64_t reused() const { return std::accumulate(std::begin(reused_), std::end(reused_), 0); }
  int64_t corrupt() const { return corrupt_; }
  size_t allocated() const {
    size_t n = 0;
    for (const auto& pool : pools_) n += pool->allocated();
    return n;
  }

 private:
  std::vector<std::unique_ptr<TimeStampBatchPool>> pools_;
  TimeStampBatchQueue queue_;
  std::vector<std::set<TimeStampBatchNode*>> seen_;
  int64_t reused_[kMaxProducers] = {};
  int64_t corrupt_ = 0;  // consumer thread; read by main after the campaign
};

// A deliberately broken queue (LIFO under a mutex) the harness must catch.
class LifoAdapter {
 public:
  static void Fill(TimeStampNode* node, int64_t value) {
    node->ts = TimeStamp{value, value + 1, 1, static_cast<int32_t>(value)};
  }
  static int64_t Value(const TimeStampNode* node) { return node->ts.start; }
  void BeginIteration(int producers) { fresh_.BeginIteration(producers); }
  TimeStampNode* Acquire(int p) { return fresh_.Acquire(p); }
  void Add(TimeStampNode* node) {
    std::lock_guard<std::mutex> lock(mu_);
    stack_.push_back(node);
  }
  TimeStampNode* Poll() {
    std::lock_guard<std::mutex> lock(mu_);
    if (stack_.empty()) return nullptr;
    TimeStampNode* node = stack_.back();
    stack_.pop_back();
    return node;
  }
  void Release(TimeStampNode*) {}
  void EndIteration() {}

 private:
  FreshNodeAdapter fresh_;
  std::mutex mu_;
  std::vector<TimeStampNode*> stack_;
};

// Returns the number of histories where an add overlapped a poll.
int ExpectNoViolation(const CampaignResult& r) {
  EXPECT_FALSE(r.wait_limit_hit) << "a wait exceeded its bound (lost node or record?)";
  EXPECT_EQ(r.violations, 0) << r.first_violation;
  std::printf("  %d histories (up to %zu ops), %d with an add overlapping a poll\n", r.iterations,
              r.max_ops, r.overlapping);
  return r.overlapping;
}

TEST(TimeStampMpscQueueLinearizabilityTest, RandomHistoriesWithFreshNodesAreLinearizable) {
  int overlapping = 0;
  for (int producers = 2; producers <= kMaxProducers; ++producers) {
    SCOPED_TRACE("producers=" + std::to_string(producers));
    FreshNodeAdapter adapter;
    overlapping +=
        ExpectNoViolation(RunCampaign(adapter, producers, Scaled(4000), 1000 + producers, true));
  }
  // The histories must actually be concurrent for the check to mean much.
  EXPECT_GT(overlapping, 0);
}

TEST(TimeStampMpscQueueLinearizabilityTest, RandomHistoriesWithRecycledPoolNodesAreLinearizable) {
  struct Config {
    size_t capacity;
  };
  // Capacity below the adds of one iteration: producers wait for nodes the
  // consumer polled moments ago, inside the recorded history.
  int overlapping = 0;
  for (const Config c : {Config{2}, Config{3}, Config{4}}) {
    for (int producers = 2; producers <= kMaxProducers; ++producers) {
      SCOPED_TRACE("producers=" + std::to_string(producers) +
                   " capacity=" + std::to_string(c.capacity));
      PooledNodeAdapter adapter(producers, c.capacity);
      overlapping += ExpectNoViolation(
          RunCampaign(adapter, producers, Scaled(1500), 2000 + producers * 10 + c.capacity, true));
      EXPECT_GT(adapter.reused(), 0) << "recycled nodes must appear in the histories";
      EXPECT_LE(adapter.allocated(), producers * c.capacity);
    }
  }
  EXPECT_GT(overlapping, 0);
}

TEST(TimeStampMpscQueueLinearizabilityTest, RandomHistoriesOfRecycledBatchNodesAreLinearizable) {
  int overlapping = 0;
  for (size_t capacity : {size_t{2}, size_t{3}}) {
    for (int producers = 2; producers <= kMaxProducers; ++producers) {
      SCOPED_TRACE("producers=" + std::to_string(producers) +
                   " capacity=" + std::to_string(capacity));
      BatchNodeAdapter adapter(producers, capacity);
      overlapping += ExpectNoViolation(
          RunCampaign(adapter, producers, Scaled(1500), 4000 + producers * 10 + capacity, true));
      EXPECT_EQ(adapter.corrupt(), 0) << "a batch was torn or recycled while in use";
      EXPECT_GT(adapter.reused(), 0) << "recycled nodes must appear in the histories";
      EXPECT_LE(adapter.allocated(), producers * capacity);
    }
  }
  EXPECT_GT(overlapping, 0);
}

TEST(TimeStampMpscQueueLinearizabilityTest, HarnessCatchesABrokenQueue) {
  LifoAdapter adapter;
  const CampaignResult r = RunCampaign(adapter, 2, Scaled(2000), 3000, true);
  EXPECT_FALSE(r.wait_limit_hit);
  EXPECT_GT(r.violations, 0) << "a LIFO queue passed " << r.iterations << " histories";
}

}  // namespace
}  // namespace perld::stress
