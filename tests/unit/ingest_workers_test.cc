#include "daemon/ingest/ingest_workers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace perld::ingest {
namespace {

// Every task posted from many threads runs exactly once, and the destructor
// runs what is still queued before it returns.
TEST(IngestWorkersTest, EveryPostedTaskRunsOnceAndStopDrainsTheQueue) {
  constexpr int kPosters = 4;
  constexpr int kTasks = 20000;
  std::vector<std::atomic<int>> runs(kPosters * kTasks);
  {
    IngestWorkers workers(2);
    std::vector<std::thread> posters;
    for (int p = 0; p < kPosters; ++p) {
      posters.emplace_back([&, p] {
        for (int i = 0; i < kTasks; ++i) {
          workers.Post([&runs, k = p * kTasks + i] { runs[k].fetch_add(1); });
        }
      });
    }
    for (std::thread& t : posters) t.join();
  }  // joined: everything queued has run
  for (size_t k = 0; k < runs.size(); ++k) ASSERT_EQ(runs[k].load(), 1) << "task " << k;
}

// A stream's pattern: each message's handler posts the next one (a read
// started at the end of a handler). The chain runs in order, one at a time,
// whatever worker picks each link, with everything the last link wrote
// visible to the next.
TEST(IngestWorkersTest, AChainOfPostsRunsInOrderOneAtATime) {
  constexpr int kChains = 8;
  constexpr int kLinks = 5000;
  struct Chain {
    std::vector<int> seen;  // written by whichever worker runs the link
    std::atomic<bool> running{false};
    std::atomic<bool> overlapped{false};
  };
  std::vector<std::unique_ptr<Chain>> chains;
  for (int c = 0; c < kChains; ++c) chains.push_back(std::make_unique<Chain>());
  std::atomic<int> finished{0};
  {
    IngestWorkers workers(3);
    std::function<void(Chain*, int)> link = [&](Chain* chain, int i) {
      if (chain->running.exchange(true)) chain->overlapped = true;
      chain->seen.push_back(i);
      chain->running = false;
      if (i + 1 < kLinks) {
        workers.Post([&, chain, i] { link(chain, i + 1); });
      } else {
        finished.fetch_add(1);
      }
    };
    for (auto& chain : chains) workers.Post([&, c = chain.get()] { link(c, 0); });
    while (finished.load() < kChains) std::this_thread::yield();
  }
  for (const auto& chain : chains) {
    EXPECT_FALSE(chain->overlapped.load());
    ASSERT_EQ(chain->seen.size(), static_cast<size_t>(kLinks));
    for (int i = 0; i < kLinks; ++i) ASSERT_EQ(chain->seen[static_cast<size_t>(i)], i);
  }
}

// ingest.workers when set; else one fewer than the hardware threads, 1 to 4
// (the recorder keeps a core).
TEST(IngestWorkersTest, ThreadsForTakesTheConfiguredCountElseLeavesTheRecorderACore) {
  EXPECT_EQ(IngestWorkers::ThreadsFor(1), 1);
  EXPECT_EQ(IngestWorkers::ThreadsFor(7), 7);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(IngestWorkers::ThreadsFor(0), std::clamp(hw - 1, 1, 4));
  EXPECT_EQ(IngestWorkers::DefaultThreads(), IngestWorkers::ThreadsFor(0));
}

}  // namespace
}  // namespace perld::ingest
