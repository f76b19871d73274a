// PerlBench workers: the synthetic operations whose only cost is the
// measurement pipeline itself. A writer's write completes immediately; a
// reader returns the same worker-owned, preallocated payload every time. The
// operation path allocates nothing, takes no lock and touches no shared driver
// state: each worker reads the clock, runs the no-op, reads the clock again and
// publishes (start, end, 1, size) through its own TimeStampProducer -- a
// paced worker with the operation's intended start too (SendPaced).
//
// Timestamps are in the run's time unit: start is the start reading in ns
// divided by the unit (a compile-time constant); the latency is the raw
// difference of the two readings (TSC ticks or ns), converted to ns once and
// divided by the unit, and end = start + latency. So a latency is never the
// difference of two separately floored conversions.
//
// Threads: RunWorker runs on the worker's own thread; `stop` may be set by any
// thread (checked every kStopCheckInterval records).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "daemon/bench/bench_clock.h"
#include "daemon/bench/bench_options.h"
#include "daemon/core/timestamp_channels.h"
#include "daemon/core/tsc_clock.h"

namespace perld::bench {

struct WorkerPlan {
  int32_t size = 0;
  int64_t records = 0;            // records to run; 0 = until the deadline
  int64_t deadline_ns = 0;        // clock ns at which to stop; 0 = none
  double records_per_second = 0;  // pacing; 0 = saturation
  // Pacing (records_per_second > 0; issue 30): slot i is due at
  // first_slot_ns + i / records_per_second (clock ns; the run's workers
  // phase-offset so together they are evenly spaced). The worker waits for
  // each slot, then runs its operation and sends it with its intended start
  // (the slot; never after the actual start): SendPaced. A slot it reaches
  // late runs at once (burst: the missed ones follow as fast as it can), or
  // with Catchup::kSkip, every slot whose successor is already due is
  // dropped and counted in *skipped, never run late.
  int64_t first_slot_ns = 0;
  Catchup catchup = Catchup::kBurst;
  std::atomic<int64_t>* skipped = nullptr;  // kSkip: slots dropped; may be null
  // Cooperative (> 0): at a stop check (every kStopCheckInterval records,
  // outside the timed region) at least this long after its last offer, the
  // worker offers its core to any other runnable thread (sched_yield; returns
  // at once when none waits). A saturating worker then delays a thread woken
  // on its core by about this long, not the rest of its time slice (the
  // kernel lets a running thread finish it: up to a scheduler tick, 4 ms at
  // HZ=250). The daemon's benches set it (benchWorkerYieldUs); `perld bench`
  // does not. 0: never.
  int64_t yield_every_ns = 0;
};

struct WorkerResult {
  int64_t attempted = 0;  // operations run (timestamps offered to Send)
  int64_t sent = 0;       // timestamps accepted by the channel
};

inline constexpr int64_t kStopCheckInterval = 1024;

// A paced plan marks `producer` paced (TimeStampProducer::set_paced) before
// its first send: its timestamps carry their intended starts.
WorkerResult RunWorker(const WorkerPlan& plan, TimeUnit unit, const BenchClock& clock,
                       TimeStampProducer& producer, const std::atomic<bool>& stop);

}  // namespace perld::bench
