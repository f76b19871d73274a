#include "daemon/state/sqlite_db.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace perld::state {

absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view context) {
  const char* detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string message =
      absl::StrCat(context, ": ", detail, " (", sqlite3_errstr(rc), ", code ", rc, ")");
  switch (rc & 0xFF) {  // the primary code of an extended one
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(message);
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::ResourceExhaustedError(message);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return absl::InvalidArgumentError(message);
    case SQLITE_CANTOPEN:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// --- SqliteStatement ---------------------------------------------------------

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)),
      context_(std::move(other.context_)),
      bind_error_(std::move(other.bind_error_)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);  // its code repeats the last step's, already reported
    stmt_ = std::exchange(other.stmt_, nullptr);
    context_ = std::move(other.context_);
    bind_error_ = std::move(other.bind_error_);
  }
  return *this;
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

void SqliteStatement::NoteBind(int rc, int index) {
  if (rc != SQLITE_OK && bind_error_.ok()) {
    bind_error_ = SqliteStatus(sqlite3_db_handle(stmt_), rc,
                               absl::StrCat(context_, ": binding parameter ", index));
  }
}

void SqliteStatement::BindInt64(int index, int64_t value) {
  NoteBind(sqlite3_bind_int64(stmt_, index, value), index);
}

void SqliteStatement::BindDouble(int index, double value) {
  NoteBind(sqlite3_bind_double(stmt_, index, value), index);
}

void SqliteStatement::BindText(int index, std::string_view value) {
  NoteBind(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

void SqliteStatement::BindBlob(int index, std::string_view value) {
  // A zero-length blob needs a non-null pointer to be a blob, not NULL.
  static constexpr char kEmpty = 0;
  NoteBind(sqlite3_bind_blob64(stmt_, index, value.empty() ? &kEmpty : value.data(), value.size(),
                               SQLITE_TRANSIENT),
           index);
}

absl::StatusOr<bool> SqliteStatement::Step() {
  if (!bind_error_.ok()) {
    return bind_error_;
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  return SqliteStatus(sqlite3_db_handle(stmt_), rc, context_);
}

absl::Status SqliteStatement::Run() {
  absl::StatusOr<bool> row;
  do {
    row = Step();
  } while (row.ok() && *row);
  Reset();
  return row.status();
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);  // always SQLITE_OK
  bind_error_ = absl::OkStatus();
}

int64_t SqliteStatement::ColumnInt64(int index) const { return sqlite3_column_int64(stmt_, index); }

double SqliteStatement::ColumnDouble(int index) const {
  return sqlite3_column_double(stmt_, index);
}

std::string_view SqliteStatement::ColumnText(int index) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
  return text == nullptr
             ? std::string_view()
             : std::string_view(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, index)));
}

std::string_view SqliteStatement::ColumnBlob(int index) const {
  const auto* blob = static_cast<const char*>(sqlite3_column_blob(stmt_, index));
  return blob == nullptr
             ? std::string_view()
             : std::string_view(blob, static_cast<size_t>(sqlite3_column_bytes(stmt_, index)));
}

bool SqliteStatement::ColumnIsNull(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

// --- SqliteDb ----------------------------------------------------------------

absl::StatusOr<SqliteDb> SqliteDb::Open(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  SqliteDb owner(db, path);  // sqlite3_open_v2 may return a handle even on error
  if (rc != SQLITE_OK) {
    return SqliteStatus(db, rc, absl::StrCat("opening '", path, "'"));
  }
  sqlite3_extended_result_codes(db, 1);  // always SQLITE_OK
  return owner;
}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

// sqlite3_close_v2 cannot fail for a valid handle: with statements still
// open it defers the close until the last one is finalized.
SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

SqliteBlob::~SqliteBlob() { sqlite3_blob_close(blob_); }

int64_t SqliteBlob::size() const { return sqlite3_blob_bytes(blob_); }

absl::Status SqliteBlob::Read(int64_t offset, char* into, int size) const {
  const int rc = sqlite3_blob_read(blob_, into, size, static_cast<int>(offset));
  if (rc != SQLITE_OK) return SqliteStatus(nullptr, rc, "reading a stored blob");
  return absl::OkStatus();
}

absl::StatusOr<SqliteBlob> SqliteDb::OpenBlob(const char* table, const char* column,
                                              int64_t rowid) {
  sqlite3_blob* blob = nullptr;
  const int rc = sqlite3_blob_open(db_, "main", table, column, rowid, /*flags=*/0, &blob);
  if (rc != SQLITE_OK) {
    sqlite3_blob_close(blob);
    return SqliteStatus(db_, rc, absl::StrCat("opening ", table, ".", column, " of row ", rowid));
  }
  return SqliteBlob(blob);
}

absl::Status SqliteDb::Exec(const char* sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &error);
  sqlite3_free(error);  // same text as sqlite3_errmsg
  if (rc != SQLITE_OK) {
    return SqliteStatus(db_, rc, absl::string_view(sql).substr(0, 60));
  }
  return absl::OkStatus();
}

absl::StatusOr<SqliteStatement> SqliteDb::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const std::string context(sql.substr(0, sql.find_first_of("(\n")));
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteStatus(db_, rc, absl::StrCat("preparing ", context));
  }
  return SqliteStatement(stmt, context);
}

absl::StatusOr<std::string> SqliteDb::QueryText(const char* sql) {
  absl::StatusOr<SqliteStatement> stmt = Prepare(sql);
  if (!stmt.ok()) {
    return stmt.status();
  }
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) {
    return row.status();
  }
  return *row ? std::string(stmt->ColumnText(0)) : std::string();
}

}  // namespace perld::state
