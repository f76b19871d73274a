#include "daemon/state/state_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/mutex.h"
#include "daemon/core/distribution_merge.h"
#include "daemon/core/run_total.h"
#include "daemon/core/thread_name.h"
#include "daemon/state/distribution_codec.h"
#include "daemon/state/sqlite_db.h"
#include "daemon/state/state_schema.h"

namespace perld::state {
namespace {

using Kind = runs::WindowRecord::Kind;

// --- the state directory -----------------------------------------------------

absl::Status DirectoryError(const std::string& dir, absl::string_view what) {
  return absl::ErrnoToStatus(errno, absl::StrCat("state directory '", dir, "': ", what));
}

// mkdir -p: creates every missing component of `dir` with mode 0750 (less
// the umask).
absl::Status MakeDirectories(const std::string& dir) {
  for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string prefix = dir.substr(0, end);
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "state directory '", dir, "': cannot create: '", prefix, "' is not a directory"));
      }
    } else if (errno != ENOENT || (::mkdir(prefix.c_str(), 0750) != 0 && errno != EEXIST)) {
      return DirectoryError(dir, absl::StrCat("cannot create '", prefix, "'"));
    }
    if (end == std::string::npos) {
      return absl::OkStatus();
    }
  }
}

// Root ignores permission bits, so ask the kernel: create and remove a file.
absl::Status ProbeWritable(const std::string& dir) {
  const std::string probe = absl::StrCat(dir, "/.perld-write-probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return DirectoryError(dir, "not writable");
  }
  ::close(fd);
  if (::unlink(probe.c_str()) != 0) {
    return DirectoryError(dir, "not writable (removing a probe file)");
  }
  return absl::OkStatus();
}

// Prefixes `s` with "state database 'PATH': " unless it names the path.
absl::Status Annotate(const absl::Status& s, const std::string& path) {
  if (s.ok() || absl::StrContains(s.message(), path)) {
    return s;
  }
  return absl::Status(s.code(), absl::StrCat("state database '", path, "': ", s.message()));
}

// --- queue accounting --------------------------------------------------------

size_t SnapshotBytes(const LatencySnapshot& s) {
  return sizeof(double) * (s.percents.size() + s.fractions.size()) +
         sizeof(int64_t) * (s.values.size() + s.counts.size());
}

size_t WindowBytes(const runs::WindowRecord& w) {
  return sizeof(runs::WindowRecord) + SnapshotBytes(w.snapshot) +
         sizeof(LatencyBucket) * w.distribution.size();
}

size_t UpstreamBytes(const std::vector<UpstreamMessage>& messages) {
  size_t bytes = 0;
  for (const UpstreamMessage& m : messages) {
    bytes += sizeof(UpstreamMessage) + m.bytes.size();
  }
  return bytes;
}

size_t RunBytes(const runs::RunInfo& r) {
  constexpr size_t kMapNode = 64;  // a std::map node's overhead, roughly
  size_t bytes = sizeof(runs::RunInfo) + r.spec.name.size() + r.spec.clock.size() +
                 r.spec.parameters.size() + r.failure_reason.size() +
                 sizeof(double) * r.spec.latency.percentiles.size();
  for (const auto& [key, value] : r.spec.labels) {
    bytes += kMapNode + key.size() + value.size();
  }
  return bytes;
}

std::string Describe(const runs::WindowRecord& w) {
  return absl::StrCat("run ", w.run_id, " ", runs::WindowKindName(w.kind), " window ", w.seq);
}

// Calls fn(stmt) for every row of `sql`; stops at the first error.
template <typename RowFn>
absl::Status ForEachRow(SqliteDb& db, const std::string& sql, RowFn&& fn) {
  absl::StatusOr<SqliteStatement> select = db.Prepare(sql);
  if (!select.ok()) {
    return select.status();
  }
  for (;;) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok() || !*row) {
      return row.status();
    }
    if (absl::Status s = fn(*select); !s.ok()) {
      return s;
    }
  }
}

// Finds runs for child rows that arrive in run id order (a merge join).
class RunCursor {
 public:
  explicit RunCursor(std::vector<StoredRun>* runs) : runs_(*runs) {}
  // The run with `id`, or null when it does not exist. REQUIRES: ids
  // non-decreasing across calls.
  StoredRun* Find(runs::RunId id) {
    while (next_ < runs_.size() && runs_[next_].info.id < id) {
      ++next_;
    }
    return next_ < runs_.size() && runs_[next_].info.id == id ? &runs_[next_] : nullptr;
  }

 private:
  std::vector<StoredRun>& runs_;
  size_t next_ = 0;
};

// Every run with its windows and total, in one read transaction (the three
// SELECTs see the same commit). Rows of a run that no longer exists (deleted
// in the sqlite3 shell, where foreign keys are off by default) are skipped.
absl::StatusOr<std::vector<StoredRun>> LoadAll(SqliteDb& db) {
  if (absl::Status s = db.Exec("BEGIN"); !s.ok()) {
    return s;
  }
  std::vector<StoredRun> runs;
  absl::Status s = ForEachRow(db, SelectRunsSql(), [&](const SqliteStatement& row) {
    absl::StatusOr<runs::RunInfo> run = ReadRun(row);
    if (!run.ok()) {
      return run.status();
    }
    runs.push_back(
        StoredRun{*std::move(run), {}, std::nullopt, absl::OkStatus(), std::nullopt, {}});
    return absl::OkStatus();
  });
  if (s.ok()) {
    RunCursor cursor(&runs);
    s = ForEachRow(db, SelectWindowsSql(), [&](const SqliteStatement& row) {
      absl::StatusOr<runs::WindowRecord> window = ReadWindow(row);
      if (!window.ok()) {
        return window.status();
      }
      if (StoredRun* run = cursor.Find(window->run_id)) {
        run->windows.push_back(*std::move(window));
      }
      return absl::OkStatus();
    });
  }
  if (s.ok()) {
    RunCursor cursor(&runs);
    s = ForEachRow(db, SelectTotalsSql(), [&](const SqliteStatement& row) {
      std::string_view blob;
      absl::StatusOr<runs::WindowRecord> total = ReadTotal(row, &blob);
      if (!total.ok()) {
        return total.status();
      }
      StoredRun* run = cursor.Find(total->run_id);
      if (run == nullptr) {
        return absl::OkStatus();
      }
      absl::StatusOr<std::vector<LatencyBucket>> distribution = DecodeDistribution(blob);
      if (distribution.ok()) {
        total->distribution = *std::move(distribution);
      } else {
        run->distribution_status = absl::DataLossError(
            absl::StrCat("state database '", db.path(), "': run ", total->run_id,
                         ": total distribution: ", distribution.status().message()));
      }
      run->total = *std::move(total);
      return absl::OkStatus();
    });
  }
  if (s.ok()) {
    RunCursor cursor(&runs);
    s = ForEachRow(db, SelectCheckpointsSql(), [&](const SqliteStatement& row) {
      std::string_view blob;
      absl::StatusOr<Checkpoint> checkpoint = ReadCheckpoint(row, &blob);
      if (!checkpoint.ok()) {
        return checkpoint.status();
      }
      StoredRun* run = cursor.Find(checkpoint->total.run_id);
      if (run == nullptr) {
        return absl::OkStatus();
      }
      absl::StatusOr<std::vector<LatencyBucket>> distribution = DecodeDistribution(blob);
      if (!distribution.ok()) {
        return absl::DataLossError(absl::StrCat(
            "run ", run->info.id, ": checkpoint distribution: ", distribution.status().message()));
      }
      checkpoint->total.distribution = *std::move(distribution);
      run->checkpoint = *std::move(checkpoint);
      return absl::OkStatus();
    });
  }
  if (s.ok()) {
    RunCursor cursor(&runs);
    s = ForEachRow(db, SelectCheckpointClientsSql(), [&](const SqliteStatement& row) {
      runs::RunId id = 0;
      absl::StatusOr<CheckpointClient> client = ReadCheckpointClient(row, &id);
      if (!client.ok()) {
        return client.status();
      }
      StoredRun* run = cursor.Find(id);
      if (run != nullptr && run->checkpoint) {
        run->checkpoint->clients.push_back(*std::move(client));
      }
      return absl::OkStatus();
    });
  }
  if (!s.ok()) {
    return s;  // closing the connection ends the read transaction
  }
  if (absl::Status c = db.Exec("COMMIT"); !c.ok()) {
    return c;
  }
  return runs;
}

}  // namespace

