// Lifecycle: a daemon's components as an ordered list of steps, started in
// order and stopped in reverse (Envoy's InstanceImpl is the model).
//
//   Lifecycle steps;
//   steps.Add({.name = "state",
//              .start = [&] { return OpenState(dir); },
//              .stop = [this] { store->Flush(); }});
//   steps.Add({.name = "http", .start = ..., .stop = ...});
//   if (absl::Status s = steps.Start(); !s.ok()) return s;  // nothing left running
//   ...
//   steps.Stop();  // http, then state
//
// Contract:
//   * Start() runs each step's start in the order added. When step k fails,
//     the steps k-1..0 are stopped in reverse order, each once, and Start
//     returns step k's error with its message prefixed by the step's name
//     ("http: cannot listen on ...", same code).
//   * A step's start either succeeds or leaves nothing to undo: its own stop
//     is called only after its start succeeded, and at most once.
//   * Stop() stops every started step in reverse order, once: later calls,
//     and the destructor, do nothing more.
//   * A start function runs once, inside Start(), and is released right
//     after: it may capture the caller's locals by reference. A stop function
//     runs later (Stop, the destructor): it must capture only what outlives
//     the Lifecycle.
//   * An empty start (nothing to start) or stop (nothing to stop) is allowed.
//
// Test seam (LifecycleHooks): `fail_start` makes the start of the step so
// named fail (Internal) instead of running; `trace` sees every step started
// and stopped. Both empty in the daemon.
//
// Threads: not thread-safe; one owner thread calls Add, Start and Stop, and
// every step function runs on it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace perld::server {

struct LifecycleHooks {
  // The start of the step with this name does not run and fails with
  // Internal("injected failure (test hook)") ("": none).
  std::string fail_start;
  // Called with ("start", step) after each start succeeded and ("stop",
  // step) after each stop returned.
  std::function<void(std::string_view event, std::string_view step)> trace;
};

class Lifecycle {
 public:
  struct Step {
    std::string name = {};
    std::function<absl::Status()> start = {};  // empty: nothing to start
    std::function<void()> stop = {};           // empty: nothing to stop
  };

  explicit Lifecycle(LifecycleHooks hooks = {});
  ~Lifecycle();  // Stop()
  Lifecycle(const Lifecycle&) = delete;
  Lifecycle& operator=(const Lifecycle&) = delete;

  // Appends a step. REQUIRES: Start() not called yet; names unique.
  void Add(Step step);
  // Starts every step in order; on a failure, stops the started ones in
  // reverse and returns the error naming the step. REQUIRES: called once.
  absl::Status Start();
  // Stops every started step in reverse order. Idempotent.
  void Stop();

  // The steps' names, in start order.
  std::vector<std::string> names() const;

 private:
  // Stops steps_[started_ - 1] .. steps_[0].
  void StopStarted();

  LifecycleHooks hooks_;
  std::vector<Step> steps_;
  size_t started_ = 0;  // steps_[0, started_) are running
  bool start_called_ = false;
};

}  // namespace perld::server
