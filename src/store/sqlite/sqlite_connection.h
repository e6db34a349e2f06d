// A thin RAII layer over one sqlite3 connection: cached prepared statements,
// bound parameters only, and every SQLite error turned into a Status. Busy and
// locked errors are UNAVAILABLE so transaction loops can tell them apart and
// retry. Not thread-safe: the owner serializes access.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace pillar::store {

// One use of a cached prepared statement; reset (bindings cleared) when it
// goes out of scope so the next use starts clean.
class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStatement();
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&&) = delete;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Parameters are 1-based, as in SQL. A failed bind is reported by Step.
  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, std::string_view value);
  SqliteStatement& BindNull(int index);

  // true with a row to read, false when done.
  StatusOr<bool> Step();
  // Steps to completion, for statements that return no rows.
  Status Run();

  int64_t Int(int column) const;
  std::string Text(int column) const;
  bool IsNull(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_error_ = 0;
};

class SqliteConnection {
 public:
  // Opens (creating when absent, mode 0600: it holds the cluster's intent)
  // the database file at `path`.
  static StatusOr<std::unique_ptr<SqliteConnection>> Open(const std::string& path,
                                                          std::chrono::milliseconds busy_timeout);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // Runs SQL without parameters (pragmas, BEGIN/COMMIT, schema).
  Status Exec(const char* sql);
  // The cached statement for `sql` (a literal: data always goes through Bind).
  StatusOr<SqliteStatement> Prepare(const char* sql);

  const std::string& path() const { return path_; }

 private:
  SqliteConnection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
  std::map<std::string, sqlite3_stmt*> statements_;
};

// A Status for SQLite result code `rc` in the context `what`.
Status SqliteError(sqlite3* db, int rc, std::string_view what);

}  // namespace pillar::store
