#include "daemon/state/state_schema.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <span>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/state/json_columns.h"

namespace perld::state {
namespace {

// Column orders: the Bind*/Read* functions below follow them exactly.
constexpr std::array<const char*, 40> kRunColumns = {
    "id",
    "name",
    "labels",
    "source",
    "state",
    "failure_reason",
    "time_unit",
    "min_latency",
    "max_latency",
    "percentiles",
    "max_array_size_mb",
    "max_hash_map_size_mb",
    "total_max_hash_map_size_mb",
    "exact_latency_page_bits",
    "exact_latency_sparse_page_entries",
    "exact_latency_max_memory_mb",
    "exact_total_latency_max_memory_mb",
    "reporting_interval_ms",
    "periodic_recorder",
    "total_recorder",
    "clock",
    "clock_resolution_ns",
    "parameters",
    "writers",
    "readers",
    "start_unix_ms",
    "end_unix_ms",
    "checkpointed",
    "end_reason",
    "slo",
    "abort_on_fail",
    "slo_state",
    "slo_window",
    "slo_verdicts",
    "bucketed_reason",
    "response_run",
    "service_run",
    "target_rate",
    "late_threshold_ns",
    "rate_not_sustained",
};

// The columns windows and totals share, after their key.
constexpr std::array<const char*, 29> kWindowColumns = {
    "seq",
    "start_unix_ms",
    "end_unix_ms",
    "seconds",
    "start_time",
    "end_time",
    "records",
    "bytes",
    "total_latency",
    "min_latency",
    "max_latency",
    "invalid",
    "lower_discard",
    "higher_discard",
    "valid",
    "rejected",
    "overflow",
    "closed_full",
    "full_closes",
    "median",
    "percentiles",
    "rate_seconds",
    "schedule_operations",
    "schedule_late",
    "schedule_skipped",
    "schedule_max_lag",
    "schedule_min_lag",
    "schedule_total_lag",
    "schedule_not_sustained",
};

constexpr std::array<const char*, 2> kWindowKey = {"run_id", "kind"};
constexpr std::array<const char*, 1> kWindowExtra = {"distribution"};
constexpr std::array<const char*, 1> kTotalKey = {"run_id"};
constexpr std::array<const char*, 3> kTotalExtra = {"segments", "exact_total", "distribution"};
constexpr std::array<const char*, 2> kCheckpointCut = {"periodic_seq", "segment_seq"};
constexpr std::array<const char*, 7> kCheckpointClientColumns = {
    "run_id", "client_index", "client_id", "client_name", "mode", "applied", "closed"};

std::string Columns(std::initializer_list<std::span<const char* const>> groups) {
  std::string out;
  for (const auto& group : groups) {
    for (const char* column : group) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", column);
    }
  }
  return out;
}

std::string Placeholders(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    absl::StrAppend(&out, i == 0 ? "?" : ", ?");
  }
  return out;
}

size_t CountColumns(std::string_view columns) {
  return static_cast<size_t>(std::count(columns.begin(), columns.end(), ',')) + 1;
}

// The stable spellings of the core enumerations, read back.
template <typename Enum, size_t N>
bool ParseName(std::string_view name, const std::array<Enum, N>& values, const char* (*spell)(Enum),
               Enum* out) {
  for (const Enum v : values) {
    if (name == spell(v)) {
      *out = v;
      return true;
    }
  }
  return false;
}

constexpr std::array<TimeUnit, 3> kTimeUnits = {TimeUnit::kMs, TimeUnit::kUs, TimeUnit::kNs};
constexpr std::array<RecorderKind, 4> kRecorderKinds = {
    RecorderKind::kArray, RecorderKind::kLongHashMap, RecorderKind::kHashMap,
    RecorderKind::kHybridPaged};
constexpr std::array<runs::WindowRecord::Kind, 2> kStoredWindowKinds = {
    runs::WindowRecord::Kind::kPeriodic, runs::WindowRecord::Kind::kTotalSegment};

absl::Status Unreadable(absl::string_view table, uint64_t run_id, absl::string_view column,
                        absl::string_view detail) {
  return absl::DataLossError(
      absl::StrCat(table, " row of run ", run_id, ": column ", column, ": ", detail));
}

