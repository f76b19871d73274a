#include "daemon/core/recorder_thread.h"

#include <chrono>
#include <thread>

#include "daemon/core/clock.h"
#include "daemon/core/contract.h"
#include "daemon/core/thread_name.h"

namespace perld {

RecorderThread::RecorderThread(RecorderWork& work, RecorderOptions options)
    : work_(work), options_(options) {}

RecorderThread::RecorderThread(TimeStampChannels& channels, TimeStampSink& sink,
                               RecorderOptions options)
    : owned_work_(std::make_unique<ChannelsWork>(channels, sink)),
      work_(*owned_work_),
      options_(options) {}

RecorderThread::~RecorderThread() { StopAndDrain(); }

void RecorderThread::Start() {
  PERLD_CONTRACT(!started_, "RecorderThread::Start called twice (one consumer thread per queue)");
  started_ = true;
  thread_ = std::thread([this] {
    NameThisThread("perld-recorder");
    Run();
  });
}

void RecorderThread::StopAndDrain() {
  if (!thread_.joinable()) return;
  // release: everything the producers did before (they were joined by the
  // caller) is visible to the recorder once it observes the flag.
  stop_.store(true, std::memory_order_release);
  thread_.join();
}

void RecorderThread::Run() {
  IdleWaiter waiter(options_.idle_ns, options_.max_park_ns);
  int64_t next_tick = MonotonicNanos() + options_.tick_ns;
  uint64_t consumed = 0;
  int empty_rounds = 0;
  int64_t next_take_all = 0;
  // Sparse work (a paced producer's timestamp every millisecond): the gap
  // before work found after idling, averaged, sets the next first park.
  int64_t last_work_ns = 0;
  int64_t typical_gap_ns = 0;
  for (;;) {
    // acquire: pairs with StopAndDrain; read before the pass so that a pass
    // that starts after the flag sees every timestamp the producers sent.
    const bool stopping = stop_.load(std::memory_order_acquire);
    int64_t now = MonotonicNanos();
    // Busy: leave each queue's newest node (per-record variant) and the
    // producers' partial batches (batch path) for later, so the recorder does
    // not contend with producers on lines they are writing. Take everything
    // when idle for a few rounds, when stopping, and at least every
    // kTakeAllEveryNs: that bounds how long a timestamp waits in a partial
    // batch while the recorder is busy.
    const bool take_all =
        stopping || empty_rounds >= kTakeAllAfterEmptyRounds || now >= next_take_all;
    if (take_all) next_take_all = now + kTakeAllEveryNs;
    const size_t moved = work_.Drain(take_all ? PollMode::kAll : PollMode::kLeaveLast);
    if (moved > 0) {
      consumed += moved;
      consumed_.store(consumed, std::memory_order_relaxed);
      const int64_t gap = empty_rounds > 0 && last_work_ns > 0 ? now - last_work_ns : 0;
      typical_gap_ns = (typical_gap_ns * 3 + gap) / 4;
      last_work_ns = now;
      waiter.Reset(typical_gap_ns);
      empty_rounds = 0;
      // A short pass means the recorder is at the producers' heels. Give the
      // core to them (yield: on a machine with fewer cores than threads the
      // producers run; otherwise it returns at once) instead of sleeping: a
      // fixed sleep after every short pass stalls producers that wait at a
      // small pending bound (issue 14). busy_backoff_ns > 0 restores the
      // old fixed park for measurement.
      if (moved < options_.short_pass && !stopping) {
        if (options_.busy_backoff_ns > 0) {
          std::this_thread::sleep_for(std::chrono::nanoseconds(options_.busy_backoff_ns));
        } else {
          std::this_thread::yield();
        }
      }
      now = MonotonicNanos();
    } else {
      ++empty_rounds;
    }
    if (now >= next_tick) {
      work_.Tick(now);
      ticks_.fetch_add(1, std::memory_order_relaxed);
      next_tick = now + options_.tick_ns;
    }
    if (moved == 0) {
      // Every queue was empty during a kAll pass that began after stop was
      // seen: nothing is left (a kAll Poll reports empty only when empty).
      if (stopping && take_all) break;
      waiter.Wait();
    }
  }
  work_.Tick(MonotonicNanos());
}

}  // namespace perld
