#include "daemon/ingest/room_notifier.h"

#include <utility>
#include <vector>

#include "daemon/common/mutex.h"
#include "daemon/core/thread_name.h"

namespace perld::ingest {

RoomNotifier::RoomNotifier()
    : thread_([this] {
        NameThisThread("perld-room");
        Loop();
      }) {}

RoomNotifier::~RoomNotifier() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.release();
  thread_.join();
}

uint64_t RoomNotifier::Add(Retry retry) {
  uint64_t token = 0;
  {
    MutexLock lock(mu_);
    token = next_token_++;
    retries_.emplace(token, Waiter{std::move(retry)});
  }
  waiters_.fetch_add(1, std::memory_order_seq_cst);  // before the first run (RoomSignal)
  Poke();
  return token;
}

void RoomNotifier::Remove(uint64_t token) {
  MutexLock lock(mu_);
  // From the retry itself (its Resume ended the stream): nothing to wait for.
  if (std::this_thread::get_id() != thread_.get_id()) {
    idle_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ != token; });
  }
  if (retries_.erase(token) > 0) waiters_.fetch_sub(1, std::memory_order_relaxed);
}

void RoomNotifier::Poke() {
  // acq_rel: the loop's reset of the flag and this set are ordered, so a
  // poke during a pass is never lost (it releases the semaphore again).
  if (!poked_.exchange(true, std::memory_order_acq_rel)) wake_.release();
}

void RoomNotifier::Loop() {
  struct Due {
    uint64_t token;
    bool waits_shared;  // its last run waited for everyone's room
  };
  std::vector<Due> due;
  for (;;) {
    wake_.acquire();
    poked_.store(false, std::memory_order_release);
    {
      MutexLock lock(mu_);
      if (stop_) return;
      due.clear();
      for (const auto& [token, waiter] : retries_) {
        due.push_back({token, waiter.last == Result::kWaitSharedRoom});
      }
    }
    bool shared_full = false;  // a retry of this pass found everyone's room taken
    for (const Due& d : due) {
      if (shared_full && d.waits_shared) continue;
      Retry retry;
      {
        MutexLock lock(mu_);
        auto it = retries_.find(d.token);
        if (it == retries_.end()) continue;  // removed meanwhile
        running_ = d.token;
        retry = it->second.retry;
      }
      const Result result = retry();
      if (result == Result::kWaitSharedRoom) shared_full = true;
      {
        MutexLock lock(mu_);
        running_ = 0;
        auto it = retries_.find(d.token);
        if (it != retries_.end()) {
          if (result == Result::kDone) {
            retries_.erase(it);
            waiters_.fetch_sub(1, std::memory_order_relaxed);
          } else {
            it->second.last = result;
          }
        }
      }
      idle_.NotifyAll();
    }
  }
}

}  // namespace perld::ingest
