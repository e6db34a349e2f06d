// The SQLite schema of the store and the row operations on it, under one
// mutex-guarded connection. Shared (shared_ptr) by SqliteStore and its
// watches, so a watch can outlive the store object that started it.
//
//   objects(kind, name, uid, rv, generation, created, deletion_ts,
//           labels, spec, status)   PRIMARY KEY (kind, name)
//   events(rev PRIMARY KEY, kind, name, type, object)   ordered history
//   meta(key PRIMARY KEY, value)   schema_version, revision, compacted
//
// `revision` is the newest revision written; `compacted` the newest revision
// whose event was dropped, so a watch after revision r is complete iff
// r >= compacted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/sqlite/sqlite_connection.h"
#include "store/store.h"

namespace pillar::store {

// A resourceVersion of this backend: a revision in decimal, "0" for "before
// every write". INVALID_ARGUMENT naming `what` otherwise.
StatusOr<int64_t> ParseRevision(const std::string& resource_version, const std::string& what);

struct EventBatch {
  std::vector<Event> events;
  std::vector<int64_t> revisions;  // of each event
  int64_t head = 0;                // the store revision of the snapshot read
  int64_t compacted = 0;           // events at or before this revision are gone
};

class SqliteTables {
 public:
  struct Options {
    std::string path;
    std::chrono::milliseconds busy_timeout{5000};
    int64_t history_limit = 10000;
  };

  static StatusOr<std::shared_ptr<SqliteTables>> Open(const Options& options);

  // Runs `body` in one BEGIN IMMEDIATE transaction: committed when it returns
  // OK, rolled back otherwise, so a write is never half-applied. Busy errors
  // roll back and re-run `body` (it must only assign its outputs) until
  // busy_timeout has passed. Row operations below are valid only in a body.
  Status Write(const std::function<Status()>& body);
  // Runs `body` in one read transaction: a consistent snapshot.
  Status Read(const std::function<Status()>& body);

  StatusOr<std::optional<Object>> SelectObject(const std::string& kind, const std::string& name);
  StatusOr<std::vector<Object>> SelectObjects(const std::string& kind,
                                              const std::optional<LabelSelector>& selector);
  StatusOr<int64_t> Revision();
  StatusOr<int64_t> Compacted();
  // Bumps and returns the revision for the write in progress.
  StatusOr<int64_t> NextRevision();
  Status PutObject(const Object& object);
  Status RemoveObject(const std::string& kind, const std::string& name);
  // Appends the event of the write in progress and enforces history_limit.
  Status AppendEvent(EventType type, const Object& object);
  StatusOr<EventBatch> SelectEvents(const std::string& kind, int64_t after, int64_t limit);
  // Drops the events at or before `revision` (at most the current revision).
  Status CompactTo(int64_t revision);

  // In-process change notification: the count of committed writes, and a wait
  // for it to move past `seen` (or `stop` to become true) for at most `timeout`.
  uint64_t WriteCount();
  void WaitForWrite(uint64_t seen, std::chrono::milliseconds timeout,
                    const std::function<bool()>& stop);
  // Wakes every WaitForWrite so it re-checks its stop condition.
  void WakeAll();

  const std::string& path() const { return options_.path; }

 private:
  SqliteTables(std::unique_ptr<SqliteConnection> conn, Options options)
      : conn_(std::move(conn)), options_(std::move(options)) {}

  Status Transaction(const char* begin, const std::function<Status()>& body);
  Status Configure();
  Status ConfigureConnection();
  StatusOr<int64_t> GetMeta(const char* key);
  Status SetMeta(const char* key, int64_t value);

  std::mutex mu_;  // guards conn_ and every statement on it
  std::unique_ptr<SqliteConnection> conn_;
  const Options options_;

  std::mutex notify_mu_;
  std::condition_variable notify_cv_;
  uint64_t write_count_ = 0;
};

}  // namespace pillar::store
