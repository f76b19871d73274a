#include "daemon/ingest/ingest_workers.h"

#include <algorithm>
#include <string>
#include <utility>

#include "daemon/core/thread_name.h"

namespace perld::ingest {

IngestWorkers::IngestWorkers(int threads) {
  threads_.reserve(static_cast<size_t>(std::max(threads, 1)));
  for (int i = 0; i < std::max(threads, 1); ++i) {
    threads_.emplace_back([this, i] {
      NameThisThread("perld-ingest-" + std::to_string(i));
      Loop();
    });
  }
}

IngestWorkers::~IngestWorkers() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  ready_.NotifyAll();
  for (std::thread& t : threads_) t.join();
}

int IngestWorkers::ThreadsFor(int64_t configured) {
  if (configured > 0) return static_cast<int>(configured);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw - 1, 1, 4);
}

void IngestWorkers::Post(std::function<void()> task) {
  {
    MutexLock lock(mu_);
    tasks_.push_back(std::move(task));
  }
  ready_.NotifyOne();
}

void IngestWorkers::Loop() {
  MutexLock lock(mu_);
  for (;;) {
    ready_.Wait(
        mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.Unlock();
    task();
    lock.Lock();
  }
}

}  // namespace perld::ingest
