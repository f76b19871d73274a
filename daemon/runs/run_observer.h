// RunObserver: what a run's results feed besides the registry -- the SQLite
// history, the console and CSV of `perld bench`, logs.
//
// Order per run: OnRunStarted, then OnWindow for each periodic window and
// total segment in closing order, then OnRunEnded with the final total. Only
// OnRunStarted runs on the thread that created the run; the rest run on the
// run manager's dispatcher thread, never on the recorder thread. An observer
// must not block for long: it delays every later event (never the recorder).
// OnRunEnded comes before Query shows the run ended, so a client that sees
// it ended finds what observers write (CSV, stored total) complete.
#pragma once

#include <vector>

#include "daemon/runs/run_info.h"
#include "daemon/runs/window_record.h"

namespace perld::runs {

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void OnRunStarted(const RunInfo& info) { static_cast<void>(info); }
  // `window` carries its exact distribution.
  virtual void OnWindow(const RunInfo& info, const WindowRecord& window) {
    static_cast<void>(info);
    static_cast<void>(window);
  }
  // After OnWindow: that window is now in the registry, so a query sees it.
  virtual void OnWindowPublished(const RunInfo& info) { static_cast<void>(info); }
  // `info` has its final state and end time; `total` its distribution.
  virtual void OnRunEnded(const RunInfo& info, const WindowRecord& total) {
    static_cast<void>(info);
    static_cast<void>(total);
  }
  // Runs the registry dropped by retention.
  virtual void OnRunsEvicted(const std::vector<RunId>& ids) { static_cast<void>(ids); }
};

}  // namespace perld::runs
