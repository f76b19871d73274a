// RoomNotifier: oldest waiter first; once one waits for everyone's room, the
// pass runs only the waiters that wait for their own (or have not run yet).
#include "daemon/ingest/room_notifier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <latch>
#include <mutex>

namespace perld::ingest {
namespace {

using Result = RoomNotifier::Result;

// Counts the runs of each waiter and lets a test wait for a count.
class Runs {
 public:
  void Ran(int waiter) {
    std::lock_guard lock(mu_);
    ++count_[waiter];
    changed_.notify_all();
  }
  // The number of runs of `waiter` once it reached `at_least` (bounded wait).
  int WaitFor(int waiter, int at_least) {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(10), [&] { return count_[waiter] >= at_least; });
    return count_[waiter];
  }
  int Count(int waiter) {
    std::lock_guard lock(mu_);
    return count_[waiter];
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int count_[4] = {};
};

// Holds the notifier's thread in a retry of its own until Open(), after
// that retry's pass took its list: waiters added meanwhile start a new pass.
class Gate {
 public:
  explicit Gate(RoomNotifier& notifier) {
    notifier.Add([this] {
      entered_.count_down();
      open_.wait();
      return Result::kDone;
    });
    entered_.wait();
  }
  void Open() { open_.count_down(); }

 private:
  std::latch entered_{1};
  std::latch open_{1};
};

TEST(RoomNotifierTest, AWaiterForTheSharedRoomStopsThePassForTheOthersWaitingForIt) {
  RoomNotifier notifier;
  Runs runs;
  std::atomic<Result> a_result{Result::kWaitSharedRoom};
  std::atomic<Result> b_result{Result::kWaitSharedRoom};

  // A, B and C are registered in order before any of them runs, and all
  // run first in one pass.
  Gate gate(notifier);
  // Each reads its result before counting the run: the test changes the
  // results once it saw the counts.
  const uint64_t a = notifier.Add([&] {
    const Result result = a_result.load();
    runs.Ran(0);
    return result;
  });
  const uint64_t b = notifier.Add([&] {
    const Result result = b_result.load();
    runs.Ran(1);
    return result;
  });
  const uint64_t c = notifier.Add([&] {
    runs.Ran(2);
    return Result::kWaitOwnRoom;
  });
  gate.Open();

  // First runs: every new waiter runs once, whatever the others found.
  ASSERT_EQ(runs.WaitFor(2, 1), 1);
  EXPECT_EQ(runs.Count(0), 1);
  EXPECT_EQ(runs.Count(1), 1);
  EXPECT_EQ(notifier.waiting_clients(), 3);

  // Room freed: A (oldest) still does not fit the total, so B, which waits
  // for the same total, is not run; C, over its own share, is.
  notifier.Poke();
  ASSERT_EQ(runs.WaitFor(2, 2), 2);
  EXPECT_EQ(runs.Count(0), 2);
  EXPECT_EQ(runs.Count(1), 1);

  // Room for A and B: both run, in order, and leave.
  a_result = Result::kDone;
  b_result = Result::kDone;
  notifier.Poke();
  ASSERT_EQ(runs.WaitFor(2, 3), 3);
  EXPECT_EQ(runs.Count(0), 3);
  EXPECT_EQ(runs.Count(1), 2);
  EXPECT_EQ(notifier.waiting_clients(), 1);

  notifier.Remove(a);  // done already: a no-op
  notifier.Remove(b);
  notifier.Remove(c);
  EXPECT_EQ(notifier.waiting_clients(), 0);
}

TEST(RoomNotifierTest, AWaiterForItsOwnRoomDoesNotStopThePass) {
  RoomNotifier notifier;
  Runs runs;
  Gate gate(notifier);
  std::atomic<bool> room{false};
  notifier.Add([&] {
    runs.Ran(0);
    return Result::kWaitOwnRoom;
  });
  notifier.Add([&] {
    const Result result = room.load() ? Result::kDone : Result::kWaitSharedRoom;
    runs.Ran(1);  // after reading its room: the test changes it once this ran
    return result;
  });
  gate.Open();
  ASSERT_EQ(runs.WaitFor(1, 1), 1);

  room = true;
  notifier.Poke();
  ASSERT_EQ(runs.WaitFor(1, 2), 2);  // run although the older waiter still waits
  EXPECT_EQ(runs.WaitFor(0, 2), 2);
}

}  // namespace
}  // namespace perld::ingest
