// PaceUntil: how a rate-controlled PerlBench worker waits for its next slot
// (issue 30). Far from the slot (> 200 µs) it sleeps until 100 µs before
// it; then it yields the CPU down to 20 µs before it; then it spins. At
// 1,000 slots/s that is 3-4% of a core (tests/bench/DAEMON.md, "A
// rate-controlled run's idle CPU"); the schedule error it achieves, and the
// floor a pure spin achieves on the same host: tests/bench/pacing_bench.cc.
//
// Returns when `clock.NowNanos()` reaches `due_ns`, or `deadline_ns` if that
// is earlier (> 0). Threads: the calling worker's only; `clock` is read-only.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "daemon/core/cpu_relax.h"

namespace perld::bench {

template <class Clock>
void PaceUntil(const Clock& clock, int64_t due_ns, int64_t deadline_ns) {
  if (deadline_ns > 0 && due_ns > deadline_ns) due_ns = deadline_ns;
  for (;;) {
    const int64_t ahead = due_ns - clock.NowNanos();
    if (ahead <= 0) return;
    if (ahead > 200'000) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(ahead - 100'000));
    } else if (ahead > 20'000) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
}

}  // namespace perld::bench
