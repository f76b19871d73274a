// StateSchema: the tables of the state database DIR/perld.db (schema
// version 8) and the mapping between their rows and the runs vocabulary
// (RunInfo, WindowRecord). One place maps a run or a window to a row.
//
// kSchemaV1 and its upgrades below are the schema, verbatim: SQLite keeps
// the text with its comments, so `sqlite3 perld.db .schema` shows this
// documentation too.
// Design notes:
//  - Every table is STRICT (SQLite >= 3.37): a value of the wrong type is
//    refused on write, so readers can trust column types.
//  - Enumerations are stored as their stable spellings (RunStateName, ...)
//    and structured values as JSON text (json_columns.h), so a person with
//    the sqlite3 shell can read, filter (json_each) and export them.
//  - Child rows cascade: deleting a run deletes its windows and total
//    (PRAGMA foreign_keys=ON is set on every connection).
//  - Version 2 adds the `checkpoints` and `checkpoint_clients` tables (a
//    running ingest run's total and per-client sequence numbers at a cut,
//    checkpoint.h), created by kSchemaV2Upgrade from version 1.
//  - Version 3 adds `upstream_streams` and `upstream_messages`: a tier
//    edge's messages to its parent perld that the parent has not reported
//    durable (kSchemaV3Upgrade, from version 2).
//  - Version 4 adds `run_clients` (an ended remote run's clients as they
//    ended, so a client reconnecting after the end is answered for its
//    run) and meta.reserved_run_id (run ids handed out before their run row
//    is committed: never reused after a crash), kSchemaV4Upgrade.
//  - Version 5 adds runs.checkpointed (an ingest run checkpointed from its
//    start: a crash before its first checkpoint resumes it empty),
//    kSchemaV5Upgrade.
//  - Version 6 adds runs.end_reason (why an ended run ended: completed,
//    stopped, shutdown, failed; RunInfo::end_reason), kSchemaV6Upgrade.
//  - Version 7 adds rate_seconds to windows, totals and checkpoints (what a
//    window's rates divide by, WindowRecord::rate_seconds), kSchemaV7Upgrade.
//  - Version 8 adds windows.distribution: a periodic window's exact
//    distribution, merged by range queries, kSchemaV8Upgrade.
//  - Version 11 adds runs.bucketed_reason (RunSpec::bucketed_reason),
//    kSchemaV11Upgrade.
//  - Version 12 adds a rate-controlled run's views (issue 30):
//    runs.response_run, runs.service_run (RunInfo), runs.target_rate and
//    runs.late_threshold_ns (RunSpec), runs.rate_not_sustained (RunInfo),
//    kSchemaV12Upgrade.
#pragma once

#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/runs/run_info.h"
#include "daemon/runs/window_record.h"
#include "daemon/state/checkpoint.h"
#include "daemon/state/sqlite_db.h"

namespace perld::state {

inline constexpr int64_t kSchemaVersion = 13;

inline constexpr std::string_view kSchemaV1 = R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,  -- 'schema_version' (1), 'max_run_id' (highest run id ever saved)
  value ANY NOT NULL
) STRICT, WITHOUT ROWID;