// --- the writer: one connection, its prepared statements, the batches --------

// Owned and used by the writer thread alone (created on the Open thread
// before the writer thread starts).
class StateStore::Writer {
 public:
  static absl::StatusOr<std::unique_ptr<Writer>> Create(SqliteDb db,
                                                        const config::RetentionConfig& retention) {
    auto w = std::unique_ptr<Writer>(new Writer(std::move(db), retention));
    const std::pair<SqliteStatement*, std::string> statements[] = {
        {&w->begin_, "BEGIN IMMEDIATE"},
        {&w->commit_, "COMMIT"},
        {&w->rollback_, "ROLLBACK"},
        {&w->savepoint_, "SAVEPOINT final_total"},
        {&w->release_, "RELEASE final_total"},
        {&w->rollback_to_, "ROLLBACK TO final_total"},
        {&w->upsert_run_, UpsertRunSql()},
        {&w->insert_window_, InsertWindowSql()},
        {&w->insert_total_, InsertTotalSql()},
        {&w->insert_checkpoint_, InsertCheckpointSql()},
        {&w->insert_checkpoint_client_, InsertCheckpointClientSql()},
        {&w->delete_checkpoint_, "DELETE FROM checkpoints WHERE run_id = ?1"},
        {&w->upsert_upstream_stream_,
         "INSERT INTO upstream_streams (run_id, next_sequence) VALUES (?1, ?2) "
         "ON CONFLICT (run_id) DO UPDATE SET next_sequence = max(next_sequence, "
         "excluded.next_sequence)"},
        {&w->insert_upstream_message_,
         "INSERT OR REPLACE INTO upstream_messages (run_id, sequence, message) VALUES (?1, ?2, "
         "?3)"},
        {&w->release_upstream_,
         "DELETE FROM upstream_messages WHERE run_id = ?1 AND sequence <= ?2"},
        {&w->delete_upstream_stream_, "DELETE FROM upstream_streams WHERE run_id = ?1"},
        {&w->trim_windows_,
         "DELETE FROM windows WHERE run_id = ?1 AND kind = 'periodic' AND seq > ?2"},
        {&w->delete_run_, "DELETE FROM runs WHERE id = ?1"},
        {&w->bump_max_run_id_, "UPDATE meta SET value = max(value, ?1) WHERE key = 'max_run_id'"},
        {&w->release_run_ids_,
         "UPDATE meta SET value = (SELECT max(coalesce((SELECT value FROM meta WHERE key = "
         "'max_run_id'), 0), coalesce((SELECT max(id) FROM runs), 0))) WHERE key = "
         "'reserved_run_id'"},
        {&w->delete_run_clients_, "DELETE FROM run_clients WHERE run_id = ?1"},
        {&w->insert_run_client_, InsertRunClientSql()},
        // Keep the newest max_finished_runs finished/failed runs by end time.
        {&w->prune_runs_,
         "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE state <> 'running' "
         "ORDER BY end_unix_ms DESC, id DESC LIMIT -1 OFFSET ?1)"},
        // One (run, kind): delete every seq up to the (N+1)-th newest.
        {&w->prune_windows_,
         "DELETE FROM windows WHERE run_id = ?1 AND kind = ?2 AND seq <= (SELECT seq FROM "
         "windows WHERE run_id = ?1 AND kind = ?2 ORDER BY seq DESC LIMIT 1 OFFSET ?3)"},
        // Every (run, kind) at once, for Open and SetRetention.
        {&w->prune_all_windows_,
         "DELETE FROM windows WHERE rowid IN (SELECT rowid FROM (SELECT rowid, row_number() "
         "OVER (PARTITION BY run_id ORDER BY seq DESC) AS n FROM windows WHERE kind = "
         "'periodic') WHERE n > ?1)"},
    };
    for (const auto& [stmt, sql] : statements) {
      absl::StatusOr<SqliteStatement> prepared = w->db_.Prepare(sql);
      if (!prepared.ok()) {
        return prepared.status();
      }
      *stmt = *std::move(prepared);
    }
    return w;
  }

  // Writes `batch` in one transaction, appending one Status per failure.
  // Returns the durable callbacks of the items written, once the
  // transaction committed.
  std::vector<const std::function<void()>*> Write(const std::deque<Queued>& batch,
                                                  std::vector<absl::Status>* errors) {
    std::vector<const std::function<void()>*> durable;
    if (absl::Status s = begin_.Run(); !s.ok()) {
      errors->push_back(Lost(batch.size(), s));
      return {};
    }
    Touched touched;
    for (const Queued& q : batch) {
      if (absl::Status s =
              std::visit([&](const auto& item) { return Apply(item, &touched); }, q.item);
          !s.ok()) {
        errors->push_back(s);
        if (RolledBack()) {
          errors->push_back(Lost(batch.size(), s));
          return {};
        }
      } else if (const auto* c = std::get_if<CheckpointItem>(&q.item); c && c->durable) {
        durable.push_back(&c->durable);
      } else if (const auto* f = std::get_if<FinalTotalItem>(&q.item); f && f->upstream.durable) {
        durable.push_back(&f->upstream.durable);
      } else if (const auto* r = std::get_if<RunClientsItem>(&q.item); r && r->durable) {
        durable.push_back(&r->durable);
      }
    }
    if (absl::Status s = ApplyRetention(touched); !s.ok()) {
      errors->push_back(s);
      if (RolledBack()) {
        errors->push_back(Lost(batch.size(), s));
        return {};
      }
    }
    if (absl::Status s = commit_.Run(); !s.ok()) {
      if (!RolledBack()) {
        rollback_.Run().IgnoreError();  // the commit's error is the one to report
      }
      errors->push_back(Lost(batch.size(), s));
      return {};
    }
    return durable;
  }

