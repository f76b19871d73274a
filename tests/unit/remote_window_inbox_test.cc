// RemoteWindowInbox under concurrent pushes and drains (run under TSan):
// every window is merged exactly once, in push order per pushing thread, and
// every byte charged to a client is released.
#include "daemon/runs/remote_window_inbox.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace perld::runs {
namespace {

TEST(RemoteWindowInboxTest, ConcurrentPushesAreDrainedOnceInPushOrderPerThread) {
  constexpr int kThreads = 4;
  constexpr int64_t kWindows = 20'000;
  RemoteWindowInbox inbox;
  std::vector<std::shared_ptr<std::atomic<int64_t>>> charges;
  for (int t = 0; t < kThreads; ++t) charges.push_back(std::make_shared<std::atomic<int64_t>>(0));
  std::atomic<int> running{kThreads};
  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      for (int64_t i = 1; i <= kWindows; ++i) {
        RemoteWindow w;
        w.client = t;
        w.counters.records = i;  // the sequence within this thread
        w.buckets.assign(static_cast<size_t>(i % 7), LatencyBucket{i, 1});
        w.charge = charges[static_cast<size_t>(t)];
        inbox.Push(std::move(w));
      }
      running.fetch_sub(1);
    });
  }
  std::vector<int64_t> last(kThreads, 0);
  int64_t merged = 0;
  bool ordered = true;
  auto merge = [&](const RemoteWindow& w) {
    const auto t = static_cast<size_t>(w.client);
    ordered = ordered && w.counters.records == last[t] + 1;
    last[t] = w.counters.records;
    ++merged;
  };
  while (running.load() > 0) inbox.Drain(merge);
  for (std::thread& p : pushers) p.join();
  inbox.Drain(merge);
  EXPECT_TRUE(ordered);
  EXPECT_EQ(merged, kThreads * kWindows);
  for (int64_t n : last) EXPECT_EQ(n, kWindows);
  EXPECT_EQ(inbox.queued(), 0);
  for (const auto& c : charges) EXPECT_EQ(c->load(), 0);
}

TEST(RemoteWindowInboxTest, WindowsNeverDrainedAreFreedWithTheInbox) {
  auto charge = std::make_shared<std::atomic<int64_t>>(0);
  {
    RemoteWindowInbox inbox;
    RemoteWindow w;
    w.buckets.assign(100, LatencyBucket{1, 1});
    w.charge = charge;
    inbox.Push(std::move(w));
    EXPECT_EQ(inbox.queued(), 1);
    EXPECT_GT(charge->load(), 0);
  }  // LeakSanitizer: the window's node and buckets are freed here
}

// A merged raw batch's timestamp buffer is handed to the next decode, empty
// with its capacity; at most kPooledBuffers wait, and a window's buffers
// are not (only raw batches' timestamps are pooled). Charges are released
// whole first (the charge counted the buffer's capacity).
TEST(RemoteWindowInboxTest, MergedRawBuffersAreReusedAndBounded) {
  RemoteWindowInbox inbox;
  EXPECT_EQ(inbox.TakeTimestampBuffer().capacity(), 0u) << "nothing pooled yet";
  auto charge = std::make_shared<std::atomic<int64_t>>(0);
  constexpr size_t kBatches = RemoteWindowInbox::kPooledBuffers + 2;
  for (size_t i = 0; i < kBatches; ++i) {
    RemoteWindow w;
    w.raw = true;
    w.timestamps.reserve(4096 + i);
    w.timestamps.push_back(TimeStamp{0, 5, 1, 100});
    w.charge = charge;
    inbox.Push(std::move(w));
  }
  RemoteWindow window;  // not raw: its buffers are freed, not pooled
  window.timestamps.reserve(999);
  inbox.Push(std::move(window));
  int64_t seen = 0;
  EXPECT_EQ(inbox.Drain([&](const RemoteWindow& w) { seen += w.raw ? w.timestamps[0].end : 0; }),
            kBatches + 1);
  EXPECT_EQ(seen, static_cast<int64_t>(5 * kBatches));
  EXPECT_EQ(charge->load(), 0) << "every charged byte released";
  std::vector<size_t> capacities;
  for (;;) {
    std::vector<TimeStamp> buffer = inbox.TakeTimestampBuffer();
    if (buffer.capacity() == 0) break;
    EXPECT_TRUE(buffer.empty());
    capacities.push_back(buffer.capacity());
  }
  ASSERT_EQ(capacities.size(), RemoteWindowInbox::kPooledBuffers);
  for (size_t c : capacities) {
    EXPECT_GE(c, 4096u);
    EXPECT_NE(c, 999u);
  }
}

}  // namespace
}  // namespace perld::runs