// Binds the kWindowColumns of `w` from parameter `index` on.
absl::Status BindWindowColumns(const runs::WindowRecord& w, int index, SqliteStatement* s) {
  absl::StatusOr<std::string> percentiles = PercentilesToJson(w.snapshot);
  if (!percentiles.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("run ", w.run_id, " ", WindowKindName(w.kind),
                                                   " window ", w.seq, ": ",
                                                   percentiles.status().message()));
  }
  const LatencySnapshot& n = w.snapshot;
  s->BindInt64(index++, w.seq);
  s->BindInt64(index++, w.start_unix_ms);
  s->BindInt64(index++, w.end_unix_ms);
  s->BindDouble(index++, w.seconds);
  s->BindInt64(index++, n.start_time);
  s->BindInt64(index++, n.end_time);
  s->BindInt64(index++, n.records);
  s->BindInt64(index++, n.bytes);
  s->BindInt64(index++, n.total_latency);
  s->BindInt64(index++, n.min_latency);
  s->BindInt64(index++, n.max_latency);
  s->BindInt64(index++, n.invalid);
  s->BindInt64(index++, n.lower_discard);
  s->BindInt64(index++, n.higher_discard);
  s->BindInt64(index++, n.valid);
  s->BindInt64(index++, n.rejected);
  s->BindInt64(index++, n.overflow ? 1 : 0);
  s->BindInt64(index++, n.closed_full ? 1 : 0);
  s->BindInt64(index++, n.full_closes);
  s->BindInt64(index++, n.median);
  s->BindText(index++, *percentiles);
  s->BindDouble(index++, w.rate_seconds);
  const runs::WindowRecord::Schedule& d = w.schedule;
  for (const int64_t v : {d.operations, d.late, d.skipped, d.max_lag, d.min_lag, d.total_lag}) {
    s->BindInt64(index++, v);
  }
  s->BindInt64(index++, d.not_sustained ? 1 : 0);
  return absl::OkStatus();
}

// Reads the kWindowColumns from column `index` on into `w`.
absl::Status ReadWindowColumns(const SqliteStatement& s, int index, absl::string_view table,
                               runs::WindowRecord* w) {
  LatencySnapshot& n = w->snapshot;
  w->seq = s.ColumnInt64(index++);
  w->start_unix_ms = s.ColumnInt64(index++);
  w->end_unix_ms = s.ColumnInt64(index++);
  w->seconds = s.ColumnDouble(index++);
  n.start_time = s.ColumnInt64(index++);
  n.end_time = s.ColumnInt64(index++);
  n.records = s.ColumnInt64(index++);
  n.bytes = s.ColumnInt64(index++);
  n.total_latency = s.ColumnInt64(index++);
  n.min_latency = s.ColumnInt64(index++);
  n.max_latency = s.ColumnInt64(index++);
  n.invalid = s.ColumnInt64(index++);
  n.lower_discard = s.ColumnInt64(index++);
  n.higher_discard = s.ColumnInt64(index++);
  n.valid = s.ColumnInt64(index++);
  n.rejected = s.ColumnInt64(index++);
  n.overflow = s.ColumnInt64(index++) != 0;
  n.closed_full = s.ColumnInt64(index++) != 0;
  n.full_closes = s.ColumnInt64(index++);
  n.median = s.ColumnInt64(index++);
  if (absl::Status st = PercentilesFromJson(s.ColumnText(index++), &n); !st.ok()) {
    return Unreadable(table, w->run_id, "percentiles", st.message());
  }
  w->rate_seconds = s.ColumnDouble(index++);
  runs::WindowRecord::Schedule& d = w->schedule;
  for (int64_t* v : {&d.operations, &d.late, &d.skipped, &d.max_lag, &d.min_lag, &d.total_lag}) {
    *v = s.ColumnInt64(index++);
  }
  d.not_sustained = s.ColumnInt64(index++) != 0;
  return absl::OkStatus();
}

}  // namespace