 private:
  // What a batch changed, for retention.
  struct Touched {
    std::set<std::pair<runs::RunId, Kind>> windows;
    runs::RunId max_run_id = 0;
    bool runs_ended = false;
    bool all = false;  // a RetentionItem: prune everything
  };

  Writer(SqliteDb db, const config::RetentionConfig& retention)
      : db_(std::move(db)), retention_(retention) {}

  bool RolledBack() const { return sqlite3_get_autocommit(db_.get()) != 0; }

  absl::Status Lost(size_t n, const absl::Status& cause) const {
    return absl::Status(cause.code(),
                        absl::StrCat("transaction rolled back: the ", n,
                                     " record(s) of this batch are lost (", cause.message(), ")"));
  }

  absl::Status Apply(const RunItem& item, Touched* touched) {
    if (absl::Status s = SaveRunRow(item.run); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("saving run ", item.run.id, ": ", s.message()));
    }
    Note(item.run, touched);
    return absl::OkStatus();
  }

  absl::Status Apply(const WindowItem& item, Touched* touched) {
    // The window's distribution, while the run's stored distributions of
    // its kind fit retention.maxWindowDistributionBytesPerRun (periodic) or
    // maxTotalSegmentBytesPerRun (total segments); past it, none (a range
    // over this window is refused, a spilled total has no percentiles: never
    // an answer from part of the data).
    const bool segment = item.window.kind == runs::WindowRecord::Kind::kTotalSegment;
    std::string blob;
    if (!item.window.distribution.empty()) {
      absl::StatusOr<std::string> encoded = EncodeDistribution(item.window.distribution);
      if (!encoded.ok()) {
        return absl::Status(
            encoded.status().code(),
            absl::StrCat("saving ", Describe(item.window), ": ", encoded.status().message()));
      }
      auto& [stored, over] =
          (segment ? segment_bytes_ : window_distribution_bytes_)[item.window.run_id];
      const int64_t budget = segment ? retention_.max_total_segment_bytes_per_run
                                     : retention_.max_window_distribution_bytes_per_run;
      const auto size = static_cast<int64_t>(encoded->size());
      if (stored + size <= budget) {
        stored += size;
        if (segment) counts_.segment_bytes.fetch_add(static_cast<uint64_t>(size));
        blob = *std::move(encoded);
      } else {
        (segment ? counts_.segments_unstored : counts_.windows_unstored).fetch_add(1);
        if (!std::exchange(over, true)) {
          log::Warning("run ", item.window.run_id, ": ", segment ? "total segment " : "window ",
                       item.window.seq, " on: distributions not stored, ", stored,
                       " bytes reached ",
                       segment ? "retention.maxTotalSegmentBytesPerRun ("
                               : "retention.maxWindowDistributionBytesPerRun (",
                       budget,
                       segment ? "); the run's total will have exact counters and no percentiles"
                               : "); ranges over these windows will be refused");
        }
      }
    }
    insert_window_.Reset();
    absl::Status s = BindWindow(item.window, blob, &insert_window_);
    if (s.ok()) {
      s = insert_window_.Run();
    }
    insert_window_.Reset();
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("saving ", Describe(item.window), ": ", s.message()));
    }
    // Total segments are not pruned by count: a spilled total needs them
    // all (their bytes have their own budget; they go with the run).
    if (!segment) touched->windows.emplace(item.window.run_id, item.window.kind);
    return absl::OkStatus();
  }

  absl::Status Apply(const FinalTotalItem& item, Touched* touched) {
    absl::Status s = SaveFinalTotal(item.run, item.total, item.upstream);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("saving the final total of run ", item.run.id, ": ", s.message()));
    }
    window_distribution_bytes_.erase(item.run.id);  // the run ended: no window follows
    segment_bytes_.erase(item.run.id);
    Note(item.run, touched);
    return absl::OkStatus();
  }

  // The checkpoint row and its clients under one savepoint: all or none.
  absl::Status Apply(const CheckpointItem& item, Touched* /*touched*/) {
    const Checkpoint& c = item.checkpoint;
    const runs::RunId run = c.total.run_id;
    absl::StatusOr<std::string> blob =
        item.clients_only ? std::string() : EncodeDistribution(c.total.distribution);
    if (!blob.ok()) {
      return absl::Status(blob.status().code(),
                          absl::StrCat("checkpoint of run ", run, ": ", blob.status().message()));
    }
    if (absl::Status s = savepoint_.Run(); !s.ok()) {
      return s;
    }
    absl::Status s;
    if (!item.clients_only) {
      insert_checkpoint_.Reset();
      s = BindCheckpoint(c, *blob, &insert_checkpoint_);
      if (s.ok()) {
        s = insert_checkpoint_.Run();
      }
      insert_checkpoint_.Reset();
      // A rate-controlled run's response view: the same cut, all or none.
      for (const Checkpoint& view : c.response_view) {
        if (!s.ok()) {
          break;
        }
        absl::StatusOr<std::string> view_blob = EncodeDistribution(view.total.distribution);
        if (!view_blob.ok()) {
          s = view_blob.status();
          break;
        }
        insert_checkpoint_.Reset();
        s = BindCheckpoint(view, *view_blob, &insert_checkpoint_);
        if (s.ok()) {
          s = insert_checkpoint_.Run();
        }
        insert_checkpoint_.Reset();
      }
    }
    for (const CheckpointClient& client : c.clients) {
      if (!s.ok()) {
        break;
      }
      insert_checkpoint_client_.Reset();
      BindCheckpointClient(run, client, &insert_checkpoint_client_);
      s = insert_checkpoint_client_.Run();
      insert_checkpoint_client_.Reset();
    }
    if (s.ok() && c.upstream_next_sequence > 0) {
      s = SaveUpstream(run, c.upstream, c.upstream_next_sequence);
    }
    return Settle(s, absl::StrCat("checkpoint of run ", run));
  }

  absl::Status Apply(const UpstreamReleaseItem& item, Touched* /*touched*/) {
    SqliteStatement& stmt = item.end ? delete_upstream_stream_ : release_upstream_;
    stmt.Reset();
    stmt.BindInt64(1, static_cast<int64_t>(item.run));
    if (!item.end) {
      stmt.BindInt64(2, static_cast<int64_t>(item.through));
    }
    absl::Status s = stmt.Run();
    stmt.Reset();
    return s;
  }

  // The stream's next sequence (never lowered) and its messages.
  absl::Status SaveUpstream(runs::RunId run, const std::vector<UpstreamMessage>& messages,
                            uint64_t next_sequence) {
    upsert_upstream_stream_.Reset();
    upsert_upstream_stream_.BindInt64(1, static_cast<int64_t>(run));
    upsert_upstream_stream_.BindInt64(2, static_cast<int64_t>(next_sequence));
    absl::Status s = upsert_upstream_stream_.Run();
    upsert_upstream_stream_.Reset();
    for (const UpstreamMessage& m : messages) {
      if (!s.ok()) {
        break;
      }
      insert_upstream_message_.Reset();
      insert_upstream_message_.BindInt64(1, static_cast<int64_t>(run));
      insert_upstream_message_.BindInt64(2, static_cast<int64_t>(m.sequence));
      insert_upstream_message_.BindBlob(3, m.bytes);
      s = insert_upstream_message_.Run();
      insert_upstream_message_.Reset();
    }
    return s;
  }

  absl::Status Apply(const TrimItem& item, Touched* /*touched*/) {
    trim_windows_.Reset();
    trim_windows_.BindInt64(1, static_cast<int64_t>(item.run));
    trim_windows_.BindInt64(2, item.periodic_seq);
    absl::Status s = trim_windows_.Run();
    trim_windows_.Reset();
    return s;
  }

  absl::Status Apply(const RunClientsItem& item, Touched* /*touched*/) {
    if (absl::Status s = savepoint_.Run(); !s.ok()) {
      return s;
    }
    delete_run_clients_.Reset();
    delete_run_clients_.BindInt64(1, static_cast<int64_t>(item.run));
    absl::Status s = delete_run_clients_.Run();
    delete_run_clients_.Reset();
    for (const CheckpointClient& client : item.clients) {
      if (!s.ok()) {
        break;
      }
      insert_run_client_.Reset();
      BindCheckpointClient(item.run, client, &insert_run_client_);
      s = insert_run_client_.Run();
      insert_run_client_.Reset();
    }
    return Settle(s, absl::StrCat("clients of run ", item.run));
  }

 public:
  // A clean stop: the reserved ids nobody took are given back.
  absl::Status ReleaseUnusedRunIds() {
    release_run_ids_.Reset();
    absl::Status s = release_run_ids_.Run();
    release_run_ids_.Reset();
    return s;
  }

 private:
  absl::Status Apply(const DeleteItem& item, Touched* /*touched*/) {
    for (const runs::RunId id : item.ids) {
      delete_run_.Reset();
      delete_run_.BindInt64(1, static_cast<int64_t>(id));
      if (absl::Status s = delete_run_.Run(); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("deleting run ", id, ": ", s.message()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Apply(const RetentionItem& item, Touched* touched) {
    retention_ = item.retention;
    touched->all = true;
    return absl::OkStatus();
  }

  void Note(const runs::RunInfo& run, Touched* touched) {
    touched->max_run_id = std::max(touched->max_run_id, run.id);
    touched->runs_ended |= run.state != runs::RunState::kRunning;
  }

  absl::Status SaveRunRow(const runs::RunInfo& run) {
    upsert_run_.Reset();
    BindRun(run, &upsert_run_);
    return upsert_run_.Run();
  }

  // The run row and the total (and the run's last messages to the parent)
  // under one savepoint: all or none.
  absl::Status SaveFinalTotal(const runs::RunInfo& run, const runs::WindowRecord& total,
                              const UpstreamTail& upstream) {
    if (total.kind != Kind::kTotal || total.run_id != run.id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the total is a ", runs::WindowKindName(total.kind), " window of run ", total.run_id));
    }
    absl::StatusOr<std::string> blob = EncodeDistribution(total.distribution);
    if (!blob.ok()) {
      return blob.status();
    }
    if (absl::Status s = savepoint_.Run(); !s.ok()) {
      return s;
    }
    absl::Status s = SaveRunRow(run);
    if (s.ok()) {
      insert_total_.Reset();
      s = BindTotal(total, *blob, &insert_total_);
      if (s.ok()) {
        s = insert_total_.Run();
      }
      insert_total_.Reset();
    }
    if (s.ok()) {
      delete_checkpoint_.Reset();
      delete_checkpoint_.BindInt64(1, static_cast<int64_t>(run.id));
      s = delete_checkpoint_.Run();
      delete_checkpoint_.Reset();
    }
    if (s.ok() && upstream.next_sequence > 0) {
      s = SaveUpstream(run.id, upstream.messages, upstream.next_sequence);
    }
    return Settle(s, "");
  }

  // Ends the savepoint opened before a multi-row record: released when `s`
  // is OK, rolled back to otherwise. Returns `s` (prefixed by `what`).
  absl::Status Settle(absl::Status s, absl::string_view what) {
    if (!s.ok() && !RolledBack()) {
      rollback_to_.Run().IgnoreError();  // s is the error to report
    }
    if (!RolledBack()) {
      absl::Status released = release_.Run();
      if (s.ok()) {
        s = released;
      }
    }
    if (!s.ok() && !what.empty()) {
      s = absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    }
    return s;
  }

  absl::Status ApplyRetention(const Touched& touched) {
    if (touched.max_run_id > 0) {
      bump_max_run_id_.Reset();
      bump_max_run_id_.BindInt64(1, static_cast<int64_t>(touched.max_run_id));
      if (absl::Status s = bump_max_run_id_.Run(); !s.ok()) {
        return s;
      }
    }
    if (touched.all) {
      prune_all_windows_.Reset();
      prune_all_windows_.BindInt64(1, retention_.max_windows_per_run);
      if (absl::Status s = prune_all_windows_.Run(); !s.ok()) {
        return Retention(s);
      }
    } else {
      for (const auto& [run_id, kind] : touched.windows) {
        prune_windows_.Reset();
        prune_windows_.BindInt64(1, static_cast<int64_t>(run_id));
        prune_windows_.BindText(2, runs::WindowKindName(kind));
        prune_windows_.BindInt64(3, retention_.max_windows_per_run);
        if (absl::Status s = prune_windows_.Run(); !s.ok()) {
          return Retention(s);
        }
      }
    }
    if (touched.all || touched.runs_ended) {
      prune_runs_.Reset();
      prune_runs_.BindInt64(1, retention_.max_finished_runs);
      if (absl::Status s = prune_runs_.Run(); !s.ok()) {
        return Retention(s);
      }
    }
    return absl::OkStatus();
  }

  static absl::Status Retention(const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("applying retention: ", s.message()));
  }

  SqliteDb db_;  // first: destroyed after its statements
  SqliteStatement begin_, commit_, rollback_, savepoint_, release_, rollback_to_;
  SqliteStatement upsert_run_, insert_window_, insert_total_, delete_run_, bump_max_run_id_;
  SqliteStatement release_run_ids_, delete_run_clients_, insert_run_client_;
  SqliteStatement prune_runs_, prune_windows_, prune_all_windows_;
  SqliteStatement insert_checkpoint_, insert_checkpoint_client_, delete_checkpoint_, trim_windows_;
  SqliteStatement upsert_upstream_stream_, insert_upstream_message_, release_upstream_,
      delete_upstream_stream_;
  config::RetentionConfig retention_;
  // Per running run: bytes of periodic window (total segment) distributions
  // stored by this process (a run resumed after a restart starts from 0
  // again; the entry goes with the run's final total), and whether the run
  // went past its budget (logged once).
  struct StoredBytes {
    int64_t bytes = 0;
    bool over = false;
  };
  std::map<runs::RunId, StoredBytes> window_distribution_bytes_;
  std::map<runs::RunId, StoredBytes> segment_bytes_;

 public:
  // Written here, read by any thread (StateStore::distribution_counts).
  struct {
    std::atomic<uint64_t> segment_bytes{0};
    std::atomic<uint64_t> segments_unstored{0};
    std::atomic<uint64_t> windows_unstored{0};
  } counts_;
};

// --- StateStore --------------------------------------------------------------

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(
    const std::string& dir, const config::RetentionConfig& retention, StateStoreOptions options) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("state directory: empty path");
  }
  if (absl::Status s = MakeDirectories(dir); !s.ok()) {
    return s;
  }
  if (absl::Status s = ProbeWritable(dir); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<DirectoryLock>> lock = DirectoryLock::Acquire(dir);
  if (!lock.ok()) {
    return lock.status();
  }
  const std::string path = absl::StrCat(dir, "/", kFileName);
  absl::StatusOr<SqliteDb> db = SqliteDb::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!db.ok()) {
    return Annotate(db.status(), path);
  }
  if (const int rc = sqlite3_busy_timeout(db->get(), options.busy_timeout_ms); rc != SQLITE_OK) {
    return Annotate(SqliteStatus(db->get(), rc, "setting the busy timeout"), path);
  }
  // The first read of the file: a file that is not a database fails here.
  absl::StatusOr<std::string> check = db->QueryText("PRAGMA quick_check");
  if (!check.ok()) {
    return Annotate(check.status(), path);
  }
  if (*check != "ok") {
    return absl::DataLossError(absl::StrCat("state database '", path, "': corrupt (quick_check: ",
                                            *check, "); move it away to start a new history"));
  }
  absl::StatusOr<std::string> mode = db->QueryText("PRAGMA journal_mode = WAL");
  if (!mode.ok()) {
    return Annotate(mode.status(), path);
  }
  if (*mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat(
        "state database '", path, "': cannot use WAL mode (journal_mode stays '", *mode, "')"));
  }
  // synchronous=FULL: every commit syncs the WAL before it returns, so an
  // acknowledgement that follows a commit survives a power loss (NORMAL
  // syncs only at WAL checkpoints).
  if (absl::Status s = db->Exec("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
                                "PRAGMA journal_size_limit = 67108864");
      !s.ok()) {
    return Annotate(s, path);
  }
  if (absl::Status s = CreateOrCheckSchema(*db); !s.ok()) {
    return Annotate(s, path);
  }
  absl::StatusOr<runs::RunId> max_run_id = ReadMaxRunId(*db);
  if (!max_run_id.ok()) {
    return Annotate(max_run_id.status(), path);
  }
  absl::StatusOr<std::unique_ptr<Writer>> writer = Writer::Create(*std::move(db), retention);
  if (!writer.ok()) {
    return Annotate(writer.status(), path);
  }
  std::unique_ptr<StateStore> store(
      new StateStore(path, *std::move(lock), *std::move(writer), *max_run_id, std::move(options)));
  store->SetRetention(retention);  // prune what an earlier, larger retention kept
  return store;
}

