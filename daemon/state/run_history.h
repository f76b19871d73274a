// RunHistory: keeps the run registry's history in the state directory
// (StateStore, SQLite) and brings it back at start.
//
// As a RunObserver it saves each run when it starts, each closed window, and
// the final total with its exact distribution when it ends (one transaction),
// and deletes the runs the registry evicted, so the database holds what Query
// shows. Restore() loads the stored runs into the registry at start: a run
// that was still running when the daemon stopped without closing it (a crash)
// comes back as failed, with that reason, and is saved so -- unless it is an
// ingest run with a checkpoint: those are returned to be resumed
// (ingest::RunTable::Resume), or failed by Abandon when they cannot be.
//
// Threads: the observer callbacks may come from any thread (StateStore
// queues them); Restore runs once, before the run manager starts.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/runs/run_observer.h"
#include "daemon/runs/run_registry.h"
#include "daemon/state/state_store.h"
#include "daemon/state/upstream_journal.h"

namespace perld::state {

class RunHistory final : public runs::RunObserver {
 public:
  explicit RunHistory(std::unique_ptr<StateStore> store) : store_(std::move(store)) {}

  // A forwarding daemon's journal (before the run manager starts): a run's
  // final total is stored with its last messages to the parent.
  void SetUpstreamJournal(UpstreamJournal* journal) { journal_ = journal; }

  // Loads every stored run into `registry`, except the running ingest runs
  // with a checkpoint, which it returns (with their windows up to the
  // checkpoint's cut; later windows are deleted from the database). A
  // rate-controlled run comes with its response view (StoredRun::
  // response_view); one whose view cannot resume with it, or a view whose
  // run cannot, is abandoned.
  absl::StatusOr<std::vector<StoredRun>> Restore(runs::RunRegistry& registry);
  // A run Restore returned that cannot resume: it ends failed, naming `why`,
  // with the total of its checkpoint (and so does its response view).
  void Abandon(runs::RunRegistry& registry, StoredRun run, std::string_view why);
  // The first id a new run may take (ids are never reused).
  runs::RunId NextRunId() const { return store_->MaxRunId() + 1; }

  void OnRunStarted(const runs::RunInfo& info) override { store_->SaveRun(info); }
  void OnWindow(const runs::RunInfo& info, const runs::WindowRecord& window) override;
  void OnRunEnded(const runs::RunInfo& info, const runs::WindowRecord& total) override;
  void OnRunsEvicted(const std::vector<runs::RunId>& ids) override { store_->DeleteRuns(ids); }

  StateStore& store() { return *store_; }

 private:
  // Moves each resumable response view into its run's StoredRun.
  std::vector<StoredRun> PairResponseViews(runs::RunRegistry& registry,
                                           std::vector<StoredRun> resumable);

  std::unique_ptr<StateStore> store_;
  UpstreamJournal* journal_ = nullptr;
};

}  // namespace perld::state
