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
// Threads: Attach/Finish from any thread; Drain/Tick on the recorder thread.
#pragma once

#include <concurrentqueue/concurrentqueue.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/core/recorder_work.h"
#include "daemon/runs/recorder_event.h"
#include "daemon/runs/run_recorder.h"

namespace perld::runs {

class RecorderHost final : public RecorderWork {
 public:
  explicit RecorderHost(RecorderOutbox* outbox) : outbox_(outbox) {}

  void Attach(std::shared_ptr<RunRecorder> run);
  void Finish(RunId id);

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
};

}  // namespace perld::runs
