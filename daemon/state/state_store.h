// StateStore: the daemon's run history in SQLite, DIR/perld.db -- runs,
// their closed windows and final totals with exact distributions -- so that
// a restart keeps every finished run and never reuses a run id.
//
// Writes are asynchronous. SaveRun / SaveWindow / SaveFinalTotal copy the
// record into an in-memory queue and return; the store's own writer thread
// commits whatever is queued in ONE transaction per wake-up, then applies
// retention in the same transaction. The daemon therefore never writes
// SQLite on the recorder thread or a gRPC thread, and a burst of windows
// costs one commit, not one per window.
//
// Memory bound: queued records are counted in bytes (estimated: the record's
// own size plus its vectors and strings). A SaveWindow that would take the
// queue past `max_queued_bytes` is dropped and counted (dropped_windows(),
// logged, reported by the next Flush). SaveRun, SaveFinalTotal, DeleteRuns
// and SetRetention are never dropped: they may exceed the bound (there is one of
// each per run, so they are bounded by the number of runs).
//
// Durability: every commit is synced (WAL, synchronous=FULL: one fsync of
// the WAL per writer batch, never per record). Flush() returns, and a
// `durable` callback runs, only once the commit holding the records is on
// the device: it survives a crash of the process, of the kernel and a power
// loss. A client is told a message is durable only after such a commit.
//
// Write errors (disk full, I/O error, a record that breaks a constraint such
// as a window of an unsaved run): a failed record is lost, never retried; the
// rest of its batch still commits, except when SQLite rolled back the whole
// transaction (disk full, I/O error), when the batch is lost. Every failure is
// counted (write_errors()), passed to the log callback and returned by the
// next Flush. SaveFinalTotal is atomic: its run row and its total commit
// together or not at all.
//
// Retention (applied by the writer after each batch, and to the whole
// database at Open and on SetRetention): at most `max_finished_runs`
// finished or failed runs are kept -- the ones that ended last (end time,
// then id); older ones are deleted with their windows and total. Running runs
// are never deleted. Each run keeps, per window kind, its newest
// `max_windows_per_run` windows by seq (so at most max_windows_per_run
// periodic windows plus as many total segments); this applies to running
// runs too. `max_bytes` is not applied by the store (open: see the report).
//
// Threads: every public method may be called from any thread, concurrently,
// except that the destructor must not race with other calls. The log
// callback runs on the writer thread and must not call Flush (deadlock).
// LoadRuns reads on its own connection: WAL readers never block the writer.
//
// Cost on the 2-vCPU KVM guest (release build; state_store_cost_test):
//   see state_store_cost_test.cc, figures filled in below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/config/daemon_config.h"
#include "daemon/core/latency_percentiles.h"
#include "daemon/core/latency_snapshot.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/stored_totals.h"
#include "daemon/runs/window_record.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/directory_lock.h"
#include "daemon/state/sqlite_db.h"

namespace perld::state {

// One run as loaded from the database.
struct StoredRun {
  runs::RunInfo info;
  // Periodic windows, then total segments, each by seq; no distributions.
  std::vector<runs::WindowRecord> windows;
  // The final total with its decoded distribution, once the run finished.
  std::optional<runs::WindowRecord> total;
  // OK, or DataLoss naming the run when the total's distribution blob is
  // corrupt: then `total` holds its counters and percentiles (intact: they
  // are plain columns) with an empty distribution. A corrupt blob marks its
  // run instead of failing LoadRuns, so one damaged row never keeps the
  // daemon from starting.
  absl::Status distribution_status;
  // A running run's last checkpoint (checkpoint.h), with its distribution.
  std::optional<Checkpoint> checkpoint;
  // A resumable rate-controlled run's response view (0 or 1 entry), paired
  // with it by RunHistory::Restore: they resume together.
  std::vector<StoredRun> response_view;
};

// A forwarded run's last messages to the parent (UpstreamJournal), stored
// in the transaction of its final total.
struct UpstreamTail {
  std::vector<UpstreamMessage> messages;
  uint64_t next_sequence = 0;     // 0: the run is not forwarded (nothing stored)
  std::function<void()> durable;  // on the writer thread, after the commit
};

struct StateStoreOptions {
  // Receives one line per write error and per burst of dropped windows.
  std::function<void(std::string_view)> log;
  size_t max_queued_bytes = size_t{64} << 20;
  int busy_timeout_ms = 5'000;  // how long a statement waits for a lock
};

class StateStore {
 public:
  static constexpr char kFileName[] = "perld.db";