StateStore::StateStore(std::string path, std::unique_ptr<DirectoryLock> lock,
                       std::unique_ptr<Writer> writer, runs::RunId max_run_id,
                       StateStoreOptions options)
    : lock_(std::move(lock)),
      path_(std::move(path)),
      max_queued_bytes_(options.max_queued_bytes),
      busy_timeout_ms_(options.busy_timeout_ms),
      writer_(std::move(writer)),
      max_run_id_(max_run_id),
      log_(std::move(options.log)),
      thread_([this] {
        NameThisThread("perld-state");
        WriterLoop();
      }) {}

StateStore::~StateStore() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.NotifyOne();
  thread_.join();
}

void StateStore::Enqueue(Item item, size_t bytes) {
  {
    MutexLock lock(mu_);
    if (const auto* r = std::get_if<RunItem>(&item)) {
      max_run_id_ = std::max(max_run_id_, r->run.id);
    } else if (const auto* t = std::get_if<FinalTotalItem>(&item)) {
      max_run_id_ = std::max(max_run_id_, t->run.id);
    }
    queue_.push_back(Queued{std::move(item), bytes});
    queued_bytes_ += bytes;
    ++enqueued_;
  }
  wake_.NotifyOne();
}

void StateStore::SaveRun(runs::RunInfo run) {
  const size_t bytes = RunBytes(run);
  Enqueue(RunItem{std::move(run)}, bytes);
}

