// IdleWaiter: the elastic wait of a thread that polls for work: spin, then
// yield, then park (sleep) for a growing interval, so an idle poller does not
// burn a core and a busy one never sleeps.
//
// Phases after consecutive empty polls: kSpinRounds CPU-relax spins, then
// kYieldRounds sched_yield calls, then sleeps starting at `idle_ns` and doubling
// up to `max_park_ns`. Reset() (work found) returns to the spin phase.
// Thread-confined: one IdleWaiter per polling thread.
#pragma once

#include <algorithm>
#include <cstdint>

namespace perld {

class IdleWaiter {
 public:
  static constexpr int kSpinRounds = 64;
  static constexpr int kYieldRounds = 16;
  static constexpr int64_t kDefaultIdleNs = 10'000;        // first park: 10 us
  static constexpr int64_t kDefaultMaxParkNs = 5'000'000;  // longest park: 5 ms

  explicit IdleWaiter(int64_t idle_ns = kDefaultIdleNs, int64_t max_park_ns = kDefaultMaxParkNs);

  // Called after a poll that found work. `expected_idle_ns`: how long the
  // poller expects to find nothing now (its work arrives that sparsely,
  // e.g. a paced producer's one timestamp a millisecond); from
  // kSparseIdleNs on, the next wait skips the spin and yield phases and
  // parks min(expected / 2, max_park_ns / 4) first: a sparse stream of work
  // costs a few wake-ups per item instead of ~100 polls (issue 30).
  void Reset(int64_t expected_idle_ns = 0) {
    rounds_ = 0;
    park_ns_ = idle_ns_;
    if (expected_idle_ns >= kSparseIdleNs) {
      rounds_ = kSpinRounds + kYieldRounds;
      park_ns_ = std::clamp(expected_idle_ns / 2, idle_ns_, std::max(max_park_ns_ / 4, idle_ns_));
    }
  }
  static constexpr int64_t kSparseIdleNs = 200'000;
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
