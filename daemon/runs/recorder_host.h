// RecorderHost: the daemon's RecorderWork -- every attached run, driven by the
// one recorder thread (the seed's single recorder).
//
// Runs attach and finish while the recorder runs. Control reaches the
// recorder only through a lock-free command queue, read once per drain pass
// (one relaxed load when it is empty), so the record path takes no lock. The
// queue keeps each sending thread's order only, so a Finish that overtakes
// its run's Attach (sent from another thread) waits for it. Commands:
//   * Attach(run): the recorder drains and ticks the run from its next pass;
//   * Finish(id):  REQUIRES every producer of the run has stopped sending and
//     been joined before the call (the queue's release/acquire hand-off makes
//     their sends visible). The recorder drains the run's channels until they
//     are empty, publishes its last window and its total, detaches it and
//     publishes kRunFinished carrying the retired run.
//
// Idle: with no run attached and no command queued, Drain blocks on a
// condition variable for up to kIdleWait (commands ring it), so an idle
// daemon's recorder wakes a few times a second instead of at every park of
// its idle waiter. Close() ends that for good before the recorder stops.
//
// Threads: Attach/Finish/Close from any thread; Drain/Tick on the recorder
// thread.
#pragma once

#include <concurrentqueue/concurrentqueue.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/common/mutex.h"
#include "daemon/core/recorder_work.h"
#include "daemon/runs/recorder_event.h"
#include "daemon/runs/run_recorder.h"

namespace perld::runs {

class RecorderHost final : public RecorderWork {
 public:
  explicit RecorderHost(RecorderOutbox* outbox) : outbox_(outbox) {}

  static constexpr std::chrono::milliseconds kIdleWait{250};

  void Attach(std::shared_ptr<RunRecorder> run);
  void Finish(RunId id);
  // Drain never blocks from now on (call before stopping the recorder).
  void Close();

  // RecorderWork (recorder thread).
  size_t Drain(PollMode mode) override;
  void Tick(int64_t now_ns) override;

  // Runs attached right now (recorder thread; approximate elsewhere).
  int attached() const { return attached_count_.load(std::memory_order_relaxed); }

 private:
  struct Command {
    enum class Kind { kAttach, kFinish };
    Kind kind = Kind::kAttach;
    RunId id = 0;
    std::shared_ptr<RunRecorder> run;
  };
  void Push(Command command);
  void ApplyCommands();
  // False when the run is not attached (yet).
  bool FinishRun(RunId id);

  RecorderOutbox* const outbox_;
  moodycamel::ConcurrentQueue<Command> commands_;
  std::atomic<int64_t> pending_commands_{0};
  std::vector<std::shared_ptr<RunRecorder>> runs_;  // recorder thread only
  std::vector<RunId> early_finishes_;               // recorder thread only
  std::atomic<int> attached_count_{0};
  // Guards no member (the count and closed_ are atomics): taken around their
  // change so an idle recorder's check and wait cannot miss the wake-up.
  Mutex idle_mu_;
  CondVar idle_cv_;  // a command was queued, or Close
  std::atomic<bool> closed_{false};
};

}  // namespace perld::runs
