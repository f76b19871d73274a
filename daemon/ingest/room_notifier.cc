#include "daemon/ingest/room_notifier.h"

#include <utility>
#include <vector>

#include "daemon/core/thread_name.h"

namespace perld::ingest {

RoomNotifier::RoomNotifier()
    : thread_([this] {
        NameThisThread("perld-room");
        Loop();
      }) {}

RoomNotifier::~RoomNotifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.release();
  thread_.join();
}

uint64_t RoomNotifier::Add(Retry retry) {
  uint64_t token = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    token = next_token_++;
    retries_.emplace(token, std::move(retry));
  }
  waiters_.fetch_add(1, std::memory_order_seq_cst);  // before the first run (RoomSignal)
  Poke();
  return token;
}

void RoomNotifier::Remove(uint64_t token) {
  std::unique_lock<std::mutex> lock(mu_);
  // From the retry itself (its Resume ended the stream): nothing to wait for.
  if (std::this_thread::get_id() != thread_.get_id()) {
    idle_.wait(lock, [&] { return running_ != token; });
  }
  if (retries_.erase(token) > 0) waiters_.fetch_sub(1, std::memory_order_relaxed);
}

void RoomNotifier::Poke() {
  // acq_rel: the loop's reset of the flag and this set are ordered, so a
  // poke during a pass is never lost (it releases the semaphore again).
  if (!poked_.exchange(true, std::memory_order_acq_rel)) wake_.release();
}

void RoomNotifier::Loop() {
  std::vector<uint64_t> tokens;
  for (;;) {
    wake_.acquire();
    poked_.store(false, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      tokens.clear();
      for (const auto& [token, retry] : retries_) tokens.push_back(token);
    }
    for (const uint64_t token : tokens) {
      Retry retry;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = retries_.find(token);
        if (it == retries_.end()) continue;  // removed meanwhile
        running_ = token;
        retry = it->second;
      }
      const bool done = retry();
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = 0;
        if (done && retries_.erase(token) > 0) waiters_.fetch_sub(1, std::memory_order_relaxed);
      }
      idle_.notify_all();
    }
  }
}

}  // namespace perld::ingest