  // Opens (creating when missing) DIR/perld.db: creates DIR like mkdir -p
  // (new directories mode 0750), checks that DIR is writable by creating and
  // removing a probe file, locks DIR for this store (DirectoryLock: one
  // open store, so one daemon, per directory), opens the database, runs PRAGMA quick_check
  // (O(database size)), sets WAL mode, synchronous=FULL, foreign_keys=ON
  // and the busy timeout, creates the schema (state_schema.h) or checks its
  // version, applies `retention`, and starts the writer thread. Errors name
  // the path and the reason:
  //   FailedPrecondition "state directory 'D': cannot create: Not a directory"
  //   PermissionDenied   "state directory 'D': not writable: Permission denied"
  //   FailedPrecondition "state directory 'D' is in use by another perld (pid N, ...)"
  //   DataLoss           "state database 'D/perld.db': ... file is not a database ..."
  //   DataLoss           "state database 'D/perld.db': corrupt (quick_check: ...)"
  //   FailedPrecondition "state database 'D/perld.db': schema version 2 is newer ..."
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& dir,
                                                          const config::RetentionConfig& retention,
                                                          StateStoreOptions options = {});

  // Commits everything queued (as Flush), then stops the writer thread.
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Inserts or updates the run's row (its windows and total are kept).
  void SaveRun(runs::RunInfo run);
  // Inserts (or replaces) a periodic window or total segment: counters,
  // percentiles and the distribution (copied; stored within its kind's
  // retention budget). REQUIRES: the run was saved first, kind != kTotal
  // (else a write error). A periodic window may be dropped (see above); a
  // total segment waits for queue room instead (a spilled total needs them all).
  void SaveWindow(const runs::WindowRecord& window);
  // In one transaction: the run's row (its final state and end time) and its
  // total with the distribution blob (and its checkpoint is deleted). REQUIRES: total.kind ==
  // kTotal, total.run_id == run.id, the distribution ascending with counts >= 1 (else a write error
  // and neither is written).
  // With `upstream` (next_sequence > 0) also the run's last messages to the
  // parent and its stream's next sequence, in the same transaction.
  void SaveFinalTotal(runs::RunInfo run, runs::WindowRecord total, UpstreamTail upstream = {});
  // Replaces the run's checkpoint (its total with the distribution, and
  // its clients) in the next transaction; `durable` runs on the writer
  // thread once that transaction committed (never when it failed). A
  // checkpoint of the same run still queued is replaced by this one (its
  // `durable` is dropped: this one's cut covers it). Never dropped for the
  // queue bound. REQUIRES: the run was saved first, checkpoint.total.kind ==
  // kTotal with run_id set; `durable` must not call Flush.
  void SaveCheckpoint(Checkpoint checkpoint, std::function<void()> durable);
  // Replaces rows of the run's checkpoint clients only (e.g. one that
  // closed inside the stored cut); `durable` as for SaveCheckpoint.
  // REQUIRES: a checkpoint of the run was queued before.
  void SaveCheckpointClients(runs::RunId run, std::vector<CheckpointClient> clients,
                             std::function<void()> durable);
  // Replaces the stored clients of a remote run (table run_clients: each
  // client's last applied sequence and whether it closed), queued before
  // the run's final total so both commit by the time the total has.
  // REQUIRES: the run was saved first.
  // `durable` runs on the writer thread once they committed (as for
  // SaveCheckpoint).
  void SaveRunClients(runs::RunId run, std::vector<CheckpointClient> clients,
                      std::function<void()> durable);
  // Reserves run ids up to `through` durably (meta.reserved_run_id): blocks
  // until the commit is on the device, on a connection of its own (never
  // behind the writer thread's queue or its commit callbacks). After a
  // crash the next start begins above every reserved id; a clean stop gives
  // back the unused ones. Errors: the commit failed (hand out no id).
  [[nodiscard]] absl::Status ReserveRunIds(runs::RunId through);
  // Deletes the run's messages to the parent up to `through` (the parent
  // reported them durable).
  void ReleaseUpstream(runs::RunId run, uint64_t through);
  // Deletes the run's stream to the parent (closed, everything durable there).
  void EndUpstream(runs::RunId run);
  // Deletes the run's periodic windows after `periodic_seq` (a resumed run
  // continues from its checkpoint's cut).
  void TrimWindows(runs::RunId run, int64_t periodic_seq);
  // Deletes runs with their windows and totals (e.g. the runs the registry
  // evicted: RunObserver::OnRunsEvicted). Unknown ids are ignored.
  void DeleteRuns(std::vector<runs::RunId> ids);
  // Replaces the retention limits; the writer applies them to the whole
  // database in queue order.
  void SetRetention(const config::RetentionConfig& retention);
  void SetLogCallback(std::function<void(std::string_view)> log);

