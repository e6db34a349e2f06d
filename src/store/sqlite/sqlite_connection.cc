#include "store/sqlite/sqlite_connection.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace pillar::store {

Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = std::string(what) + ": " + sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_errcode(db) == rc)
    msg += " (" + std::string(sqlite3_errmsg(db)) + ")";
  int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return Unavailable(std::move(msg));
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) return {Code::kDataLoss, msg};
  return Internal(std::move(msg));
}

SqliteStatement::~SqliteStatement() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), bind_error_(other.bind_error_) {}

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, std::string_view value) {
  int rc =
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

SqliteStatement& SqliteStatement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

StatusOr<bool> SqliteStatement::Step() {
  if (bind_error_ != 0) return SqliteError(db_, bind_error_, "binding a parameter");
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, sqlite3_sql(stmt_));
}

Status SqliteStatement::Run() {
  while (true) {
    ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

int64_t SqliteStatement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string SqliteStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

bool SqliteStatement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

StatusOr<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(
    const std::string& path, std::chrono::milliseconds busy_timeout) {
  // SQLite creates files with the umask; create it first so the main file and,
  // following it, the -wal and -shm files are private.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Unavailable("store " + path + " cannot be opened: " + std::strerror(errno));
  }
  ::close(fd);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqliteError(db, rc, "opening store " + path);
    sqlite3_close(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, static_cast<int>(busy_timeout.count()));
  return std::unique_ptr<SqliteConnection>(new SqliteConnection(db, path));
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status SqliteConnection::Exec(const char* sql) {
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, sql);
  return Status::Ok();
}

StatusOr<SqliteStatement> SqliteConnection::Prepare(const char* sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc, std::string("preparing ") + sql);
    it = statements_.emplace(sql, stmt).first;
  }
  return SqliteStatement(db_, it->second);
}

}  // namespace pillar::store