-- One row per run: RunInfo and its RunSpec, LatencyConfig fields included.
CREATE TABLE runs (
  id                                INTEGER PRIMARY KEY,  -- RunId; never reused (meta.max_run_id)
  name                              TEXT NOT NULL,
  labels                            TEXT NOT NULL,  -- JSON object {"key":"value",...}
  source                            TEXT NOT NULL,  -- bench | ingest | sbp
  state                             TEXT NOT NULL,  -- running | finished | failed
  failure_reason                    TEXT NOT NULL,  -- '' unless failed
  time_unit                         TEXT NOT NULL,  -- ms | mcs | ns: the unit of every latency
  min_latency                       INTEGER NOT NULL,  -- inclusive
  max_latency                       INTEGER NOT NULL,  -- inclusive
  percentiles                       TEXT NOT NULL,  -- JSON array of percents, e.g. [50,99,99.9]
  max_array_size_mb                 INTEGER NOT NULL,
  max_hash_map_size_mb              INTEGER NOT NULL,
  total_max_hash_map_size_mb        INTEGER NOT NULL,
  exact_latency_page_bits           INTEGER NOT NULL,
  exact_latency_sparse_page_entries INTEGER NOT NULL,
  exact_latency_max_memory_mb       INTEGER NOT NULL,
  exact_total_latency_max_memory_mb INTEGER NOT NULL,
  reporting_interval_ms             INTEGER NOT NULL,
  periodic_recorder                 TEXT NOT NULL,  -- Array | LongHashMap | HashMap | HybridPaged
  total_recorder                    TEXT NOT NULL,
  clock                             TEXT NOT NULL,
  clock_resolution_ns               INTEGER NOT NULL,  -- 0: unknown
  parameters                        TEXT NOT NULL,  -- source-specific, human readable
  writers                           INTEGER NOT NULL,  -- SBK writer count (bench workers, clients)
  readers                           INTEGER NOT NULL,  -- SBK reader count
  start_unix_ms                     INTEGER NOT NULL,
  end_unix_ms                       INTEGER NOT NULL   -- 0 while running
) STRICT;

-- Closed periodic windows and total segments (WindowRecord without its
-- distribution). Latencies and start_time/end_time are in the run's unit.
CREATE TABLE windows (
  run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  kind           TEXT NOT NULL,     -- periodic | total_segment
  seq            INTEGER NOT NULL,  -- 1, 2, ... per run and kind, in closing order
  start_unix_ms  INTEGER NOT NULL,
  end_unix_ms    INTEGER NOT NULL,
  seconds        REAL NOT NULL,     -- window length as reports print it
  start_time     INTEGER NOT NULL,  -- monotonic clock, run's time unit
  end_time       INTEGER NOT NULL,
  records        INTEGER NOT NULL,
  bytes          INTEGER NOT NULL,
  total_latency  INTEGER NOT NULL,
  min_latency    INTEGER NOT NULL,
  max_latency    INTEGER NOT NULL,
  invalid        INTEGER NOT NULL,
  lower_discard  INTEGER NOT NULL,
  higher_discard INTEGER NOT NULL,
  valid          INTEGER NOT NULL,
  rejected       INTEGER NOT NULL,
  overflow       INTEGER NOT NULL,  -- 0 | 1
  closed_full    INTEGER NOT NULL,  -- 0 | 1
  full_closes    INTEGER NOT NULL,
  median         INTEGER NOT NULL,
  percentiles    TEXT NOT NULL,     -- JSON [[percent,value,count],...]
  PRIMARY KEY (run_id, kind, seq)
) STRICT;

-- A finished run's final total (WindowRecord kind total) with its exact
-- distribution: the columns of `windows`, plus segments, exact_total and
-- the DistributionCodec blob (distribution_codec.h).
CREATE TABLE totals (
  run_id         INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  seq            INTEGER NOT NULL,
  start_unix_ms  INTEGER NOT NULL,
  end_unix_ms    INTEGER NOT NULL,
  seconds        REAL NOT NULL,
  start_time     INTEGER NOT NULL,
  end_time       INTEGER NOT NULL,
  records        INTEGER NOT NULL,
  bytes          INTEGER NOT NULL,
  total_latency  INTEGER NOT NULL,
  min_latency    INTEGER NOT NULL,
  max_latency    INTEGER NOT NULL,
  invalid        INTEGER NOT NULL,
  lower_discard  INTEGER NOT NULL,
  higher_discard INTEGER NOT NULL,
  valid          INTEGER NOT NULL,
  rejected       INTEGER NOT NULL,
  overflow       INTEGER NOT NULL,
  closed_full    INTEGER NOT NULL,
  full_closes    INTEGER NOT NULL,
  median         INTEGER NOT NULL,
  percentiles    TEXT NOT NULL,
  segments       INTEGER NOT NULL,  -- total-window segments the run had
  exact_total    INTEGER NOT NULL,  -- 1: distribution covers every segment
  distribution   BLOB NOT NULL      -- "PDST" v1: delta/varint buckets + CRC32C
) STRICT;