  // Blocks until everything queued before the call is committed. Returns the
  // first write error since the previous Flush, else ResourceExhausted if
  // windows were dropped since then, else OK.
  [[nodiscard]] absl::Status Flush();

  // A run's stored periodic windows in a range, with their distributions
  // (empty when not kept: a window of no valid latency, or one past
  // retention.maxWindowDistributionBytesPerRun), ascending seq. Waits until
  // what was queued before the call is committed, then reads on a fresh
  // connection. DataLoss for a corrupt row or blob. Any thread.
  struct WindowRange {
    int64_t first_seq = 1;
    int64_t last_seq = INT64_MAX;
    int64_t from_unix_ms = 0;        // window start >= this
    int64_t to_unix_ms = INT64_MAX;  // window end <= this
  };
  [[nodiscard]] absl::StatusOr<std::vector<runs::WindowRecord>> ReadWindowRange(
      runs::RunId run, const WindowRange& range) const;
  // The exact percentiles of a spilled run total (WindowRecord::spilled):
  // the streaming merge of the run's `segments` newest stored total
  // segments, each read blob by blob (memory: a 64 KiB buffer and a chunk
  // per segment, never the distributions). `out` holds the total's counters
  // (its `valid` is checked against the merge); `set`'s percentiles are
  // filled. Waits until what was queued before the call is committed, then
  // reads on a fresh connection in one read transaction. FailedPrecondition
  // when a segment is missing or was stored without its distribution
  // (retention.maxTotalSegmentBytesPerRun); DataLoss for a corrupt blob or a
  // merge that does not match the counters; on any error `out` has no
  // percentiles (ClearPercentiles). Any thread.
  [[nodiscard]] absl::Status MergeTotalSegments(runs::RunId run, int64_t segments,
                                                const PercentileSet& set,
                                                LatencySnapshot* out) const;
  struct StoredRow;  // a window row to merge (its blob, seq, valid); state_store.cc
  // The same for a running run's total past its memory budget: total
  // segments parts.first_segment..last_segment and periodic windows
  // parts.first_window..last_window merged. FailedPrecondition when one of
  // them is not stored (retention.maxWindowsPerRun) or has no distribution
  // (retention.maxTotalSegmentBytesPerRun, maxWindowDistributionBytesPerRun).
  [[nodiscard]] absl::Status MergeRunningTotal(runs::RunId run,
                                               const runs::RunningTotalParts& parts,
                                               const PercentileSet& set,
                                               LatencySnapshot* out) const;
  // The run's committed periodic windows that hold latencies but no stored
  // distribution, and the lowest seq among them (0: none). Does not wait
  // for the writer. Any thread.
  struct MissingDistributions {
    int64_t windows = 0;
    int64_t first_seq = 0;
  };
  [[nodiscard]] absl::StatusOr<MissingDistributions> WindowsWithoutDistribution(
      runs::RunId run) const;

  // Every stored run in id order, read on a fresh connection in one read
  // transaction (a consistent snapshot of what is committed). DataLoss
  // naming the run and column for a row this perld cannot read (except a
  // corrupt distribution: see StoredRun). Costs O(database size).
  [[nodiscard]] absl::StatusOr<std::vector<StoredRun>> LoadRuns() const;

  // Every stored stream to the parent (upstream_streams), by run id, read on
  // a fresh connection.
  [[nodiscard]] absl::StatusOr<std::vector<UpstreamBacklog>> LoadUpstream() const;
  // Up to `max_messages` committed messages of the run's stream from
  // `from_sequence` on, ascending, read on a fresh connection.
  [[nodiscard]] absl::StatusOr<std::vector<UpstreamMessage>> LoadUpstreamMessages(
      runs::RunId run, uint64_t from_sequence, size_t max_messages) const;

