// IdleWaiter: the elastic wait of a thread that polls for work: spin, then
// yield, then park (sleep) for a growing interval, so an idle poller does not
// burn a core and a busy one never sleeps.
//
// Phases after consecutive empty polls: kSpinRounds CPU-relax spins, then
// kYieldRounds sched_yield calls, then sleeps starting at `idle_ns` and doubling
// up to `max_park_ns`. Reset() (work found) returns to the spin phase.
// Thread-confined: one IdleWaiter per polling thread.
#pragma once

#include <cstdint>

namespace perld {

class IdleWaiter {
 public:
  static constexpr int kSpinRounds = 64;
  static constexpr int kYieldRounds = 16;
  static constexpr int64_t kDefaultIdleNs = 10'000;        // first park: 10 us
  static constexpr int64_t kDefaultMaxParkNs = 5'000'000;  // longest park: 5 ms

  explicit IdleWaiter(int64_t idle_ns = kDefaultIdleNs, int64_t max_park_ns = kDefaultMaxParkNs);

  // Called after a poll that found work.
  void Reset() {
    rounds_ = 0;
    park_ns_ = idle_ns_;
  }
  // Called after a poll that found nothing; returns when it is time to poll again.
  void Wait();

  // Total nanoseconds requested in parks so far (diagnostics).
  int64_t parked_ns() const { return parked_ns_; }

 private:
  const int64_t idle_ns_;
  const int64_t max_park_ns_;
  int rounds_ = 0;
  int64_t park_ns_;
  int64_t parked_ns_ = 0;
};

}  // namespace perld
