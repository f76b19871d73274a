// RoomNotifier: where ingest messages wait for queue room without a thread.
//
// A client over its share of queued memory (ingest.maxClientMemoryBytes) or
// over everyone's (ingest.maxMemoryBytes) does not sleep on its stream's
// thread: its message is parked and a retry is registered here (Add). The
// recorder, after merging a window and releasing its charge, Pokes (one
// flag and a semaphore release, only while something waits: RoomSignal);
// this notifier's one thread then runs the registered retries, each of
// which pushes its parked message if it fits now and says whether it is
// done or what it still waits for. One thread serves every waiting client
// of the daemon.
//
// Order: retries run oldest first. Once one waits for everyone's room
// (kWaitSharedRoom), the rest of that pass runs only the retries whose last
// run waited for their own room (a client's share frees as the recorder
// merges its windows, whatever the total): the others would find the same
// total, and the oldest waiter for the shared room is tried first. A
// retry's first run always happens (it may fit now). A poke that frees one
// window's room runs a few retries, not every waiter's (200 backpressured
// clients: one or two retries per merged window instead of 200).
//
// Lost wake-ups: Add registers, then pokes itself once, so a retry runs at
// least once after its registration; a release after the registration is
// seen by the recorder's waiting() check (RoomSignal's ordering).
//
// Threads: Add and Remove from any thread; Poke from the recorder thread;
// retries run on the notifier's thread, never two at once; Remove returns
// only once its retry is not running and will not run again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <semaphore>
#include <thread>

#include "daemon/common/mutex.h"
#include "daemon/runs/remote_window_inbox.h"

namespace perld::ingest {

class RoomNotifier final : public runs::RoomSignal {
 public:
  // What a retry's run found.
  enum class Result {
    kDone,            // its message pushed, or dropped: unregistered
    kWaitOwnRoom,     // over its client's share (ingest.maxClientMemoryBytes)
    kWaitSharedRoom,  // over everyone's (ingest.maxMemoryBytes)
  };
  using Retry = std::function<Result()>;

  RoomNotifier();
  ~RoomNotifier() override;  // stops the thread; retries still registered never run
  RoomNotifier(const RoomNotifier&) = delete;
  RoomNotifier& operator=(const RoomNotifier&) = delete;

  // Registers `retry` and schedules a first run of it. Returns its token.
  uint64_t Add(Retry retry);
  // Unregisters `token` (no-op when it is done already), waiting while its
  // retry runs -- except when called from that retry (then it returns at
  // once: the retry is the caller's own stack).
  void Remove(uint64_t token);
  void Poke() override;

  int64_t waiting_clients() const { return waiters_.load(std::memory_order_relaxed); }

 private:
  void Loop();

  std::atomic<bool> poked_{false};
  std::counting_semaphore<> wake_{0};
  Mutex mu_;
  CondVar idle_;  // a retry finished (Remove waits for it)
  struct Waiter {
    Retry retry;
    Result last = Result::kWaitOwnRoom;  // before its first run: may fit
  };

  std::map<uint64_t, Waiter> retries_ ABSL_GUARDED_BY(mu_);  // by token: oldest first
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t running_ ABSL_GUARDED_BY(mu_) = 0;  // the token whose retry runs now (0: none)
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace perld::ingest