  // A remote run's stored clients (SaveRunClients), read on a fresh
  // connection: committed rows only; empty when none are stored.
  [[nodiscard]] absl::StatusOr<std::vector<CheckpointClient>> LoadRunClients(runs::RunId run) const;

  // The highest run id ever saved or reserved in this state directory (0
  // when none), including runs deleted by retention and saves still
  // queued. A new run takes MaxRunId() + 1, so ids are never reused across
  // restarts.
  runs::RunId MaxRunId() const;

  uint64_t write_errors() const;
  uint64_t dropped_windows() const;
  // Distributions stored and left out since this store was opened.
  struct DistributionCounts {
    uint64_t segment_bytes = 0;      // total-segment distribution bytes stored
    uint64_t segments_unstored = 0;  // total segments past maxTotalSegmentBytesPerRun
    uint64_t windows_unstored = 0;   // periodic windows past maxWindowDistributionBytesPerRun
  };
  DistributionCounts distribution_counts() const;
  // Memory SQLite holds now, every connection of the process (page caches,
  // prepared statements): sqlite3_memory_used(). Any thread.
  static int64_t SqliteMemoryBytes();
  const std::string& path() const { return path_; }

 private:
  class Writer;
  struct RunItem {
    runs::RunInfo run;
  };
  struct WindowItem {
    runs::WindowRecord window;
  };
  struct FinalTotalItem {
    runs::RunInfo run;
    runs::WindowRecord total;
    UpstreamTail upstream;
  };
  struct CheckpointItem {
    Checkpoint checkpoint;
    std::function<void()> durable;
    bool clients_only = false;  // checkpoint.clients rows only
  };
  struct UpstreamReleaseItem {
    runs::RunId run = 0;
    uint64_t through = 0;
    bool end = false;  // the whole stream
  };
  struct TrimItem {
    runs::RunId run = 0;
    int64_t periodic_seq = 0;
  };
  struct RunClientsItem {
    runs::RunId run = 0;
    std::vector<CheckpointClient> clients;
    std::function<void()> durable;
  };

  struct DeleteItem {
    std::vector<runs::RunId> ids;
  };
  struct RetentionItem {
    config::RetentionConfig retention;
  };
  using Item =
      std::variant<RunItem, WindowItem, FinalTotalItem, CheckpointItem, UpstreamReleaseItem,
                   TrimItem, DeleteItem, RetentionItem, RunClientsItem>;
  struct Queued {
    Item item;
    size_t bytes;
  };

  StateStore(std::string path, std::unique_ptr<DirectoryLock> lock, std::unique_ptr<Writer> writer,
             runs::RunId max_run_id, StateStoreOptions options);
  void Enqueue(Item item, size_t bytes);
  void WriterLoop();
  absl::StatusOr<SqliteDb> OpenReader() const;  // read-only, with the busy timeout
  void WaitCommitted() const;  // until what was queued before the call is committed
  // What MergeTotalSegments and MergeRunningTotal share: on a fresh reader
  // in one read transaction, `select` picks the rows (or refuses), and
  // their blobs are merged; on any error `out` has no percentiles.
  absl::Status MergeStoredRows(
      runs::RunId run, absl::FunctionRef<absl::Status(SqliteDb&, std::vector<StoredRow>*)> select,
      const PercentileSet& set, LatencySnapshot* out) const;

  const std::unique_ptr<DirectoryLock> lock_;  // held while the store is open
  Mutex reserve_mu_;                           // ReserveRunIds, one at a time
  std::unique_ptr<SqliteDb> reserver_
      ABSL_GUARDED_BY(reserve_mu_);  // opened at the first reservation
  const std::string path_;
  const size_t max_queued_bytes_;
  const int busy_timeout_ms_;
  std::unique_ptr<Writer> writer_;  // the writer thread's alone

  mutable Mutex mu_;
  CondVar wake_;          // writer: work queued or stopping
  mutable CondVar done_;  // Flush, ReadWindowRange: a batch was committed
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // queue_ plus the batch being written
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;    // items ever queued
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;     // items ever handled by the writer
  runs::RunId max_run_id_ ABSL_GUARDED_BY(mu_);
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);  // since the last Flush
  uint64_t write_errors_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_at_flush_ ABSL_GUARDED_BY(mu_) = 0;  // dropped_ at the last Flush
  uint64_t dropped_logged_ ABSL_GUARDED_BY(mu_) = 0;    // dropped_ at the last drop log line
  std::function<void(std::string_view)> log_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace perld::state
