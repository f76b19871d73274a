// Pacer: waits for a rate-controlled worker's next slot without burning its
// core. The worker's schedule is absolute (slot i at t0 + (i+1) * period, on
// the run's clock); between two slots the thread sleeps until `margin` before
// the slot and spins (PAUSE) only for the rest, so at 1,000 records/s it
// spins ~tens of µs per millisecond instead of yielding and spinning through
// the last 200 µs of every period (about 17% of a core before, see
// tests/bench/PACING.md).
//
// Wake-up precision: a sleeping thread wakes up to its timer slack late
// (50 µs by default), so the Pacer sets the calling thread's slack to 1 ns
// (prctl PR_SET_TIMERSLACK; the thread's own, restored by the destructor)
// and learns how late its wake-ups really are: an estimate that moves half
// way up to a later wake-up and 1/32 of the way down to an earlier one (so
// it sits near the high tail of recent oversleeps, without a window's
// memory); the margin is the estimate plus kGuardNs, within [kMinMarginNs,
// kMaxMarginNs] (100 µs until it has learned). A slot already past returns
// at once (the worker catches up: today's burst behaviour).
//
// Threads: one Pacer per worker thread, used on that thread only.
#pragma once

#include <sys/prctl.h>

#include <algorithm>
#include <cstdint>
#include <ctime>

#include "daemon/core/cpu_relax.h"

namespace perld::bench {

template <class Clock>
class Pacer {
 public:
  static constexpr int64_t kMinMarginNs = 10'000;
  static constexpr int64_t kMaxMarginNs = 200'000;    // an outlier (preemption) costs little
  static constexpr int64_t kInitialLateNs = 100'000;  // before it has learned: the default slack's
  static constexpr int64_t kGuardNs = 5'000;

  explicit Pacer(const Clock& clock) : clock_(clock) {
    const int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (slack > 0 && prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0) saved_slack_ = slack;
  }
  ~Pacer() {
    if (saved_slack_ > 0)
      prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(saved_slack_), 0, 0, 0);
  }
  Pacer(const Pacer&) = delete;
  Pacer& operator=(const Pacer&) = delete;

  // Returns when the clock reaches `due_ns`.
  void WaitUntil(int64_t due_ns) {
    int64_t ahead = due_ns - clock_.NowNanos();
    if (ahead <= 0) return;
    const int64_t margin = Margin();
    if (ahead > margin) {
      const int64_t sleep_ns = ahead - margin;
      const timespec ts{static_cast<time_t>(sleep_ns / 1'000'000'000),
                        static_cast<long>(sleep_ns % 1'000'000'000)};
      clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
      ahead = due_ns - clock_.NowNanos();
      Learn(margin - ahead);  // how much later than asked the thread woke
    }
    while (due_ns - clock_.NowNanos() > 0) CpuRelax();
  }

  int64_t margin_ns() const { return Margin(); }

 private:
  int64_t Margin() const { return std::clamp(late_ + kGuardNs, kMinMarginNs, kMaxMarginNs); }
  void Learn(int64_t late_ns) {
    late_ns = std::max<int64_t>(late_ns, 0);
    late_ += late_ns > late_ ? (late_ns - late_) / 2 : -((late_ - late_ns) / 32);
  }

  const Clock& clock_;
  int64_t late_ = kInitialLateNs;  // the oversleep estimate, ns
  int saved_slack_ = 0;
};

}  // namespace perld::bench