absl::Status CreateOrCheckSchema(SqliteDb& db) {
  const std::string where = absl::StrCat("state database '", db.path(), "'");
  auto fail = [&](absl::Status s) {
    db.Exec("ROLLBACK").IgnoreError();  // the original error is the one to report
    return s;
  };
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> tables =
      db.QueryText("SELECT group_concat(name, ', ') FROM sqlite_schema WHERE type = 'table'");
  if (!tables.ok()) {
    return fail(tables.status());
  }
  if (tables->empty()) {  // a new database
    std::string all(kSchemaV1);
    for (const std::string_view upgrade : kSchemaUpgrades) all += upgrade;
    if (absl::Status s = db.Exec(all.c_str()); !s.ok()) {
      return fail(s);
    }
    return db.Exec("COMMIT");
  }
  absl::StatusOr<std::string> meta =
      db.QueryText("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'");
  if (!meta.ok()) {
    return fail(meta.status());
  }
  if (*meta != "1") {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        where, ": an SQLite database but not a perld state database (tables: ", *tables,
        "); choose another state directory")));
  }
  absl::StatusOr<std::string> version = db.QueryText(
      "SELECT CASE typeof(value) WHEN 'integer' THEN value ELSE -1 END FROM meta "
      "WHERE key = 'schema_version'");
  if (!version.ok()) {
    return fail(version.status());
  }
  int64_t v = -1;
  if (!absl::SimpleAtoi(*version, &v) || v < 1) {
    return fail(
        absl::DataLossError(absl::StrCat(where, ": meta.schema_version is missing or invalid")));
  }
  if (v > kSchemaVersion) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat(where, ": schema version ", v, " is newer than this perld supports (",
                     kSchemaVersion, "); run a newer perld or choose another state directory")));
  }
  // Version v upgrades through every later one, in order.
  for (int64_t from = v; from < kSchemaVersion; ++from) {
    const std::string upgrade(kSchemaUpgrades[static_cast<size_t>(from - 1)]);
    if (absl::Status s = db.Exec(upgrade.c_str()); !s.ok()) {
      return fail(s);
    }
  }
  return db.Exec("COMMIT");
}

absl::StatusOr<runs::RunId> ReadMaxRunId(SqliteDb& db) {
  absl::StatusOr<std::string> text = db.QueryText(
      "SELECT max(coalesce((SELECT value FROM meta WHERE key = 'max_run_id'), 0), "
      "coalesce((SELECT value FROM meta WHERE key = 'reserved_run_id'), 0), "
      "coalesce((SELECT max(id) FROM runs), 0))");
  if (!text.ok()) {
    return text.status();
  }
  runs::RunId id = 0;
  if (!absl::SimpleAtoi(*text, &id)) {
    return absl::DataLossError(
        absl::StrCat("state database '", db.path(), "': meta.max_run_id is invalid"));
  }
  return id;
}

std::string UpsertRunSql() {
  const std::string columns = Columns({kRunColumns});
  std::string update;
  for (size_t i = 1; i < kRunColumns.size(); ++i) {  // every column but the id
    absl::StrAppend(&update, i == 1 ? "" : ", ", kRunColumns[i], " = excluded.", kRunColumns[i]);
  }
  return absl::StrCat("INSERT INTO runs (", columns, ") VALUES (", Placeholders(kRunColumns.size()),
                      ") ON CONFLICT (id) DO UPDATE SET ", update);
}

std::string InsertWindowSql() {
  const std::string columns = Columns({kWindowKey, kWindowColumns, kWindowExtra});
  return absl::StrCat("INSERT OR REPLACE INTO windows (", columns, ") VALUES (",
                      Placeholders(CountColumns(columns)), ")");
}

std::string InsertTotalSql() {
  const std::string columns = Columns({kTotalKey, kWindowColumns, kTotalExtra});
  return absl::StrCat("INSERT OR REPLACE INTO totals (", columns, ") VALUES (",
                      Placeholders(CountColumns(columns)), ")");
}

std::string InsertCheckpointSql() {
  const std::string columns = Columns({kTotalKey, kWindowColumns, kTotalExtra, kCheckpointCut});
  return absl::StrCat("INSERT OR REPLACE INTO checkpoints (", columns, ") VALUES (",
                      Placeholders(CountColumns(columns)), ")");
}

