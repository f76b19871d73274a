#include "daemon/core/idle_waiter.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "daemon/core/cpu_relax.h"

namespace perld {

IdleWaiter::IdleWaiter(int64_t idle_ns, int64_t max_park_ns)
    : idle_ns_(std::max<int64_t>(idle_ns, 1)),
      max_park_ns_(std::max(max_park_ns, idle_ns_)),
      park_ns_(idle_ns_) {}

void IdleWaiter::Wait() {
  if (rounds_ < kSpinRounds) {
    ++rounds_;
    for (int i = 0; i < 16; ++i) CpuRelax();
    return;
  }
  if (rounds_ < kSpinRounds + kYieldRounds) {
    ++rounds_;
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(park_ns_));
  parked_ns_ += park_ns_;
  park_ns_ = std::min(park_ns_ * 2, max_park_ns_);
}

}  // namespace perld