INSERT INTO meta (key, value) VALUES ('schema_version', 1), ('max_run_id', 0);
)sql";

// Version 1 -> 2 (also run after kSchemaV1 for a new database).
inline constexpr std::string_view kSchemaV2Upgrade = R"sql(
-- A running ingest run's total at a cut (checkpoint.h): the columns of
-- `totals`, plus the cut's periodic window and the total segments so far.
-- Replaced at every checkpoint; deleted with the run's final total.
CREATE TABLE checkpoints (
  run_id         INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  seq            INTEGER NOT NULL,
  start_unix_ms  INTEGER NOT NULL,
  end_unix_ms    INTEGER NOT NULL,
  seconds        REAL NOT NULL,
  start_time     INTEGER NOT NULL,
  end_time       INTEGER NOT NULL,
  records        INTEGER NOT NULL,
  bytes          INTEGER NOT NULL,
  total_latency  INTEGER NOT NULL,
  min_latency    INTEGER NOT NULL,
  max_latency    INTEGER NOT NULL,
  invalid        INTEGER NOT NULL,
  lower_discard  INTEGER NOT NULL,
  higher_discard INTEGER NOT NULL,
  valid          INTEGER NOT NULL,
  rejected       INTEGER NOT NULL,
  overflow       INTEGER NOT NULL,
  closed_full    INTEGER NOT NULL,
  full_closes    INTEGER NOT NULL,
  median         INTEGER NOT NULL,
  percentiles    TEXT NOT NULL,
  segments       INTEGER NOT NULL,
  exact_total    INTEGER NOT NULL,
  distribution   BLOB NOT NULL,     -- "PDST" v1, as totals.distribution
  periodic_seq   INTEGER NOT NULL,  -- the cut: the last periodic window in the total
  segment_seq    INTEGER NOT NULL   -- total segments published up to the cut
) STRICT;

-- Per client of a checkpointed run: the last message sequence the
-- checkpoint's total holds (the client replays from the next one).
CREATE TABLE checkpoint_clients (
  run_id       INTEGER NOT NULL REFERENCES checkpoints(run_id) ON DELETE CASCADE,
  client_index INTEGER NOT NULL,  -- join order in the run
  client_id    TEXT NOT NULL,
  client_name  TEXT NOT NULL,
  mode         TEXT NOT NULL,     -- raw | windows
  applied      INTEGER NOT NULL,
  closed       INTEGER NOT NULL,  -- 0 | 1: closed with its last message applied
  PRIMARY KEY (run_id, client_index)
) STRICT;

UPDATE meta SET value = 2 WHERE key = 'schema_version';
)sql";

// Version 2 -> 3 (also run after the others for a new database).
inline constexpr std::string_view kSchemaV3Upgrade = R"sql(
-- A run this perld forwards to its parent (upstream.target) and whose
-- windows are checkpointed: the sequence its next message takes. Written
-- with the checkpoint that first covers a window; deleted once the stream
-- to the parent closed with every message durable there.
CREATE TABLE upstream_streams (
  run_id        INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  next_sequence INTEGER NOT NULL
) STRICT;

-- The messages of those streams the parent has not reported durable yet,
-- stored in the transaction of the checkpoint that covers their windows:
-- after a crash they are resent, and windows after the cut are never sent
-- twice (a window is sent only once its checkpoint committed).
CREATE TABLE upstream_messages (
  run_id   INTEGER NOT NULL REFERENCES upstream_streams(run_id) ON DELETE CASCADE,
  sequence INTEGER NOT NULL,
  message  BLOB NOT NULL,  -- a serialized perld.v1.IngestRequest (a window report)
  PRIMARY KEY (run_id, sequence)
) STRICT, WITHOUT ROWID;

UPDATE meta SET value = 3 WHERE key = 'schema_version';
)sql";

