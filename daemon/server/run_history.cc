#include "daemon/server/run_history.h"

#include <utility>

#include "absl/time/clock.h"
#include "daemon/log/log.h"

namespace perld::server {

absl::Status RunHistory::Restore(runs::RunRegistry& registry) {
  absl::StatusOr<std::vector<state::StoredRun>> stored = store_->LoadRuns();
  if (!stored.ok()) return stored.status();
  size_t restored = 0;
  for (state::StoredRun& run : *stored) {
    if (!run.distribution_status.ok()) {
      log::Warning("state: ", run.distribution_status.message(),
                   "; its total keeps its counters and configured percentiles only");
    }
    if (run.info.state == runs::RunState::kRunning) {
      // The daemon stopped without closing this run (a crash, kill -9).
      run.info.state = runs::RunState::kFailed;
      run.info.failure_reason = "perld stopped before the run ended; no final total";
      if (run.info.end_unix_ms == 0) run.info.end_unix_ms = absl::ToUnixMillis(absl::Now());
      store_->SaveRun(run.info);
    }
    const std::vector<runs::RunId> evicted =
        registry.Restore(run.info, std::move(run.windows), std::move(run.total));
    if (!evicted.empty()) store_->DeleteRuns(evicted);
    ++restored;
  }
  if (restored > 0) log::Info("state: restored ", restored, " run(s) from ", store_->path());
  return absl::OkStatus();
}

void RunHistory::OnWindow(const runs::RunInfo&, const runs::WindowRecord& window) {
  store_->SaveWindow(window);
}

void RunHistory::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) {
  store_->SaveFinalTotal(info, total);
}

}  // namespace perld::server