void StateStore::SaveWindow(const runs::WindowRecord& window) {
  // Every stored member: the distribution of a periodic window (range
  // queries merge them) and of a total segment (a spilled total is their
  // merge). Positional on
  // purpose: a member added to WindowRecord makes
  // -Wmissing-field-initializers fail the build here.
  runs::WindowRecord copy{window.run_id,
                          window.kind,
                          window.seq,
                          window.start_unix_ms,
                          window.end_unix_ms,
                          window.seconds,
                          window.rate_seconds,
                          window.snapshot,
                          window.distribution,
                          window.segments,
                          window.exact_total,
                          window.spilled,
                          0,
                          0,
                          0,
                          {},
                          {},
                          false,
                          false,
                          {},
                          window.schedule};  // live-only: through_window, recorder_bytes,
                                             // cache_releases, remote, applied, cut, warmup,
                                             // left out
  const size_t bytes = WindowBytes(copy);
  {
    MutexLock lock(mu_);
    if (copy.kind == runs::WindowRecord::Kind::kTotalSegment) {
      // A spilled total needs every one of its segments: wait for room
      // instead of dropping (a segment is one total window's worth of
      // distinct latencies, so they are rare).
      done_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return queued_bytes_ == 0 || queued_bytes_ + bytes <= max_queued_bytes_;
      });
    } else if (queued_bytes_ + bytes > max_queued_bytes_) {
      ++dropped_;
      lock.Unlock();
      wake_.NotifyOne();  // the writer logs the drop
      return;
    }
  }
  Enqueue(WindowItem{std::move(copy)}, bytes);
}

