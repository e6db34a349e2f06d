// The embedded default Store: one SQLite file in WAL mode with
// synchronous=FULL, every write one BEGIN IMMEDIATE transaction (CAS check,
// row, event, revision), so a crash never leaves half a write. Several
// processes may open the same file; each sees the others' writes, in Watch too.
// resourceVersion is a global revision counter, written in decimal.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "store/sqlite/sqlite_tables.h"
#include "store/store.h"

namespace pillar::store {

struct SqliteStoreOptions {
  std::string path;  // the database file; created (mode 0600) when absent
  // Events kept for Watch; older ones are dropped in batches of ~10 %.
  int64_t history_limit = 10000;
  // How often a watch looks for writes of other processes; writes of this
  // process wake it at once.
  std::chrono::milliseconds poll_interval{100};
  // How long a write waits for another process's transaction before UNAVAILABLE.
  std::chrono::milliseconds busy_timeout{5000};
  Clock* clock = nullptr;  // creationTimestamp source; the system clock when null
};

class SqliteStore : public Store {
 public:
  static StatusOr<std::unique_ptr<SqliteStore>> Open(const SqliteStoreOptions& options);

  StatusOr<Object> Get(const std::string& kind, const std::string& name) override;
  StatusOr<ListResult> List(const std::string& kind,
                            const std::optional<LabelSelector>& selector = {}) override;
  StatusOr<Object> Create(const Object& object) override;
  StatusOr<Object> Update(const Object& object) override;
  StatusOr<Object> UpdateStatus(const Object& object) override;
  Status Delete(const std::string& kind, const std::string& name,
                const Preconditions& preconditions = {}) override;
  StatusOr<std::unique_ptr<WatchHandle>> Watch(const std::string& kind,
                                               const std::string& from_resource_version,
                                               EventHandler on_event,
                                               ErrorHandler on_error = nullptr) override;

  // The revision of the newest write (0 for an empty store). This backend's
  // resourceVersions are these revisions in decimal.
  StatusOr<int64_t> Revision();

  // Drops the events at or before `revision` (capped at the current one): a
  // Watch from an earlier revision is then OUT_OF_RANGE. Retention does this
  // on its own; this is for operators and tests.
  Status Compact(int64_t revision);

 private:
  // Applies the caller's change to the stored object; false when it changes nothing.
  using Apply = std::function<StatusOr<bool>(const Object& in, Object& next)>;

  SqliteStore(std::shared_ptr<SqliteTables> tables, const SqliteStoreOptions& options);
  StatusOr<Object> CompareAndSwap(const Object& in, const char* verb, const Apply& apply);

  std::shared_ptr<SqliteTables> tables_;
  std::chrono::milliseconds poll_interval_;
  SystemClock system_clock_;
  Clock& clock_;
};

}  // namespace pillar::store