std::string InsertCheckpointClientSql() {
  return absl::StrCat("INSERT OR REPLACE INTO checkpoint_clients (",
                      Columns({kCheckpointClientColumns}), ") VALUES (",
                      Placeholders(kCheckpointClientColumns.size()), ")");
}

std::string SelectCheckpointsSql() {
  return absl::StrCat("SELECT ", Columns({kTotalKey, kWindowColumns, kTotalExtra, kCheckpointCut}),
                      " FROM checkpoints ORDER BY run_id");
}

std::string SelectCheckpointClientsSql() {
  return absl::StrCat("SELECT ", Columns({kCheckpointClientColumns}),
                      " FROM checkpoint_clients ORDER BY run_id, client_index");
}

std::string InsertRunClientSql() {
  return absl::StrCat("INSERT OR REPLACE INTO run_clients (", Columns({kCheckpointClientColumns}),
                      ") VALUES (", Placeholders(kCheckpointClientColumns.size()), ")");
}

std::string SelectRunClientsSql() {
  return absl::StrCat("SELECT ", Columns({kCheckpointClientColumns}),
                      " FROM run_clients WHERE run_id = ?1 ORDER BY client_index");
}

std::string SelectUpstreamStreamsSql() {
  return "SELECT s.run_id, s.next_sequence, (SELECT min(m.sequence) FROM upstream_messages m "
         "WHERE m.run_id = s.run_id) FROM upstream_streams s ORDER BY s.run_id";
}

std::string SelectUpstreamMessagesSql() {
  return "SELECT sequence, message FROM upstream_messages WHERE run_id = ?1 AND sequence >= ?2 "
         "ORDER BY sequence LIMIT ?3";
}

std::string SelectRunsSql() {
  return absl::StrCat("SELECT ", Columns({kRunColumns}), " FROM runs ORDER BY id");
}

// 'periodic' < 'total_segment' as text, as kPeriodic < kTotalSegment.
std::string SelectWindowsSql() {
  return absl::StrCat("SELECT ", Columns({kWindowKey, kWindowColumns}),
                      " FROM windows ORDER BY run_id, kind, seq");
}

int WindowBlobColumn() { return static_cast<int>(kWindowKey.size() + kWindowColumns.size()); }

std::string SelectWindowRangeSql() {
  return absl::StrCat("SELECT ", Columns({kWindowKey, kWindowColumns, kWindowExtra}),
                      " FROM windows WHERE run_id = ?1 AND kind = 'periodic' AND seq BETWEEN ?2 "
                      "AND ?3 AND start_unix_ms >= ?4 AND end_unix_ms <= ?5 ORDER BY seq");
}

std::string SelectTotalSegmentsSql() {
  return "SELECT rowid, seq, valid, length(distribution) FROM windows WHERE run_id = ?1 AND "
         "kind = 'total_segment' ORDER BY seq DESC LIMIT ?2";
}

std::string SelectStoredRangeSql(bool segments) {
  return absl::StrCat(
      "SELECT rowid, seq, valid, length(distribution) FROM windows WHERE run_id = ?1 AND kind = '",
      segments ? "total_segment" : "periodic", "' AND seq BETWEEN ?2 AND ?3 ORDER BY seq");
}

std::string SelectWindowsWithoutDistributionSql() {
  return "SELECT count(*), coalesce(min(seq), 0) FROM windows WHERE run_id = ?1 AND "
         "kind = 'periodic' AND valid > 0 AND length(distribution) = 0";
}

std::string SelectTotalsSql() {
  return absl::StrCat("SELECT ", Columns({kTotalKey, kWindowColumns, kTotalExtra}),
                      " FROM totals ORDER BY run_id");
}