void StateStore::SaveFinalTotal(runs::RunInfo run, runs::WindowRecord total,
                                UpstreamTail upstream) {
  const size_t bytes = RunBytes(run) + WindowBytes(total) + UpstreamBytes(upstream.messages);
  Enqueue(FinalTotalItem{std::move(run), std::move(total), std::move(upstream)}, bytes);
}

void StateStore::SaveCheckpoint(Checkpoint checkpoint, std::function<void()> durable) {
  size_t bytes = WindowBytes(checkpoint.total);
  for (const Checkpoint& view : checkpoint.response_view) bytes += WindowBytes(view.total);
  for (const CheckpointClient& c : checkpoint.clients) {
    bytes += sizeof(CheckpointClient) + c.id.size() + c.name.size();
  }
  bytes += UpstreamBytes(checkpoint.upstream);
  {
    MutexLock lock(mu_);
    // A newer checkpoint of the run replaces one the writer has not taken.
    for (Queued& q : queue_) {
      auto* older = std::get_if<CheckpointItem>(&q.item);
      if (older != nullptr && !older->clients_only &&
          older->checkpoint.total.run_id == checkpoint.total.run_id) {
        // The older one's messages to the parent are not stored yet: this
        // one carries them too (its `durable` covers them).
        std::vector<UpstreamMessage>& carried = older->checkpoint.upstream;
        bytes += UpstreamBytes(carried);
        queued_bytes_ = queued_bytes_ - q.bytes + bytes;
        q.bytes = bytes;
        carried.insert(carried.end(), std::make_move_iterator(checkpoint.upstream.begin()),
                       std::make_move_iterator(checkpoint.upstream.end()));
        checkpoint.upstream = std::move(carried);
        *older = CheckpointItem{std::move(checkpoint), std::move(durable)};
        return;
      }
    }
  }
  Enqueue(CheckpointItem{std::move(checkpoint), std::move(durable)}, bytes);
}

void StateStore::SaveCheckpointClients(runs::RunId run, std::vector<CheckpointClient> clients,
                                       std::function<void()> durable) {
  CheckpointItem item;
  item.checkpoint.total.run_id = run;
  item.checkpoint.clients = std::move(clients);
  item.durable = std::move(durable);
  item.clients_only = true;
  const size_t bytes = sizeof(Queued) + sizeof(CheckpointClient) * item.checkpoint.clients.size();
  Enqueue(std::move(item), bytes);
}

void StateStore::ReleaseUpstream(runs::RunId run, uint64_t through) {
  Enqueue(UpstreamReleaseItem{run, through, false}, sizeof(Queued));
}

void StateStore::EndUpstream(runs::RunId run) {
  Enqueue(UpstreamReleaseItem{run, 0, true}, sizeof(Queued));
}

void StateStore::SaveRunClients(runs::RunId run, std::vector<CheckpointClient> clients,
                                std::function<void()> durable) {
  size_t bytes = sizeof(Queued) + clients.size() * sizeof(CheckpointClient);
  for (const CheckpointClient& c : clients) bytes += c.id.size() + c.name.size();
  Enqueue(RunClientsItem{run, std::move(clients), std::move(durable)}, bytes);
}

absl::Status StateStore::ReserveRunIds(runs::RunId through) {
  {
    MutexLock lock(mu_);
    max_run_id_ = std::max(max_run_id_, through);
  }
  // Its own connection, not the writer's queue: a caller may hold a lock
  // that a commit callback of the writer needs (the RunTable creates runs
  // under its lock), so a reservation never waits for the writer thread,
  // only (busy timeout) for SQLite's write lock, which no callback holds.
  MutexLock one(reserve_mu_);
  if (!reserver_) {
    absl::StatusOr<SqliteDb> db = SqliteDb::Open(path_, SQLITE_OPEN_READWRITE);
    if (!db.ok()) return Annotate(db.status(), path_);
    if (const int rc = sqlite3_busy_timeout(db->get(), busy_timeout_ms_); rc != SQLITE_OK) {
      return Annotate(SqliteStatus(db->get(), rc, "setting the busy timeout"), path_);
    }
    if (absl::Status s = db->Exec("PRAGMA synchronous = FULL"); !s.ok()) return Annotate(s, path_);
    reserver_ = std::make_unique<SqliteDb>(*std::move(db));
  }
  absl::StatusOr<SqliteStatement> update =
      reserver_->Prepare("UPDATE meta SET value = max(value, ?1) WHERE key = 'reserved_run_id'");
  if (!update.ok()) return Annotate(update.status(), path_);
  update->BindInt64(1, static_cast<int64_t>(through));
  if (absl::Status s = update->Run(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("state database '", path_,
                                               "': cannot reserve run ids: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckpointClient>> StateStore::LoadRunClients(runs::RunId run) const {
  absl::StatusOr<SqliteDb> db = OpenReader();
  if (!db.ok()) return db.status();
  absl::StatusOr<SqliteStatement> select = db->Prepare(SelectRunClientsSql());
  if (!select.ok()) return select.status();
  select->BindInt64(1, static_cast<int64_t>(run));
  std::vector<CheckpointClient> out;
  for (;;) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    runs::RunId owner = 0;
    absl::StatusOr<CheckpointClient> client = ReadCheckpointClient(*select, &owner);
    if (!client.ok()) return client.status();
    out.push_back(*std::move(client));
  }
  return out;
}

void StateStore::TrimWindows(runs::RunId run, int64_t periodic_seq) {
  Enqueue(TrimItem{run, periodic_seq}, sizeof(Queued));
}

void StateStore::DeleteRuns(std::vector<runs::RunId> ids) {
  const size_t bytes = sizeof(Queued) + sizeof(runs::RunId) * ids.size();
  Enqueue(DeleteItem{std::move(ids)}, bytes);
}

void StateStore::SetRetention(const config::RetentionConfig& retention) {
  Enqueue(RetentionItem{retention}, sizeof(Queued));
}

void StateStore::SetLogCallback(std::function<void(std::string_view)> log) {
  MutexLock lock(mu_);
  log_ = std::move(log);
}

void StateStore::WriterLoop() {
  std::deque<Queued> batch;
  std::vector<absl::Status> errors;
  std::vector<std::string> lines;
  for (;;) {
    std::function<void(std::string_view)> log;
    bool stop = false;
    {
      MutexLock lock(mu_);
      wake_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_ || dropped_ != dropped_logged_;
      });
      if (dropped_ != dropped_logged_) {
        lines.push_back(absl::StrCat("state store '", path_, "': queue over ", max_queued_bytes_,
                                     " bytes: dropped ", dropped_ - dropped_logged_, " window(s), ",
                                     dropped_, " since start"));
        dropped_logged_ = dropped_;
      }
      batch.swap(queue_);
      stop = stopping_ && batch.empty();
      log = log_;
    }
    for (const std::string& line : lines) {
      if (log) {
        log(line);
      }
    }
    lines.clear();
    if (stop) {
      if (absl::Status s = writer_->ReleaseUnusedRunIds(); !s.ok() && log) {
        log(absl::StrCat("state store '", path_, "': ", s.ToString()));
      }
      return;
    }
    if (batch.empty()) {
      continue;
    }
    for (const std::function<void()>* durable : writer_->Write(batch, &errors)) {
      (*durable)();
    }
    for (const absl::Status& e : errors) {  // before Flush can return
      if (log) {
        log(absl::StrCat("state store '", path_, "': write error: ", e.ToString()));
      }
    }
    size_t bytes = 0;
    for (const Queued& q : batch) {
      bytes += q.bytes;
    }
    {
      MutexLock lock(mu_);
      written_ += batch.size();
      queued_bytes_ -= bytes;
      write_errors_ += errors.size();
      if (first_error_.ok() && !errors.empty()) {
        first_error_ = errors.front();
      }
    }
    done_.NotifyAll();
    errors.clear();
    batch.clear();
  }
}

