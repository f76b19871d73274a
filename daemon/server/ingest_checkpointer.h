// IngestCheckpointer: writes the checkpoints of ingest runs (state/checkpoint.h)
// and turns their commits into durable acknowledgements.
//
// As a RunObserver it sees every closed window of every run, in order, on
// the run manager's dispatcher thread. For each checkpointed run
// (IngestRuns::Checkpointed) it keeps the run's total so far (a RunTotal of
// its periodic windows, seeded from the stored checkpoint when the run was
// resumed) and, at each closed periodic window whose cut differs from the
// last one saved (a client's sequence moved, or it closed), queues one
// checkpoint: that total, exact, with each client's last sequence in it
// (WindowRecord::applied) -- queued only once the window is in the registry
// (OnWindowPublished), so what a client is told is durable is also in the
// run's live total for every query. The state store commits whatever is queued in
// one transaction; once it has, IngestRuns::MarkDurable lets the clients'
// streams report the messages durable. A run's checkpoint is deleted with
// its final total. A forwarded run's checkpoint also carries its messages
// to the parent perld (UpstreamJournal): they are sent once it committed.
//
// Cost: one merge of the window into the run's total per window (O(D + d)),
// and per checkpoint one copy of the total's distribution (O(D)) plus its
// encoding and SQLite write on the store's writer thread; never on the
// recorder thread.
//
// Threads: observer callbacks on the dispatcher thread; Seed from the
// starting thread; the commit callbacks on the store's writer thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/core/run_total.h"
#include "daemon/runs/run_observer.h"
#include "daemon/service/ingest_runs.h"
#include "daemon/service/ingest_stats.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/state_store.h"
#include "daemon/state/upstream_journal.h"

namespace perld::server {

class IngestCheckpointer final : public runs::RunObserver {
 public:
  // REQUIRES: `runs` outlives every checkpoint the store commits (Flush the
  // store before destroying it).
  // `cut` closes a run's periodic window now (RunManager::CutWindow).
  // `journal` (may be null: no upstream) gives each checkpoint the run's
  // messages to the parent perld and learns when they are committed.
  IngestCheckpointer(service::IngestRuns& runs, state::StateStore& store,
                     service::IngestStats& stats, std::function<void(runs::RunId)> cut,
                     state::UpstreamJournal* journal = nullptr)
      : runs_(runs), store_(store), stats_(stats), cut_(std::move(cut)), journal_(journal) {}

  // IngestRuns' close hook: a client closed after `last_sequence`. When the
  // last checkpoint's cut holds that sequence, its client row is rewritten
  // closed; else the run's window is cut now, and the checkpoint of that
  // window records the close. Either way MarkDurable follows its commit.
  void OnClientClosed(runs::RunId id, int client_index, uint64_t last_sequence);

  // A resumed run continues from `checkpoint` (before its first window).
  void Seed(const runs::RunInfo& info, const state::Checkpoint& checkpoint);

  void OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) override;
  void OnWindowPublished(const runs::RunInfo& info) override;
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override;

 private:
  struct RunState {
    explicit RunState(size_t budget_bytes) : total(budget_bytes) {}
    RunTotal total;  // every periodic window up to the last one seen
    int64_t start_time = 0;
    double seconds = 0;
    int64_t segment_seq = 0;
    bool inexact_logged = false;
    std::vector<state::CheckpointClient> saved;  // the last cut made
    // The last cut's checkpoint until its window is in the registry.
    std::optional<state::Checkpoint> pending;
  };
  RunState& StateOf(const runs::RunInfo& info);
  // Queues s.pending to the store; its commit acknowledges the cut durable.
  void Submit(runs::RunId id, RunState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  service::IngestRuns& runs_;
  state::StateStore& store_;
  service::IngestStats& stats_;  // checkpoints committed
  const std::function<void(runs::RunId)> cut_;
  state::UpstreamJournal* const journal_;
  mutable std::mutex mu_;
  std::map<runs::RunId, RunState> runs_state_;  // mu_
};

}  // namespace perld::server
