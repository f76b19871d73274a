#include "daemon/core/timestamp_mpsc_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace perld {
namespace {

TEST(TimeStampMpscQueueTest, EmptyQueuePollsNull) {
  TimeStampMpscQueue q;
  EXPECT_EQ(q.Poll(), nullptr);
  EXPECT_EQ(q.Poll(), nullptr);
}

TEST(TimeStampMpscQueueTest, ReturnsTheSameNodesInFifoOrder) {
  TimeStampMpscQueue q;
  std::vector<TimeStampNode> nodes(100);
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].ts = TimeStamp{static_cast<int64_t>(i), static_cast<int64_t>(i) + 7, 1, 10};
    q.Add(&nodes[i]);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    TimeStampNode* n = q.Poll();
    ASSERT_EQ(n, &nodes[i]) << "identity at " << i;
    EXPECT_EQ(n->ts.start, static_cast<int64_t>(i));
    EXPECT_EQ(n->ts.end, static_cast<int64_t>(i) + 7);
  }
  EXPECT_EQ(q.Poll(), nullptr);
}

TEST(TimeStampMpscQueueTest, InterleavedAddPollAcrossStubReinsertion) {
  // Single elements force the stub to be re-linked behind the last node on
  // every poll: the path that lets the last node be returned.
  TimeStampMpscQueue q;
  TimeStampNode a, b, c;
  for (int round = 0; round < 1000; ++round) {
    q.Add(&a);
    ASSERT_EQ(q.Poll(), &a);
    ASSERT_EQ(q.Poll(), nullptr);
    q.Add(&b);
    q.Add(&c);
    ASSERT_EQ(q.Poll(), &b);
    q.Add(&a);  // b was returned; a reused immediately
    ASSERT_EQ(q.Poll(), &c);
    ASSERT_EQ(q.Poll(), &a);
    ASSERT_EQ(q.Poll(), nullptr);
  }
}

TEST(TimeStampMpscQueueTest, ReturnedNodeIsReusableImmediately) {
  TimeStampMpscQueue q;
  TimeStampNode n;
  for (int i = 0; i < 10000; ++i) {
    n.ts.start = i;
    q.Add(&n);
    TimeStampNode* got = q.Poll();
    ASSERT_EQ(got, &n);
    ASSERT_EQ(got->ts.start, i);
  }
}

TEST(TimeStampMpscQueueTest, ClearDrainsInOrderAndCounts) {
  TimeStampMpscQueue q;
  std::vector<TimeStampNode> nodes(5);
  for (auto& n : nodes) q.Add(&n);
  std::vector<TimeStampNode*> seen;
  EXPECT_EQ(q.Clear([&](TimeStampNode* n) { seen.push_back(n); }), 5u);
  ASSERT_EQ(seen.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(seen[i], &nodes[i]);
}

TEST(TimeStampMpscQueueTest, MultiProducerDeliversEveryRecordOnceInPerProducerOrder) {
  for (int producers = 1; producers <= 8; ++producers) {
    constexpr int kPerProducer = 20000;
    TimeStampMpscQueue q;
    std::vector<std::unique_ptr<TimeStampNode[]>> nodes;
    for (int p = 0; p < producers; ++p)
      nodes.push_back(std::make_unique<TimeStampNode[]>(kPerProducer));
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        for (int i = 0; i < kPerProducer; ++i) {
          nodes[p][i].ts = TimeStamp{p, i, 1, 0};
          q.Add(&nodes[p][i]);
        }
      });
    }
    std::vector<int64_t> next(producers, 0);
    std::vector<char> seen(static_cast<size_t>(producers) * kPerProducer, 0);
    int64_t total = 0;
    while (total < static_cast<int64_t>(producers) * kPerProducer) {
      TimeStampNode* n = q.Poll();
      if (n == nullptr) {
        std::this_thread::yield();
        continue;
      }
      const int64_t p = n->ts.start;
      const int64_t i = n->ts.end;
      ASSERT_EQ(n, &nodes[p][i]);
      ASSERT_EQ(i, next[p]) << "per-producer order, producer " << p;
      ++next[p];
      ASSERT_EQ(seen[p * kPerProducer + i]++, 0) << "duplicate";
      ++total;
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(q.Poll(), nullptr) << producers << " producers";
  }
}

