// RecorderEvent and RecorderOutbox: how results leave the recorder thread.
//
// The recorder thread publishes every closed window of every run, in closing
// order, and one kRunFinished event after a run's last window. The outbox is a
// lock-free queue (moodycamel::BlockingConcurrentQueue): Publish never takes a
// lock and never waits for a reader, so a slow consumer (a Watch stream, the
// SQLite writer) can never stall the recorder. One consumer thread (the run
// manager's dispatcher) takes the events in order.
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "daemon/runs/window_record.h"

namespace perld::runs {

class RunRecorder;

struct RecorderEvent {
  enum class Kind { kWindow, kRunFinished, kWakeUp };
  Kind kind = Kind::kWindow;
  RunId run_id = 0;
  WindowRecord window;  // kWindow
  // kRunFinished: the detached run, destroyed by the consumer so that freeing
  // its windows and channels never costs the recorder thread.
  std::shared_ptr<RunRecorder> retired;
};

class RecorderOutbox {
 public:
  // Any thread (the recorder thread in practice). Lock-free; allocates only
  // when the queue grows.
  void Publish(RecorderEvent event) { queue_.enqueue(std::move(event)); }
  // The consumer thread: waits up to timeout_us for the next event.
  bool WaitNext(RecorderEvent* event, int64_t timeout_us) {
    return queue_.wait_dequeue_timed(*event, timeout_us);
  }
  size_t ApproxSize() const { return queue_.size_approx(); }

 private:
  moodycamel::BlockingConcurrentQueue<RecorderEvent> queue_;
};

}  // namespace perld::runs
