#include "daemon/state/run_history.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/common/failpoint.h"
#include "daemon/common/log.h"

namespace perld::state {
namespace {

// The total of a run that never closed: the counters of its stored periodic
// windows summed (they cover every record up to the last closed window),
// without a distribution or percentiles. seq - 1 is the number of windows.
runs::WindowRecord TotalOfStoredWindows(const runs::RunInfo& info,
                                        const std::vector<runs::WindowRecord>& windows) {
  runs::WindowRecord total;
  total.run_id = info.id;
  total.kind = runs::WindowRecord::Kind::kTotal;
  total.seq = 1;
  total.exact_total = false;
  total.start_unix_ms = info.start_unix_ms;
  total.end_unix_ms = info.start_unix_ms;
  LatencySnapshot& t = total.snapshot;
  for (const runs::WindowRecord& w : windows) {
    if (w.kind == runs::WindowRecord::Kind::kTotalSegment) {
      ++total.segments;
      continue;
    }
    if (total.seq == 1) t.start_time = w.snapshot.start_time;
    ++total.seq;
    t.AddCountersOf(w.snapshot);
    total.end_unix_ms = w.end_unix_ms;
    total.seconds += w.seconds;
  }
  return total;
}

}  // namespace

namespace {

// When a run the daemon stopped without closing ended: the end of the last
// thing stored of it (a window, its checkpoint) -- perld was alive then --
// else now (nothing of it was stored: the restart is all that is known).
int64_t CrashTime(const StoredRun& run) {
  int64_t last = 0;
  for (const runs::WindowRecord& w : run.windows) last = std::max(last, w.end_unix_ms);
  if (run.checkpoint) last = std::max(last, run.checkpoint->total.end_unix_ms);
  return last > 0 ? last : absl::ToUnixMillis(absl::Now());
}

}  // namespace

absl::StatusOr<std::vector<StoredRun>> RunHistory::Restore(runs::RunRegistry& registry) {
  absl::StatusOr<std::vector<StoredRun>> stored = store_->LoadRuns();
  if (!stored.ok()) return stored.status();
  std::vector<StoredRun> resumable;
  size_t restored = 0;
  for (StoredRun& run : *stored) {
    if (!run.distribution_status.ok()) {
      log::Warning("state: ", run.distribution_status.message(),
                   "; its total keeps its counters and configured percentiles only");
    }
    if (run.info.state == runs::RunState::kRunning && !run.checkpoint &&
        run.info.spec.source == runs::RunSource::kIngest && run.info.spec.checkpointed) {
      // Stopped before its first checkpoint: no client was told any of its
      // messages is durable, so every client still holds them all. It
      // resumes empty, from before its first window.
      run.checkpoint.emplace();
      runs::WindowRecord& empty = run.checkpoint->total;
      empty.run_id = run.info.id;
      empty.kind = runs::WindowRecord::Kind::kTotal;
      empty.seq = 1;
      empty.start_unix_ms = run.info.start_unix_ms;
      empty.end_unix_ms = run.info.start_unix_ms;
    }
    if (run.info.state == runs::RunState::kRunning && run.checkpoint &&
        run.info.spec.source == runs::RunSource::kIngest) {
      // Windows after the cut held records the checkpoint does not: their
      // clients replay them into new windows.
      const int64_t cut = run.checkpoint->periodic_seq;
      std::erase_if(run.windows, [cut](const runs::WindowRecord& w) {
        return w.kind == runs::WindowRecord::Kind::kPeriodic && w.seq > cut;
      });
      store_->TrimWindows(run.info.id, cut);
      resumable.push_back(std::move(run));
      continue;
    }
    if (run.info.state == runs::RunState::kRunning) {
      // The daemon stopped without closing this run (a crash, kill -9): it
      // ends as failed, with a total rebuilt from its stored windows.
      run.info.state = runs::RunState::kFailed;
      run.info.end_reason = runs::EndReason::kFailed;
      run.info.end_unix_ms = CrashTime(run);
      run.total = TotalOfStoredWindows(run.info, run.windows);
      run.info.failure_reason = absl::StrCat(
          "perld stopped before the run ended; its total was rebuilt from ", run.total->seq - 1,
          " stored periodic window(s): counters only, no percentiles, records of the last "
          "unclosed window are missing");
      store_->SaveFinalTotal(run.info, *run.total);
    }
    const std::vector<runs::RunId> evicted =
        registry.Restore(run.info, std::move(run.windows), std::move(run.total));
    if (!evicted.empty()) store_->DeleteRuns(evicted);
    ++restored;
  }
  if (restored > 0) log::Info("state: restored ", restored, " run(s) from ", store_->path());
  return PairResponseViews(registry, std::move(resumable));
}

std::vector<StoredRun> RunHistory::PairResponseViews(runs::RunRegistry& registry,
                                                     std::vector<StoredRun> resumable) {
  std::vector<StoredRun> runs;
  std::vector<StoredRun> views;
  for (StoredRun& run : resumable) {
    (run.info.service_run != 0 ? views : runs).push_back(std::move(run));
  }
  for (StoredRun& view : views) {
    auto service = std::find_if(runs.begin(), runs.end(), [&view](const StoredRun& run) {
      return run.info.id == view.info.service_run;
    });
    if (service == runs.end()) {
      Abandon(registry, std::move(view), "its run did not resume");
    } else {
      service->response_view.push_back(std::move(view));
    }
  }
  std::vector<StoredRun> out;
  for (StoredRun& run : runs) {
    if (run.info.response_run != 0 && run.response_view.empty()) {
      Abandon(registry, std::move(run), "its response view was not stored");
    } else {
      out.push_back(std::move(run));
    }
  }
  return out;
}

void RunHistory::Abandon(runs::RunRegistry& registry, StoredRun run, std::string_view why) {
  for (StoredRun& view : run.response_view) Abandon(registry, std::move(view), why);
  run.info.state = runs::RunState::kFailed;
  run.info.end_reason = runs::EndReason::kFailed;
  run.info.end_unix_ms = CrashTime(run);
  run.info.failure_reason =
      absl::StrCat("perld stopped before the run ended and could not resume it (", std::string(why),
                   "); its total is its last checkpoint's");
  run.total = std::move(run.checkpoint->total);
  store_->SaveFinalTotal(run.info, *run.total);
  log::Warning("state: run ", run.info.id, ": ", run.info.failure_reason);
  const std::vector<runs::RunId> evicted =
      registry.Restore(run.info, std::move(run.windows), std::move(run.total));
  if (!evicted.empty()) store_->DeleteRuns(evicted);
}

void RunHistory::OnWindow(const runs::RunInfo&, const runs::WindowRecord& window) {
  store_->SaveWindow(window);
}

void RunHistory::OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) {
  // The run has ended (every client closed, acknowledged) and its final
  // total is not handed to the store yet: a restart resumes the run from
  // its last checkpoint.
  PERLD_FAILPOINT_HIT("run-ended-before-remembered");
  UpstreamTail upstream;
  if (journal_ != nullptr) {
    // The windows after the run's last checkpoint, committed with its total:
    // a crash can neither lose them nor resume the run under them.
    Checkpoint carrier;
    journal_->TakeForCheckpoint(info.id, &carrier);
    upstream.messages = std::move(carrier.upstream);
    upstream.next_sequence = carrier.upstream_next_sequence;
    if (upstream.next_sequence > 0) {
      upstream.durable = [journal = journal_, id = info.id, next = upstream.next_sequence] {
        journal->Committed(id, next);
      };
    }
  }
  store_->SaveFinalTotal(info, total, std::move(upstream));
}

}  // namespace perld::state
