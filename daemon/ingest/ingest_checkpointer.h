// IngestCheckpointer: writes the checkpoints of ingest runs (state/checkpoint.h)
// and turns their commits into durable acknowledgements.
//
// As a RunObserver it sees every closed window of every run, in order, on
// the run manager's dispatcher thread. For each checkpointed run
// (RunTable::Checkpointed), at each closed periodic window whose cut
// differs from the last one saved (a client's sequence moved, or it
// closed), it queues one checkpoint: the run's live total from the
// registry, exact (RunRegistry::LiveTotal: the one exact total the run
// holds; the checkpointer keeps none of its own), with each client's last
// sequence in it (WindowRecord::applied) -- taken once the window is in the
// registry (OnWindowPublished), so what a client is told is durable is also
// in the run's live total for every query. The state store commits
// whatever is queued in one synced transaction; once it has,
// RunTable::MarkDurable lets the clients' streams report the messages
// durable. A run's checkpoint is deleted with its final total. A forwarded
// run's checkpoint also carries its messages to the parent perld
// (UpstreamJournal): they are sent once it committed.
//
// Cost: per checkpoint one copy of the live total's distribution (O(D))
// under the registry's reader lock, plus its encoding and SQLite write on
// the store's writer thread; never on the recorder thread.
//
// Threads: observer callbacks on the dispatcher thread; Seed from the
// starting thread; the commit callbacks on the store's writer thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/common/mutex.h"
#include "daemon/ingest/ingest_stats.h"
#include "daemon/ingest/run_table.h"
#include "daemon/runs/run_observer.h"
#include "daemon/runs/run_registry.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/state_store.h"
#include "daemon/state/upstream_journal.h"

namespace perld::ingest {

class IngestCheckpointer final : public runs::RunObserver {
 public:
  // REQUIRES: `runs` outlives every checkpoint the store commits (Flush the
  // store before destroying it).
  // `registry` holds the runs' live totals the checkpoints store.
  // `journal` (may be null: no upstream) gives each checkpoint the run's
  // messages to the parent perld and learns when they are committed.
  IngestCheckpointer(RunTable& runs, const runs::RunRegistry& registry, state::StateStore& store,
                     IngestStats& stats, state::UpstreamJournal* journal = nullptr)
      : runs_(runs), registry_(registry), store_(store), stats_(stats), journal_(journal) {}

  // RunTable's close hook: a client closed after `last_sequence`. When the
  // last checkpoint's cut holds that sequence, its client row is rewritten
  // closed; else the checkpoint of the run's next interval window records
  // the close (its acknowledgement waits at most an interval and a commit).
  // A close never cuts a window: clients that close one after another
  // leave the run's history with its interval windows only (issue 32).
  // Either way MarkDurable follows its commit.
  void OnClientClosed(runs::RunId id, int client_index, uint64_t last_sequence);

  // A resumed run continues from `checkpoint` (before its first window).
  void Seed(const runs::RunInfo& info, const state::Checkpoint& checkpoint);

  void OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) override;
  void OnWindowPublished(const runs::RunInfo& info) override;
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override;

 private:
  // A cut made at a closed window, until its window is in the registry.
  struct PendingCut {
    int64_t periodic_seq = 0;
    int64_t segment_seq = 0;
    std::vector<state::CheckpointClient> clients;
  };
  struct RunState {
    int64_t periodic_seq = 0;  // a response view's last periodic window (its cut)
    int64_t segment_seq = 0;
    bool inexact_logged = false;
    std::vector<state::CheckpointClient> saved;  // the last cut made
    std::optional<PendingCut> pending;
  };
  // Queues s.pending, with the run's live total, to the store; its commit
  // acknowledges the cut durable.
  void Submit(const runs::RunInfo& info, RunState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RunTable& runs_;
  const runs::RunRegistry& registry_;
  state::StateStore& store_;
  IngestStats& stats_;  // checkpoints committed
  state::UpstreamJournal* const journal_;
  mutable Mutex mu_;
  std::map<runs::RunId, RunState> runs_state_ ABSL_GUARDED_BY(mu_);
};

}  // namespace perld::ingest
