// RunCsvWriter: the daemon's SBK CSV output (config key csvDir). Every run
// started while csvDir is set writes DIR/run-<id>.csv in SBK's layout, as
// `perld bench -csvfile` does: the header, a Regular row per interval window
// (and per early-closed window), a Total row per total segment and for the
// run total. A file that cannot be opened or written is logged once and
// skipped; the run itself is never affected.
//
// Threads: OnRunStarted on the thread that creates the run, the rest on the
// run manager's dispatcher thread; one mutex guards the open files.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "daemon/bench/sbk_report.h"
#include "daemon/common/mutex.h"
#include "daemon/config/current_config.h"
#include "daemon/runs/run_observer.h"

namespace perld::server {

class RunCsvWriter final : public runs::RunObserver {
 public:
  explicit RunCsvWriter(const config::CurrentConfig& config) : config_(config) {}

  void OnRunStarted(const runs::RunInfo& info) override;
  void OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) override;
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override;

 private:
  struct File {
    bench::ReportContext context;
    std::ofstream out;
    std::string path;
    int64_t rows = 0;
  };
  void Row(runs::RunId id, const runs::WindowRecord& window, bool total);

  const config::CurrentConfig& config_;
  Mutex mu_;
  std::map<runs::RunId, std::unique_ptr<File>> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::server
