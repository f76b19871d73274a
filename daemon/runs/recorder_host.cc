#include "daemon/runs/recorder_host.h"

#include <algorithm>
#include <utility>

#include "daemon/common/mutex.h"
#include "daemon/core/clock.h"

namespace perld::runs {

void RecorderHost::Attach(std::shared_ptr<RunRecorder> run) {
  Command c;
  c.kind = Command::Kind::kAttach;
  c.id = run->id();
  c.run = std::move(run);
  Push(std::move(c));
}

void RecorderHost::Finish(RunId id) {
  Command c;
  c.kind = Command::Kind::kFinish;
  c.id = id;
  Push(std::move(c));
}

void RecorderHost::Push(Command command) {
  commands_.enqueue(std::move(command));
  // release: the recorder's acquire load of the count sees the command.
  pending_commands_.fetch_add(1, std::memory_order_release);
  // Commands are rare (a run's start and end): ringing costs nothing that
  // matters. Taking the lock orders the count before an idle recorder's
  // check of it, so the wake-up cannot be lost.
  { MutexLock lock(idle_mu_); }
  idle_cv_.NotifyOne();
}

void RecorderHost::Close() {
  {
    MutexLock lock(idle_mu_);
    closed_.store(true, std::memory_order_relaxed);
  }
  idle_cv_.NotifyOne();
}

void RecorderHost::ApplyCommands() {
  Command c;
  while (pending_commands_.load(std::memory_order_acquire) > 0 && commands_.try_dequeue(c)) {
    pending_commands_.fetch_sub(1, std::memory_order_relaxed);
    if (c.kind == Command::Kind::kAttach) {
      runs_.push_back(std::move(c.run));
      // The queue orders commands per sending thread only: a Finish sent
      // after this Attach from another thread may have been taken first.
      auto early = std::find(early_finishes_.begin(), early_finishes_.end(), c.id);
      if (early != early_finishes_.end()) {
        early_finishes_.erase(early);
        FinishRun(c.id);
      }
    } else if (!FinishRun(c.id)) {
      early_finishes_.push_back(c.id);
    }
  }
  attached_count_.store(static_cast<int>(runs_.size()), std::memory_order_relaxed);
}

bool RecorderHost::FinishRun(RunId id) {
  auto it = std::find_if(runs_.begin(), runs_.end(), [id](const auto& r) { return r->id() == id; });
  if (it == runs_.end()) return false;
  std::shared_ptr<RunRecorder> run = std::move(*it);
  runs_.erase(it);
  // Every producer was joined before Finish was queued: a kAll pass that
  // finds nothing means the channels are empty for good.
  run->DrainAll();
  run->Finish(MonotonicNanos());
  RecorderEvent done;
  done.kind = RecorderEvent::Kind::kRunFinished;
  done.run_id = id;
  done.retired = std::move(run);
  outbox_->Publish(std::move(done));
  return true;
}

size_t RecorderHost::Drain(PollMode mode) {
  if (runs_.empty() && pending_commands_.load(std::memory_order_acquire) == 0) {
    MutexLock lock(idle_mu_);
    idle_cv_.WaitFor(idle_mu_, kIdleWait, [this] {
      return pending_commands_.load(std::memory_order_acquire) > 0 ||
             closed_.load(std::memory_order_relaxed);
    });
  }
  if (pending_commands_.load(std::memory_order_relaxed) > 0) [[unlikely]] {
    ApplyCommands();
  }
  size_t moved = 0;
  for (const auto& run : runs_) moved += run->Drain(mode);
  return moved;
}

void RecorderHost::Tick(int64_t now_ns) {
  for (const auto& run : runs_) run->Tick(now_ns);
}

}  // namespace perld::runs