void BindRun(const runs::RunInfo& run, SqliteStatement* s) {
  const runs::RunSpec& spec = run.spec;
  const LatencyConfig& l = spec.latency;
  int i = 1;
  s->BindInt64(i++, static_cast<int64_t>(run.id));
  s->BindText(i++, spec.name);
  s->BindText(i++, LabelsToJson(spec.labels));
  s->BindText(i++, runs::RunSourceName(spec.source));
  s->BindText(i++, runs::RunStateName(run.state));
  s->BindText(i++, run.failure_reason);
  s->BindText(i++, TimeUnitName(l.time_unit));
  s->BindInt64(i++, l.min_latency);
  s->BindInt64(i++, l.max_latency);
  s->BindText(i++, PercentsToJson(l.percentiles));
  s->BindInt64(i++, l.max_array_size_mb);
  s->BindInt64(i++, l.max_hash_map_size_mb);
  s->BindInt64(i++, l.total_max_hash_map_size_mb);
  s->BindInt64(i++, l.exact_latency_page_bits);
  s->BindInt64(i++, l.exact_latency_sparse_page_entries);
  s->BindInt64(i++, l.exact_latency_max_memory_mb);
  s->BindInt64(i++, l.exact_total_latency_max_memory_mb);
  s->BindInt64(i++, spec.reporting_interval_ms);
  s->BindText(i++, RecorderKindName(spec.periodic_recorder));
  s->BindText(i++, RecorderKindName(spec.total_recorder));
  s->BindText(i++, spec.clock);
  s->BindInt64(i++, spec.clock_resolution_ns);
  s->BindText(i++, spec.parameters);
  s->BindInt64(i++, spec.writers);
  s->BindInt64(i++, spec.readers);
  s->BindInt64(i++, run.start_unix_ms);
  s->BindInt64(i++, run.end_unix_ms);
  s->BindInt64(i++, spec.checkpointed ? 1 : 0);
  s->BindText(i++, runs::EndReasonName(run.end_reason));
  s->BindText(i++, spec.slo);
  s->BindInt64(i++, spec.abort_on_fail ? 1 : 0);
  s->BindText(i++, runs::SloStateName(run.slo_status.state));
  s->BindInt64(i++, run.slo_status.window);
  std::string lines;
  for (const runs::SloStatus::Verdict& v : run.slo_status.verdicts) {
    absl::StrAppend(&lines, lines.empty() ? "" : "\n", v.line);
  }
  s->BindText(i++, lines);
  s->BindText(i++, spec.bucketed_reason);
  s->BindInt64(i++, static_cast<int64_t>(run.response_run));
  s->BindInt64(i++, static_cast<int64_t>(run.service_run));
  s->BindDouble(i++, spec.target_rate);
  s->BindInt64(i++, spec.late_threshold_ns);
  s->BindInt64(i++, run.rate_not_sustained ? 1 : 0);
}

absl::Status BindWindow(const runs::WindowRecord& window, std::string_view distribution,
                        SqliteStatement* s) {
  if (window.kind == runs::WindowRecord::Kind::kTotal) {
    return absl::InvalidArgumentError(
        absl::StrCat("run ", window.run_id, ": a total window belongs to SaveFinalTotal"));
  }
  s->BindInt64(1, static_cast<int64_t>(window.run_id));
  s->BindText(2, runs::WindowKindName(window.kind));
  if (absl::Status st = BindWindowColumns(window, 3, s); !st.ok()) return st;
  s->BindBlob(3 + static_cast<int>(kWindowColumns.size()), distribution);
  return absl::OkStatus();
}

absl::Status BindTotal(const runs::WindowRecord& total, std::string_view blob, SqliteStatement* s) {
  s->BindInt64(1, static_cast<int64_t>(total.run_id));
  if (absl::Status st = BindWindowColumns(total, 2, s); !st.ok()) {
    return st;
  }
  int i = 2 + static_cast<int>(kWindowColumns.size());
  s->BindInt64(i++, total.segments);
  s->BindInt64(i++, !total.exact_total ? 0 : total.spilled ? 2 : 1);
  s->BindBlob(i++, blob);
  return absl::OkStatus();
}

absl::Status BindCheckpoint(const Checkpoint& c, std::string_view blob, SqliteStatement* s) {
  if (absl::Status st = BindTotal(c.total, blob, s); !st.ok()) {
    return st;
  }
  int i = 2 + static_cast<int>(kWindowColumns.size() + kTotalExtra.size());
  s->BindInt64(i++, c.periodic_seq);
  s->BindInt64(i++, c.segment_seq);
  return absl::OkStatus();
}

