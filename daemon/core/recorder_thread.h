// RecorderThread: the single consumer. It drives a RecorderWork (every queue
// of one TimeStampChannels into a TimeStampSink, or every run of the daemon):
// drains it, calls its Tick at least every tick_ns, and idles with an elastic
// wait (spin -> yield -> park from idle_ns up to max_park_ns) so an idle
// recorder does not burn a core.
//
// Threads: Start/StopAndDrain from one controlling thread; the work (sinks,
// windows, the channels' consumer side) is used only by the recorder thread.
// Shutdown: StopAndDrain() REQUIRES that every producer has finished sending
// (joined); the recorder then drains until every queue is empty, so every
// queued timestamp reaches the sink before the call returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "daemon/core/idle_waiter.h"
#include "daemon/core/recorder_work.h"
#include "daemon/core/timestamp_channels.h"
#include "daemon/core/timestamp_sink.h"

namespace perld {

struct RecorderOptions {
  int64_t idle_ns = IdleWaiter::kDefaultIdleNs;         // first park when idle (SBK idleNS)
  int64_t max_park_ns = IdleWaiter::kDefaultMaxParkNs;  // longest park when idle
  int64_t tick_ns = 10'000'000;                         // Tick at least every 10 ms
  // Busy backoff: after a pass that moved fewer than short_pass timestamps
  // the recorder yields the core (busy_backoff_ns == 0, the default) or
  // parks busy_backoff_ns (the per-record variant's old setting, 20 us; it
  // stalls small pending bounds: tests/bench/README.md).
  size_t short_pass = 1024;
  int64_t busy_backoff_ns = 0;
};

class RecorderThread {
 public:
  // Empty busy-path passes before the recorder also takes each queue's newest
  // node (PollMode::kAll); a lone last timestamp waits at most a few
  // microseconds of spinning.
  static constexpr int kTakeAllAfterEmptyRounds = 4;
  // While busy, a kAll pass (which also takes partial batches) at least this
  // often.
  static constexpr int64_t kTakeAllEveryNs = 20'000;

  RecorderThread(RecorderWork& work, RecorderOptions options = {});
  // Drives one TimeStampChannels into `sink` (a ChannelsWork it owns).
  RecorderThread(TimeStampChannels& channels, TimeStampSink& sink, RecorderOptions options = {});
  ~RecorderThread();  // stops and drains if still running
  RecorderThread(const RecorderThread&) = delete;
  RecorderThread& operator=(const RecorderThread&) = delete;

  // Starts the recorder thread. REQUIRES: called once (a queue has exactly one
  // consumer thread for its lifetime).
  void Start();
  // Stops after every queued timestamp reached the sink; a final Tick is
  // delivered. REQUIRES: all producers have stopped sending.
  void StopAndDrain();

  // Timestamps delivered to the sink so far (any thread).
  uint64_t consumed() const { return consumed_.load(std::memory_order_relaxed); }
  // Ticks delivered so far (at least one per tick_ns while the thread runs,
  // busy or idle): the liveness signal a watchdog reads (any thread).
  uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }

 private:
  void Run();

  std::unique_ptr<ChannelsWork> owned_work_;  // set by the (channels, sink) constructor
  RecorderWork& work_;
  const RecorderOptions options_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool started_ = false;
  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> ticks_{0};
};

}  // namespace perld