absl::Status StateStore::Flush() {
  MutexLock lock(mu_);
  const uint64_t target = enqueued_;
  done_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return written_ >= target; });
  absl::Status s = std::exchange(first_error_, absl::OkStatus());
  if (s.ok() && dropped_ != dropped_at_flush_) {
    s = absl::ResourceExhaustedError(
        absl::StrCat("state store '", path_, "': ", dropped_ - dropped_at_flush_,
                     " window(s) dropped: more than ", max_queued_bytes_, " bytes were queued"));
  }
  dropped_at_flush_ = dropped_;
  return s;
}

runs::RunId StateStore::MaxRunId() const {
  MutexLock lock(mu_);
  return max_run_id_;
}

uint64_t StateStore::write_errors() const {
  MutexLock lock(mu_);
  return write_errors_;
}

int64_t StateStore::SqliteMemoryBytes() { return sqlite3_memory_used(); }

StateStore::DistributionCounts StateStore::distribution_counts() const {
  return DistributionCounts{writer_->counts_.segment_bytes.load(),
                            writer_->counts_.segments_unstored.load(),
                            writer_->counts_.windows_unstored.load()};
}

uint64_t StateStore::dropped_windows() const {
  MutexLock lock(mu_);
  return dropped_;
}

absl::StatusOr<SqliteDb> StateStore::OpenReader() const {
  absl::StatusOr<SqliteDb> db = SqliteDb::Open(path_, SQLITE_OPEN_READONLY);
  if (!db.ok()) {
    return Annotate(db.status(), path_);
  }
  if (const int rc = sqlite3_busy_timeout(db->get(), busy_timeout_ms_); rc != SQLITE_OK) {
    return Annotate(SqliteStatus(db->get(), rc, "setting the busy timeout"), path_);
  }
  return db;
}

absl::StatusOr<std::vector<UpstreamBacklog>> StateStore::LoadUpstream() const {
  absl::StatusOr<SqliteDb> db = OpenReader();
  if (!db.ok()) {
    return db.status();
  }
  std::vector<UpstreamBacklog> streams;
  absl::Status s = ForEachRow(*db, SelectUpstreamStreamsSql(), [&](const SqliteStatement& row) {
    UpstreamBacklog& b = streams.emplace_back();
    b.run = static_cast<runs::RunId>(row.ColumnInt64(0));
    b.next_sequence = static_cast<uint64_t>(row.ColumnInt64(1));
    b.first_sequence =
        row.ColumnIsNull(2) ? b.next_sequence : static_cast<uint64_t>(row.ColumnInt64(2));
    if (b.first_sequence == 0 || b.first_sequence > b.next_sequence) {
      return absl::DataLossError(absl::StrCat("run ", b.run, ": upstream message ",
                                              b.first_sequence,
                                              " is not below the stream's next "
                                              "sequence ",
                                              b.next_sequence));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) {
    return Annotate(s, path_);
  }
  return streams;
}

absl::StatusOr<std::vector<UpstreamMessage>> StateStore::LoadUpstreamMessages(
    runs::RunId run, uint64_t from_sequence, size_t max_messages) const {
  absl::StatusOr<SqliteDb> db = OpenReader();
  if (!db.ok()) {
    return db.status();
  }
  absl::StatusOr<SqliteStatement> select = db->Prepare(SelectUpstreamMessagesSql());
  if (!select.ok()) {
    return Annotate(select.status(), path_);
  }
  select->BindInt64(1, static_cast<int64_t>(run));
  select->BindInt64(2, static_cast<int64_t>(from_sequence));
  select->BindInt64(3, static_cast<int64_t>(max_messages));
  std::vector<UpstreamMessage> messages;
  for (;;) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) {
      return Annotate(row.status(), path_);
    }
    if (!*row) {
      return messages;
    }
    messages.push_back(UpstreamMessage{static_cast<uint64_t>(select->ColumnInt64(0)),
                                       std::string(select->ColumnBlob(1))});
  }
}

absl::StatusOr<std::vector<runs::WindowRecord>> StateStore::ReadWindowRange(
    runs::RunId run, const WindowRange& range) const {
  WaitCommitted();
  absl::StatusOr<SqliteDb> db = OpenReader();
  if (!db.ok()) return db.status();
  absl::StatusOr<SqliteStatement> select = db->Prepare(SelectWindowRangeSql());
  if (!select.ok()) return select.status();
  select->BindInt64(1, static_cast<int64_t>(run));
  select->BindInt64(2, range.first_seq);
  select->BindInt64(3, range.last_seq);
  select->BindInt64(4, range.from_unix_ms);
  select->BindInt64(5, range.to_unix_ms);
  std::vector<runs::WindowRecord> out;
  for (;;) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return Annotate(row.status(), path_);
    if (!*row) break;
    absl::StatusOr<runs::WindowRecord> w = ReadWindow(*select);
    if (!w.ok()) return Annotate(w.status(), path_);
    const std::string_view blob = select->ColumnBlob(WindowBlobColumn());
    if (!blob.empty()) {
      absl::StatusOr<std::vector<LatencyBucket>> d = DecodeDistribution(blob);
      if (!d.ok()) {
        return Annotate(absl::DataLossError(absl::StrCat("run ", run, " window ", w->seq,
                                                         ": distribution: ", d.status().message())),
                        path_);
      }
      w->distribution = *std::move(d);
    }
    out.push_back(*std::move(w));
  }
  return out;
}

// A stored window row to merge: where its blob is and what it should hold.
struct StateStore::StoredRow {
  int64_t rowid, seq, valid, bytes;
  bool segment;  // a total segment (else a periodic window)
};