TEST(TimeStampMpscQueueTest, LeaveLastTakesOnlyNodesWithALinkedSuccessor) {
  TimeStampMpscQueue q;
  TimeStampNode a, b, c;
  EXPECT_EQ(q.Poll(PollMode::kLeaveLast), nullptr);
  q.Add(&a);
  EXPECT_EQ(q.Poll(PollMode::kLeaveLast), nullptr) << "a is the newest node: left in place";
  q.Add(&b);
  EXPECT_EQ(q.Poll(PollMode::kLeaveLast), &a);
  EXPECT_EQ(q.Poll(PollMode::kLeaveLast), nullptr);
  q.Add(&c);
  EXPECT_EQ(q.Poll(PollMode::kLeaveLast), &b);
  EXPECT_EQ(q.Poll(PollMode::kAll), &c) << "kAll takes the newest node too";
  EXPECT_EQ(q.Poll(PollMode::kAll), nullptr);
  q.Add(&a);
  EXPECT_EQ(q.Poll(PollMode::kLeaveLast), nullptr) << "stub behind nothing: still left";
  EXPECT_EQ(q.Poll(), &a);
}

TEST(TimeStampMpscQueueTest, LeaveLastThenAllDeliversEveryRecordInPerProducerOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 50000;
  TimeStampMpscQueue q;
  std::vector<std::unique_ptr<TimeStampNode[]>> nodes;
  for (int p = 0; p < kProducers; ++p) {
    nodes.push_back(std::make_unique<TimeStampNode[]>(kPerProducer));
  }
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        nodes[p][i].ts = TimeStamp{p, i, 1, 0};
        q.Add(&nodes[p][i]);
      }
      done.fetch_add(1);
    });
  }
  std::vector<int64_t> next(kProducers, 0);
  int64_t total = 0;
  auto take = [&](TimeStampNode* n) {
    ASSERT_EQ(n->ts.end, next[n->ts.start]++) << "per-producer order";
    ++total;
  };
  // Busy phase: leave-last polling only, as the recorder does under load.
  while (done.load() < kProducers) {
    if (TimeStampNode* n = q.Poll(PollMode::kLeaveLast)) take(n);
  }
  for (auto& t : threads) t.join();
  while (TimeStampNode* n = q.Poll(PollMode::kLeaveLast)) take(n);
  // At most the newest node is left; kAll takes it.
  while (TimeStampNode* n = q.Poll(PollMode::kAll)) take(n);
  EXPECT_EQ(total, int64_t{kProducers} * kPerProducer);
}

#if PERLD_CONTRACT_CHECKS
using TimeStampMpscQueueDeathTest = ::testing::Test;

TEST(TimeStampMpscQueueDeathTest, AddOfQueuedNodeNamesTheViolation) {
  EXPECT_DEATH(
      {
        TimeStampMpscQueue q;
        TimeStampNode n;
        q.Add(&n);
        q.Add(&n);
      },
      "Add of a node that is still in a queue");
}

TEST(TimeStampMpscQueueDeathTest, SecondConsumerNamesTheViolation) {
  EXPECT_DEATH(
      {
        TimeStampMpscQueue q;
        q.Poll();
        std::thread other([&] { q.Poll(); });
        other.join();
      },
      "second consumer");
}

TEST(TimeStampMpscQueueDeathTest, UseAfterClearNamesTheViolation) {
  EXPECT_DEATH(
      {
        TimeStampMpscQueue q;
        TimeStampNode n;
        q.Clear([](TimeStampNode*) {});
        q.Add(&n);
      },
      "use after clear");
  EXPECT_DEATH(
      {
        TimeStampMpscQueue q;
        q.Clear([](TimeStampNode*) {});
        q.Poll();
      },
      "use after clear");
}
#endif

}  // namespace
}  // namespace perld