// Version 3 -> 4 (also run after the others for a new database).
inline constexpr std::string_view kSchemaV4Upgrade = R"sql(
-- An ended remote run's clients (ingest, SBP) as they were at its end,
-- written with its final total: a client that reconnects naming the run
-- (IngestOpen.run_id) after it ended is answered from here -- its repeated
-- close acknowledged, or refused because the run ended before it closed.
CREATE TABLE run_clients (
  run_id       INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  client_index INTEGER NOT NULL,  -- join order in the run
  client_id    TEXT NOT NULL,
  client_name  TEXT NOT NULL,
  mode         TEXT NOT NULL,     -- raw | windows
  applied      INTEGER NOT NULL,  -- its last message applied
  closed       INTEGER NOT NULL,  -- 0 | 1: it closed its part of the run
  PRIMARY KEY (run_id, client_index)
) STRICT;

-- Run ids are reserved in blocks, durably, before they are handed out: a
-- crash never lets a later start reuse an id a client was told. A clean
-- stop gives the unused rest of the block back.
INSERT OR IGNORE INTO meta (key, value) VALUES ('reserved_run_id', 0);

UPDATE meta SET value = 4 WHERE key = 'schema_version';
)sql";

// Version 4 -> 5 (also run after the others for a new database).
inline constexpr std::string_view kSchemaV5Upgrade = R"sql(
-- 1: an ingest run checkpointed from its start (ingest.checkpoints when it
-- was created). No client is told a message of it is durable before a
-- checkpoint holds the message, so a run stored running without a
-- checkpoint lost nothing it acknowledged: it resumes empty after a crash.
ALTER TABLE runs ADD COLUMN checkpointed INTEGER NOT NULL DEFAULT 0;

UPDATE meta SET value = 5 WHERE key = 'schema_version';
)sql";

// Version 5 -> 6 (also run after the others for a new database).
inline constexpr std::string_view kSchemaV6Upgrade = R"sql(
-- Why an ended run ended: completed | stopped (by request) | shutdown (the
-- daemon's) | failed (failure_reason says how); '' while running, and for
-- runs that ended before version 6 kept it.
ALTER TABLE runs ADD COLUMN end_reason TEXT NOT NULL DEFAULT '';

UPDATE meta SET value = 6 WHERE key = 'schema_version';
)sql";

inline constexpr std::string_view kSchemaV7Upgrade = R"sql(
-- The seconds a window's rates divide by: its length (seconds), except for
-- a periodic window that merged remote clients' windows, whose rate is the
-- sum of each client's records over the span of its own windows
-- (daemon/runs/window_rate.h). 0: the same as seconds (rows written before
-- version 7).
ALTER TABLE windows ADD COLUMN rate_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN rate_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN rate_seconds REAL NOT NULL DEFAULT 0;

UPDATE meta SET value = 7 WHERE key = 'schema_version';
)sql";

inline constexpr std::string_view kSchemaV8Upgrade = R"sql(
-- A periodic window's exact distribution ("PDST" v1, as totals.distribution):
-- what range queries (GetPercentiles with a range) merge. Empty: not kept
-- (total segments, rows before version 8, or a run past
-- retention.maxWindowDistributionBytesPerRun).
ALTER TABLE windows ADD COLUMN distribution BLOB NOT NULL DEFAULT x'';

UPDATE meta SET value = 8 WHERE key = 'schema_version';
)sql";

inline constexpr std::string_view kSchemaV9Upgrade = R"sql(
-- A run's SLO (perlctl bench/load --slo) and its latest verdict: state
-- (pending, holding, failing, passed, failed; '' without an SLO), the
-- periodic window it was evaluated at, and one line per term
-- ("PASS p99<=2ms: 1830 us (1.83 ms; the limit 2 ms)"), newline-separated.
ALTER TABLE runs ADD COLUMN slo TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN abort_on_fail INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN slo_state TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN slo_window INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN slo_verdicts TEXT NOT NULL DEFAULT '';

UPDATE meta SET value = 9 WHERE key = 'schema_version';
)sql";

