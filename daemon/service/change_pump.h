// ChangePump: who runs a callback reactor's pump -- the step that reads
// shared state and then writes, finishes or goes idle -- so that changes
// notified from other threads (a run registry subscription on the
// dispatcher, a cancel on a gRPC thread) are never lost and the pump never
// runs twice at once. WatchRun's and StopRun{wait}'s reactors use it.
//
// One owner at a time. The creator owns the pump first (the reactor's Start
// runs it). The owner runs passes:
//
//   for (;;) {
//     pump.BeginPass();          // changes from here on are seen by Release
//     ... read the state; Finish or StartWrite and return (still owner) ...
//     if (pump.Release()) return;  // idle; false: something changed, again
//   }
//
// A pass that finishes the call or starts a write keeps ownership (the
// write's OnWriteDone runs the pump next; after Finish nobody runs it).
// Elsewhere: set the reactor's own flag (an atomic), then Claim(); true
// means the caller now owns the pump and runs it. A thread that must not
// run the pump (the registry's writer) calls Kick(): when it claims, the
// pump runs on a gRPC thread through an alarm that fires at once.
//
// Lifetime: an armed alarm owns the pump, so once the owner has finished
// the call no alarm is pending; the last alarm is destroyed with this.
// Threads: every member function from any thread.
#pragma once

#include <grpcpp/alarm.h>

#include <functional>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "daemon/common/mutex.h"

namespace perld::service {

class ChangePump {
 public:
  explicit ChangePump(std::function<void()> pump) : pump_(std::move(pump)) {}
  ChangePump(const ChangePump&) = delete;
  ChangePump& operator=(const ChangePump&) = delete;

  // Something changed. True: the caller owns the pump now and must run it.
  bool Claim() {
    MutexLock lock(mu_);
    if (busy_) {
      changed_ = true;
      return false;
    }
    busy_ = true;
    return true;
  }

  // Claim() for a thread that must not run the pump: runs it on a gRPC
  // thread instead.
  void Kick() {
    std::unique_ptr<grpc::Alarm> last;  // its callback may still be returning
    grpc::Alarm* kick = nullptr;
    {
      MutexLock lock(mu_);
      if (busy_) {
        changed_ = true;
        return;
      }
      busy_ = true;
      last = std::move(kick_);
      kick_ = std::make_unique<grpc::Alarm>();
      kick = kick_.get();
    }
    // Armed outside mu_: kick_ stays until its callback has released the pump.
    kick->Set(gpr_inf_past(GPR_CLOCK_MONOTONIC), [this](bool) { pump_(); });
  }

  // The owner, starting a pass.
  void BeginPass() {
    MutexLock lock(mu_);
    changed_ = false;
  }

  // The owner, with nothing left to do: true when the pump is idle now;
  // false when something changed during the pass (run another).
  bool Release() {
    MutexLock lock(mu_);
    if (changed_) return false;
    busy_ = false;
    return true;
  }

 private:
  const std::function<void()> pump_;
  Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = true;  // the creator owns the pump first
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<grpc::Alarm> kick_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::service
