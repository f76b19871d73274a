#include "daemon/core/recorder_thread.h"

#include <chrono>
#include <thread>

#include "daemon/core/clock.h"
#include "daemon/core/contract.h"

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
  thread_ = std::thread([this] { Run(); });
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
  for (;;) {
    // acquire: pairs with StopAndDrain; read before the pass so that a pass
    // that starts after the flag sees every timestamp the producers sent.
    const bool stopping = stop_.load(std::memory_order_acquire);
    // Busy: leave each queue's newest node for later, so the recorder never
    // contends with producers on the queue tails. Idle for a few rounds, or
    // stopping: take everything.
    const bool take_all = stopping || empty_rounds >= kTakeAllAfterEmptyRounds;
    const size_t moved = work_.Drain(take_all ? PollMode::kAll : PollMode::kLeaveLast);
    if (moved > 0) {
      consumed += moved;
      consumed_.store(consumed, std::memory_order_relaxed);
      waiter.Reset();
      empty_rounds = 0;
      // A short pass means the recorder is at the producers' heels: its next
      // pass would read the very node lines (and queue links) they are
      // writing, and every such line would bounce between the cores with
      // each record. Parking briefly lets a batch build up, so a pass reads
      // lines the producers finished with long ago.
      if (moved < options_.short_pass && !stopping) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(options_.busy_backoff_ns));
      }
    } else {
      ++empty_rounds;
    }
    const int64_t now = MonotonicNanos();
    if (now >= next_tick) {
      work_.Tick(now);
      next_tick = now + options_.tick_ns;
    }
    if (moved == 0) {
      // Every queue was empty during a kAll pass that began after stop was
      // seen: nothing is left (a kAll Poll reports empty only when empty).
      if (stopping) break;
      waiter.Wait();
    }
  }
  work_.Tick(MonotonicNanos());
}

}  // namespace perld