namespace {

using StoredRow = StateStore::StoredRow;

absl::StatusOr<std::vector<StoredRow>> SelectStored(SqliteDb& db, const std::string& sql,
                                                    bool segments,
                                                    std::initializer_list<int64_t> args) {
  absl::StatusOr<SqliteStatement> select = db.Prepare(sql);
  if (!select.ok()) return select.status();
  int i = 1;
  for (int64_t arg : args) select->BindInt64(i++, arg);
  std::vector<StoredRow> rows;
  for (;;) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) return row.status();
    if (!*row) return rows;
    rows.push_back(StoredRow{select->ColumnInt64(0), select->ColumnInt64(1), select->ColumnInt64(2),
                             select->ColumnInt64(3), segments});
  }
}

// `set`'s percentiles of the merge of `rows`' blobs into `out` (whose valid
// is checked), each blob streamed.
absl::Status MergeStored(SqliteDb& db, runs::RunId run, std::span<const StoredRow> rows,
                         const PercentileSet& set, LatencySnapshot* out) {
  std::vector<SqliteBlob> blobs;
  blobs.reserve(rows.size());  // the sources point into it
  std::vector<std::unique_ptr<DistributionBlobSource>> sources;
  for (const StoredRow& row : rows) {
    const absl::string_view what = row.segment ? "total segment" : "window";
    if (row.valid == 0) continue;
    if (row.bytes == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run, ": ", what, " ", row.seq, " was stored without its distribution (past ",
          row.segment ? "retention.maxTotalSegmentBytesPerRun"
                      : "retention.maxWindowDistributionBytesPerRun",
          ")"));
    }
    absl::StatusOr<SqliteBlob> blob = db.OpenBlob("windows", "distribution", row.rowid);
    if (!blob.ok()) return blob.status();
    absl::StatusOr<std::unique_ptr<DistributionBlobSource>> source =
        DistributionBlobSource::OpenStored(&blobs.emplace_back(*std::move(blob)));
    if (!source.ok()) {
      return absl::Status(source.status().code(), absl::StrCat("run ", run, " ", what, " ", row.seq,
                                                               ": ", source.status().message()));
    }
    sources.push_back(*std::move(source));
  }
  std::vector<BucketSource*> inputs;
  inputs.reserve(sources.size());
  for (const auto& source : sources) inputs.push_back(source.get());
  absl::Status merged = MergedPercentiles(inputs, set, out);
  if (!merged.ok()) {
    return absl::Status(merged.code(), absl::StrCat("run ", run, ": merging ", rows.size(),
                                                    " stored distributions: ", merged.message()));
  }
  return absl::OkStatus();
}

}  // namespace

void StateStore::WaitCommitted() const {
  MutexLock lock(mu_);  // what was queued before the call is committed
  const uint64_t target = enqueued_;
  done_.Wait(mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return written_ >= target; });
}

absl::Status StateStore::MergeStoredRows(
    runs::RunId run, absl::FunctionRef<absl::Status(SqliteDb&, std::vector<StoredRow>*)> select,
    const PercentileSet& set, LatencySnapshot* out) const {
  WaitCommitted();
  absl::Status s = [&]() -> absl::Status {
    absl::StatusOr<SqliteDb> db = OpenReader();
    if (!db.ok()) return db.status();
    // One read transaction: the rows and their blobs as one snapshot.
    if (absl::Status begun = db->Exec("BEGIN"); !begun.ok()) return begun;
    std::vector<StoredRow> rows;
    if (absl::Status selected = select(*db, &rows); !selected.ok()) return selected;
    return MergeStored(*db, run, rows, set, out);
  }();
  if (s.ok()) return s;
  ClearPercentiles(out);  // never part of an answer
  return Annotate(s, path_);
}

absl::Status StateStore::MergeTotalSegments(runs::RunId run, int64_t segments,
                                            const PercentileSet& set, LatencySnapshot* out) const {
  return MergeStoredRows(
      run,
      [&](SqliteDb& db, std::vector<StoredRow>* rows) -> absl::Status {
        absl::StatusOr<std::vector<StoredRow>> got =
            SelectStored(db, SelectTotalSegmentsSql(), true, {static_cast<int64_t>(run), segments});
        if (!got.ok()) return got.status();
        // Newest first: the run's last `segments`, numbered without a gap.
        if (static_cast<int64_t>(got->size()) != segments ||
            (!got->empty() && got->front().seq - got->back().seq + 1 != segments)) {
          return absl::FailedPreconditionError(
              absl::StrCat("run ", run, ": its total has ", segments, " segments but ", got->size(),
                           " of them are stored (a window dropped before it was saved?)"));
        }
        *rows = *std::move(got);
        return absl::OkStatus();
      },
      set, out);
}

absl::Status StateStore::MergeRunningTotal(runs::RunId run, const runs::RunningTotalParts& parts,
                                           const PercentileSet& set, LatencySnapshot* out) const {
  return MergeStoredRows(
      run,
      [&](SqliteDb& db, std::vector<StoredRow>* rows) -> absl::Status {
        // Every number of each range must be stored, else part of the total is gone.
        for (const auto& [segments, first, last] :
             {std::tuple{true, parts.first_segment, parts.last_segment},
              std::tuple{false, parts.first_window, parts.last_window}}) {
          if (first == 0 || first > last) continue;
          absl::StatusOr<std::vector<StoredRow>> got =
              SelectStored(db, SelectStoredRangeSql(segments), segments,
                           {static_cast<int64_t>(run), first, last});
          if (!got.ok()) return got.status();
          if (static_cast<int64_t>(got->size()) != last - first + 1) {
            return absl::FailedPreconditionError(absl::StrCat(
                "run ", run, ": ", last - first + 1 - static_cast<int64_t>(got->size()), " of ",
                segments ? "total segments " : "windows ", first, "-", last,
                " are not stored (retention.maxWindowsPerRun, or a window the store dropped)"));
          }
          rows->insert(rows->end(), got->begin(), got->end());
        }
        return absl::OkStatus();
      },
      set, out);
}

absl::StatusOr<StateStore::MissingDistributions> StateStore::WindowsWithoutDistribution(
    runs::RunId run) const {
  absl::StatusOr<SqliteDb> db = OpenReader();
  if (!db.ok()) return db.status();
  absl::StatusOr<SqliteStatement> select = db->Prepare(SelectWindowsWithoutDistributionSql());
  if (!select.ok()) return select.status();
  select->BindInt64(1, static_cast<int64_t>(run));
  absl::StatusOr<bool> row = select->Step();
  if (!row.ok()) return Annotate(row.status(), path_);
  MissingDistributions out;
  if (*row) {
    out.windows = select->ColumnInt64(0);
    out.first_seq = select->ColumnInt64(1);
  }
  return out;
}

absl::StatusOr<std::vector<StoredRun>> StateStore::LoadRuns() const {
  absl::StatusOr<SqliteDb> db = OpenReader();
  if (!db.ok()) {
    return db.status();
  }
  absl::StatusOr<std::vector<StoredRun>> runs = LoadAll(*db);
  if (!runs.ok()) {
    return Annotate(runs.status(), path_);
  }
  return runs;
}

}  // namespace perld::state