inline constexpr std::string_view kSchemaV10Upgrade = R"sql(
-- Spilled run totals: windows rows of kind total_segment keep their
-- distribution (within retention.maxTotalSegmentBytesPerRun) and are not
-- pruned by retention.maxWindowsPerRun; totals.exact_total 2 marks a total
-- whose percentiles are the merge of the run's last `segments` total
-- segments (its distribution blob is empty: merge the segments for other
-- percentiles). No column changes; older perld must not read 2 as "exact
-- with a distribution".
UPDATE meta SET value = 10 WHERE key = 'schema_version';
)sql";

inline constexpr std::string_view kSchemaV11Upgrade = R"sql(
-- A bucketed run (RunSpec::bucketed_reason: latencies that stand for raw
-- ones, e.g. imported HdrHistogram bucket values) and why; '' for raw.
ALTER TABLE runs ADD COLUMN bucketed_reason TEXT NOT NULL DEFAULT '';

UPDATE meta SET value = 11 WHERE key = 'schema_version';
)sql";

inline constexpr std::string_view kSchemaV12Upgrade = R"sql(
-- A rate-controlled run's two views of its operations (issue 30): on the
-- service run its response view's id, on the view its service run's (0:
-- none); the target rate (operations/s, 0: closed loop) and late threshold.
ALTER TABLE runs ADD COLUMN response_run INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN service_run INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN target_rate REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN late_threshold_ns INTEGER NOT NULL DEFAULT 1000000;
ALTER TABLE runs ADD COLUMN rate_not_sustained INTEGER NOT NULL DEFAULT 0;

UPDATE meta SET value = 12 WHERE key = 'schema_version';
)sql";

inline constexpr std::string_view kSchemaV13Upgrade = R"sql(
-- A rate-controlled run's schedule (issue 30; runs::WindowRecord::Schedule)
-- per window, per total and per checkpoint, so the history keeps it and a
-- resumed run counts on from its checkpoint: operations with an intended
-- start, late ones, skipped slots, the largest, smallest and summed start
-- lag (in the run's time unit), whether the rate was not sustained. 0 for
-- closed-loop runs and rows written before.
ALTER TABLE windows ADD COLUMN schedule_operations INTEGER NOT NULL DEFAULT 0;
ALTER TABLE windows ADD COLUMN schedule_late INTEGER NOT NULL DEFAULT 0;
ALTER TABLE windows ADD COLUMN schedule_skipped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE windows ADD COLUMN schedule_max_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE windows ADD COLUMN schedule_min_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE windows ADD COLUMN schedule_total_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE windows ADD COLUMN schedule_not_sustained INTEGER NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN schedule_operations INTEGER NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN schedule_late INTEGER NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN schedule_skipped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN schedule_max_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN schedule_min_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN schedule_total_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE totals ADD COLUMN schedule_not_sustained INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN schedule_operations INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN schedule_late INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN schedule_skipped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN schedule_max_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN schedule_min_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN schedule_total_lag INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN schedule_not_sustained INTEGER NOT NULL DEFAULT 0;

UPDATE meta SET value = 13 WHERE key = 'schema_version';
)sql";

// kSchemaUpgrades[v - 1] turns version v into v + 1.
inline constexpr std::string_view kSchemaUpgrades[] = {
    kSchemaV2Upgrade,  kSchemaV3Upgrade,  kSchemaV4Upgrade,  kSchemaV5Upgrade,
    kSchemaV6Upgrade,  kSchemaV7Upgrade,  kSchemaV8Upgrade,  kSchemaV9Upgrade,
    kSchemaV10Upgrade, kSchemaV11Upgrade, kSchemaV12Upgrade, kSchemaV13Upgrade};
static_assert(std::size(kSchemaUpgrades) == kSchemaVersion - 1, "one upgrade per version");

// Creates the schema in an empty database, or checks an existing one, in one
// IMMEDIATE transaction. Errors name db.path(): FailedPrecondition for a
// newer schema version or an SQLite file that is not a perld state database,
// DataLoss for a missing or invalid schema_version.
[[nodiscard]] absl::Status CreateOrCheckSchema(SqliteDb& db);

// The highest run id ever saved or reserved (meta.max_run_id,
// meta.reserved_run_id, or a higher runs.id).
[[nodiscard]] absl::StatusOr<runs::RunId> ReadMaxRunId(SqliteDb& db);

