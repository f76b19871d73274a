// SqliteDb, SqliteStatement: RAII owners of a sqlite3 connection and of a
// prepared statement, with every SQLite result code turned into an
// absl::Status carrying SQLite's own message.
//
// Status mapping (SqliteStatus): SQLITE_CORRUPT / NOTADB -> DataLoss,
// FULL / NOMEM -> ResourceExhausted, READONLY / PERM / AUTH ->
// PermissionDenied, BUSY / LOCKED -> Unavailable, CONSTRAINT / MISMATCH /
// RANGE / TOOBIG -> InvalidArgument, CANTOPEN -> FailedPrecondition, anything
// else (IOERR, ...) -> Internal. Messages read
// "<context>: <sqlite3_errmsg> (<sqlite3_errstr>, code N)".
//
// Threads: a connection (and its statements) is used by one thread at a time
// (SQLite's multi-thread mode); it may be handed to another thread between
// uses. Statements must be destroyed before their connection.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace perld::state {

// The Status for result code `rc` (not SQLITE_OK/ROW/DONE) on `db` (may be
// null: the message then comes from sqlite3_errstr alone).
absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view context);

class SqliteStatement {
 public:
  SqliteStatement() = default;
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  // Binders, 1-based like SQLite. A failing bind is remembered and returned
  // by the next Step/Run, so a row of binds needs one check. Text and blobs
  // are copied (SQLITE_TRANSIENT).
  void BindInt64(int index, int64_t value);
  void BindDouble(int index, double value);
  void BindText(int index, std::string_view value);
  void BindBlob(int index, std::string_view value);

  // Advances: true with a row available, false when done, or the error.
  [[nodiscard]] absl::StatusOr<bool> Step();
  // Steps to completion (rows ignored) and resets the statement.
  [[nodiscard]] absl::Status Run();
  // Rewinds for re-use and clears bindings and any remembered bind error.
  // (sqlite3_reset's code repeats the last Step's error, already reported.)
  void Reset();

  // Columns of the current row, 0-based. Text and blob views are valid until
  // the next Step/Reset.
  int64_t ColumnInt64(int index) const;
  double ColumnDouble(int index) const;
  std::string_view ColumnText(int index) const;
  std::string_view ColumnBlob(int index) const;
  bool ColumnIsNull(int index) const;

  sqlite3_stmt* get() const { return stmt_; }

 private:
  friend class SqliteDb;
  SqliteStatement(sqlite3_stmt* stmt, std::string context)
      : stmt_(stmt), context_(std::move(context)) {}
  void NoteBind(int rc, int index);

  sqlite3_stmt* stmt_ = nullptr;
  std::string context_;  // the SQL's first words, for messages
  absl::Status bind_error_;
};

// An open BLOB for incremental reads (sqlite3_blob_open, read-only): a
// stored blob read piece by piece without loading it whole.
class SqliteBlob {
 public:
  SqliteBlob() = default;
  SqliteBlob(SqliteBlob&& other) noexcept : blob_(std::exchange(other.blob_, nullptr)) {}
  SqliteBlob& operator=(SqliteBlob&& other) noexcept {
    std::swap(blob_, other.blob_);
    return *this;
  }
  SqliteBlob(const SqliteBlob&) = delete;
  SqliteBlob& operator=(const SqliteBlob&) = delete;
  ~SqliteBlob();

  int64_t size() const;
  // Reads `size` bytes at `offset` into `into`.
  [[nodiscard]] absl::Status Read(int64_t offset, char* into, int size) const;

 private:
  friend class SqliteDb;
  explicit SqliteBlob(sqlite3_blob* blob) : blob_(blob) {}
  sqlite3_blob* blob_ = nullptr;
};

class SqliteDb {
 public:
  // Opens `path` with sqlite3_open_v2 `flags` (SQLITE_OPEN_NOMUTEX is
  // added). SQLite opens lazily: a file that is not a database fails on the
  // first statement, not here.
  static absl::StatusOr<SqliteDb> Open(const std::string& path, int flags);

  SqliteDb() = default;
  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb& operator=(SqliteDb&& other) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb();

  // Runs one or more statements without results (DDL, PRAGMA, BEGIN, ...).
  [[nodiscard]] absl::Status Exec(const char* sql);
  // Prepares one statement (SQLITE_PREPARE_PERSISTENT: it will be reused).
  [[nodiscard]] absl::StatusOr<SqliteStatement> Prepare(std::string_view sql);
  // Opens table.column of the row `rowid` of the main database for reading.
  [[nodiscard]] absl::StatusOr<SqliteBlob> OpenBlob(const char* table, const char* column,
                                                    int64_t rowid);
  // The first column of the first row of `sql` as text ("" for no row).
  [[nodiscard]] absl::StatusOr<std::string> QueryText(const char* sql);

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace perld::state
