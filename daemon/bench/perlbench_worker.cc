#include "daemon/bench/perlbench_worker.h"

#include <algorithm>
#include <memory>
#include <thread>

#include "daemon/bench/pace_until.h"
#include "daemon/core/clock.h"

namespace perld::bench {
namespace {

// Keeps the compiler from removing the no-op operation or its payload.
inline void Consume(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

template <int64_t kNsPerUnit, bool kPaced, class Clock>
WorkerResult Loop(const WorkerPlan& plan, const Clock& clock, TimeStampProducer& producer,
                  const std::atomic<bool>& stop) {
  // Worker-owned payload: reserved once, returned by every read. Never
  // written (default-initialised, not zero-filled), so a large -size costs
  // address space, not memory: the kernel maps no page until one is touched.
  const std::unique_ptr<char[]> payload(new char[static_cast<size_t>(plan.size) + 1]);
  const int64_t limit = plan.records > 0 ? plan.records : INT64_MAX;
  const int64_t deadline = plan.deadline_ns > 0 ? plan.deadline_ns : INT64_MAX;
  const double period_ns = kPaced ? 1e9 / plan.records_per_second : 0;
  const int64_t first_slot = plan.first_slot_ns > 0 ? plan.first_slot_ns : clock.NowNanos();
  int64_t slot_index = 0;  // the next slot
  int64_t last_yield = clock.Ticks();
  WorkerResult r;
  for (int64_t i = 0; i < limit; ++i) {
    int64_t slot_ns = 0;
    if constexpr (kPaced) {
      auto due = [&](int64_t k) {
        return first_slot + static_cast<int64_t>(static_cast<double>(k) * period_ns);
      };
      slot_ns = due(slot_index);
      PaceUntil(clock, slot_ns, plan.deadline_ns);
      if (plan.catchup == Catchup::kSkip) {
        // Drop every slot whose successor is already due (also when the
        // wait itself overslept: a stall): run the newest.
        const int64_t now = clock.NowNanos();
        int64_t dropped = 0;
        while (due(slot_index + 1) <= now) {
          ++slot_index;
          ++dropped;
        }
        if (dropped > 0) {
          if (plan.skipped != nullptr) plan.skipped->fetch_add(dropped, std::memory_order_relaxed);
          slot_ns = due(slot_index);
        }
      }
      ++slot_index;
    }
    if (i % kStopCheckInterval == 0) {
      if (stop.load(std::memory_order_relaxed)) break;
      if (plan.yield_every_ns > 0 &&
          clock.DeltaNanos(clock.Ticks() - last_yield) >= plan.yield_every_ns) {
        std::this_thread::yield();
        last_yield = clock.Ticks();
      }
    }
    const int64_t t0_raw = clock.Ticks();
    // The operation: a write completes immediately; a read returns the same
    // preallocated payload. Both are this one compiler-opaque use of it.
    Consume(payload.get());
    const int64_t t1_raw = clock.Ticks();
    const int64_t start_ns = clock.ToNanos(t0_raw);
    if (start_ns >= deadline) break;  // hard deadline
    const int64_t start = start_ns / kNsPerUnit;
    const int64_t latency = clock.DeltaNanos(t1_raw - t0_raw) / kNsPerUnit;  // converted once
    ++r.attempted;
    if constexpr (kPaced) {
      // Its slot, never after its start (the wait may return a little early
      // only at the deadline).
      const int64_t intended = std::min(slot_ns, start_ns) / kNsPerUnit;
      r.sent += producer.SendPaced(intended, start, start + latency, 1, plan.size) ? 1 : 0;
      producer.Flush();  // about to wait: hand the partial batch over now
    } else {
      r.sent += producer.Send(start, start + latency, 1, plan.size) ? 1 : 0;
    }
  }
  producer.Flush();
  return r;
}

template <int64_t kNsPerUnit, class Clock>
WorkerResult Dispatch(const WorkerPlan& plan, const Clock& clock, TimeStampProducer& producer,
                      const std::atomic<bool>& stop) {
  if (plan.records_per_second > 0) {
    producer.set_paced();  // before its first send (a daemon run, perlctl load alike)
    return Loop<kNsPerUnit, true>(plan, clock, producer, stop);
  }
  return Loop<kNsPerUnit, false>(plan, clock, producer, stop);
}

struct MonotonicSource {
  int64_t NowNanos() const { return MonotonicNanos(); }
  static int64_t Ticks() { return MonotonicNanos(); }
  static int64_t ToNanos(int64_t ns) { return ns; }
  static int64_t DeltaNanos(int64_t ns) { return ns; }
};

template <class Clock>
WorkerResult DispatchUnit(const WorkerPlan& plan, TimeUnit unit, const Clock& clock,
                          TimeStampProducer& producer, const std::atomic<bool>& stop) {
  switch (unit) {
    case TimeUnit::kNs:
      return Dispatch<1>(plan, clock, producer, stop);
    case TimeUnit::kUs:
      return Dispatch<1'000>(plan, clock, producer, stop);
    case TimeUnit::kMs:
      break;
  }
  return Dispatch<1'000'000>(plan, clock, producer, stop);
}

}  // namespace

WorkerResult RunWorker(const WorkerPlan& plan, TimeUnit unit, const BenchClock& clock,
                       TimeStampProducer& producer, const std::atomic<bool>& stop) {
  // Specialize the loop on the clock so the hot path has no clock branch.
  if (clock.tsc() != nullptr) return DispatchUnit(plan, unit, *clock.tsc(), producer, stop);
  return DispatchUnit(plan, unit, MonotonicSource{}, producer, stop);
}

}  // namespace perld::bench