// SQL for the row statements. The Bind* functions bind every parameter of
// the matching statement; the Read* functions read a row of the matching
// SELECT. Inserts replace an existing row with the same key (windows and
// totals: INSERT OR REPLACE; runs: an UPSERT, so its children survive).
std::string UpsertRunSql();
std::string InsertWindowSql();
std::string InsertTotalSql();
std::string SelectRunsSql();     // ORDER BY id
std::string SelectWindowsSql();  // ORDER BY run_id, kind, seq; without distributions
// ?1 run, periodic windows with ?2 <= seq <= ?3, start_unix_ms >= ?4 and
// end_unix_ms <= ?5, with their distribution blobs (ReadWindow, then
// column WindowBlobColumn()); ORDER BY seq.
std::string SelectWindowRangeSql();
// rowid, seq, valid, length(distribution) of run ?1's ?2 newest total
// segments, newest first.
std::string SelectTotalSegmentsSql();
// rowid, seq, valid, length(distribution) of run ?1's total segments
// (`segments`) or periodic windows with ?2 <= seq <= ?3, ascending.
std::string SelectStoredRangeSql(bool segments);
// count(*), min(seq) of a run's periodic windows with latencies and no blob.
std::string SelectWindowsWithoutDistributionSql();
int WindowBlobColumn();
std::string SelectTotalsSql();  // ORDER BY run_id
std::string InsertCheckpointSql();
std::string InsertCheckpointClientSql();
std::string SelectCheckpointsSql();        // ORDER BY run_id
std::string SelectCheckpointClientsSql();  // ORDER BY run_id, client_index
// run_clients share checkpoint_clients' columns (BindCheckpointClient,
// ReadCheckpointClient).
std::string InsertRunClientSql();
std::string SelectRunClientsSql();        // ?1 run; ORDER BY client_index
std::string SelectUpstreamStreamsSql();   // run_id, next_sequence, lowest message; by run_id
std::string SelectUpstreamMessagesSql();  // ?1 run, ?2 from sequence, ?3 limit; by sequence

void BindRun(const runs::RunInfo& run, SqliteStatement* stmt);
// InvalidArgument for a kind other than periodic/total_segment or
// percentile vectors of different lengths.
// `distribution`: the window's DistributionCodec blob, or empty (not kept).
[[nodiscard]] absl::Status BindWindow(const runs::WindowRecord& window,
                                      std::string_view distribution, SqliteStatement* stmt);
// InvalidArgument for percentile vectors of different lengths.
[[nodiscard]] absl::Status BindTotal(const runs::WindowRecord& total, std::string_view blob,
                                     SqliteStatement* stmt);

// The checkpoint's total (BindTotal's columns) and its cut.
[[nodiscard]] absl::Status BindCheckpoint(const Checkpoint& checkpoint, std::string_view blob,
                                          SqliteStatement* stmt);
void BindCheckpointClient(runs::RunId run, const CheckpointClient& client, SqliteStatement* stmt);

// DataLoss naming the run id and column for a value this perld cannot read
// (an unknown enumeration spelling, malformed JSON).
[[nodiscard]] absl::StatusOr<runs::RunInfo> ReadRun(const SqliteStatement& stmt);
// The window has no distribution.
[[nodiscard]] absl::StatusOr<runs::WindowRecord> ReadWindow(const SqliteStatement& stmt);
// The total without its distribution; `blob` views the stored blob (valid
// until the statement moves on).
[[nodiscard]] absl::StatusOr<runs::WindowRecord> ReadTotal(const SqliteStatement& stmt,
                                                           std::string_view* blob);

// A checkpoint without its clients and distribution (see ReadTotal).
[[nodiscard]] absl::StatusOr<Checkpoint> ReadCheckpoint(const SqliteStatement& stmt,
                                                        std::string_view* blob);
// Sets `run` to the row's run id.
[[nodiscard]] absl::StatusOr<CheckpointClient> ReadCheckpointClient(const SqliteStatement& stmt,
                                                                    runs::RunId* run);

}  // namespace perld::state