void BindCheckpointClient(runs::RunId run, const CheckpointClient& c, SqliteStatement* s) {
  int i = 1;
  s->BindInt64(i++, static_cast<int64_t>(run));
  s->BindInt64(i++, c.index);
  s->BindText(i++, c.id);
  s->BindText(i++, c.name);
  s->BindText(i++, c.raw ? "raw" : "windows");
  s->BindInt64(i++, static_cast<int64_t>(c.applied));
  s->BindInt64(i++, c.closed ? 1 : 0);
}

absl::StatusOr<runs::RunInfo> ReadRun(const SqliteStatement& s) {
  constexpr char kTable[] = "runs";
  runs::RunInfo run;
  runs::RunSpec& spec = run.spec;
  LatencyConfig& l = spec.latency;
  int i = 0;
  run.id = static_cast<runs::RunId>(s.ColumnInt64(i++));
  spec.name = s.ColumnText(i++);
  absl::StatusOr<std::map<std::string, std::string>> labels = LabelsFromJson(s.ColumnText(i++));
  if (!labels.ok()) {
    return Unreadable(kTable, run.id, "labels", labels.status().message());
  }
  spec.labels = *std::move(labels);
  if (!runs::ParseRunSource(s.ColumnText(i++), &spec.source)) {
    return Unreadable(kTable, run.id, "source", "unknown source");
  }
  if (!runs::ParseRunState(s.ColumnText(i++), &run.state)) {
    return Unreadable(kTable, run.id, "state", "unknown state");
  }
  run.failure_reason = s.ColumnText(i++);
  if (!ParseName(s.ColumnText(i++), kTimeUnits, TimeUnitName, &l.time_unit)) {
    return Unreadable(kTable, run.id, "time_unit", "unknown time unit");
  }
  l.min_latency = s.ColumnInt64(i++);
  l.max_latency = s.ColumnInt64(i++);
  absl::StatusOr<std::vector<double>> percents = PercentsFromJson(s.ColumnText(i++));
  if (!percents.ok()) {
    return Unreadable(kTable, run.id, "percentiles", percents.status().message());
  }
  l.percentiles = *std::move(percents);
  l.max_array_size_mb = s.ColumnInt64(i++);
  l.max_hash_map_size_mb = s.ColumnInt64(i++);
  l.total_max_hash_map_size_mb = s.ColumnInt64(i++);
  l.exact_latency_page_bits = s.ColumnInt64(i++);
  l.exact_latency_sparse_page_entries = s.ColumnInt64(i++);
  l.exact_latency_max_memory_mb = s.ColumnInt64(i++);
  l.exact_total_latency_max_memory_mb = s.ColumnInt64(i++);
  spec.reporting_interval_ms = s.ColumnInt64(i++);
  if (!ParseName(s.ColumnText(i++), kRecorderKinds, RecorderKindName, &spec.periodic_recorder)) {
    return Unreadable(kTable, run.id, "periodic_recorder", "unknown recorder kind");
  }
  if (!ParseName(s.ColumnText(i++), kRecorderKinds, RecorderKindName, &spec.total_recorder)) {
    return Unreadable(kTable, run.id, "total_recorder", "unknown recorder kind");
  }
  spec.clock = s.ColumnText(i++);
  spec.clock_resolution_ns = s.ColumnInt64(i++);
  spec.parameters = s.ColumnText(i++);
  spec.writers = static_cast<int>(s.ColumnInt64(i++));
  spec.readers = static_cast<int>(s.ColumnInt64(i++));
  run.start_unix_ms = s.ColumnInt64(i++);
  run.end_unix_ms = s.ColumnInt64(i++);
  spec.checkpointed = s.ColumnInt64(i++) != 0;
  if (!runs::ParseEndReason(s.ColumnText(i++), &run.end_reason)) {
    return Unreadable(kTable, run.id, "end_reason", "unknown end reason");
  }
  spec.slo = s.ColumnText(i++);
  spec.abort_on_fail = s.ColumnInt64(i++) != 0;
  if (!runs::ParseSloState(s.ColumnText(i++), &run.slo_status.state)) {
    return Unreadable(kTable, run.id, "slo_state", "unknown SLO state");
  }
  run.slo_status.window = s.ColumnInt64(i++);
  // One verdict line per term: "PASS p99<=2ms: 1830 us (...)" (run_slo.h).
  const std::string verdicts(s.ColumnText(i++));
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(verdicts, '\n', absl::SkipEmpty()))) {
    const size_t colon = line.find(": ");
    const bool held = line.starts_with("PASS ");
    if ((!held && !line.starts_with("FAIL ")) || colon == std::string::npos) {
      return Unreadable(kTable, run.id, "slo_verdicts", "not a verdict line");
    }
    run.slo_status.verdicts.push_back({line.substr(5, colon - 5), held, line});
  }
  spec.bucketed_reason = s.ColumnText(i++);
  run.response_run = static_cast<runs::RunId>(s.ColumnInt64(i++));
  run.service_run = static_cast<runs::RunId>(s.ColumnInt64(i++));
  spec.target_rate = s.ColumnDouble(i++);
  spec.late_threshold_ns = s.ColumnInt64(i++);
  run.rate_not_sustained = s.ColumnInt64(i++) != 0;
  return run;
}

absl::StatusOr<runs::WindowRecord> ReadWindow(const SqliteStatement& s) {
  constexpr char kTable[] = "windows";
  runs::WindowRecord w;
  w.run_id = static_cast<runs::RunId>(s.ColumnInt64(0));
  if (!ParseName(s.ColumnText(1), kStoredWindowKinds, runs::WindowKindName, &w.kind)) {
    return Unreadable(kTable, w.run_id, "kind", "unknown window kind");
  }
  if (absl::Status st = ReadWindowColumns(s, 2, kTable, &w); !st.ok()) {
    return st;
  }
  return w;
}

absl::StatusOr<runs::WindowRecord> ReadTotal(const SqliteStatement& s, std::string_view* blob) {
  constexpr char kTable[] = "totals";
  runs::WindowRecord w;
  w.kind = runs::WindowRecord::Kind::kTotal;
  w.run_id = static_cast<runs::RunId>(s.ColumnInt64(0));
  if (absl::Status st = ReadWindowColumns(s, 1, kTable, &w); !st.ok()) {
    return st;
  }
  int i = 1 + static_cast<int>(kWindowColumns.size());
  w.segments = s.ColumnInt64(i++);
  const int64_t exact = s.ColumnInt64(i++);
  w.exact_total = exact != 0;
  w.spilled = exact == 2;
  *blob = s.ColumnBlob(i++);
  return w;
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const SqliteStatement& s, std::string_view* blob) {
  Checkpoint c;
  absl::StatusOr<runs::WindowRecord> total = ReadTotal(s, blob);
  if (!total.ok()) {
    return total.status();
  }
  c.total = *std::move(total);
  int i = 1 + static_cast<int>(kWindowColumns.size() + kTotalExtra.size());
  c.periodic_seq = s.ColumnInt64(i++);
  c.segment_seq = s.ColumnInt64(i++);
  return c;
}

absl::StatusOr<CheckpointClient> ReadCheckpointClient(const SqliteStatement& s, runs::RunId* run) {
  CheckpointClient c;
  int i = 0;
  *run = static_cast<runs::RunId>(s.ColumnInt64(i++));
  c.index = static_cast<int32_t>(s.ColumnInt64(i++));
  c.id = std::string(s.ColumnText(i++));
  c.name = std::string(s.ColumnText(i++));
  const std::string_view mode = s.ColumnText(i++);
  if (mode != "raw" && mode != "windows") {
    return Unreadable("checkpoint_clients", *run, "mode", "not raw or windows");
  }
  c.raw = mode == "raw";
  c.applied = static_cast<uint64_t>(s.ColumnInt64(i++));
  c.closed = s.ColumnInt64(i++) != 0;
  return c;
}

}  // namespace perld::state
