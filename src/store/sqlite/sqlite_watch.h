// One watch on a SqliteStore: a thread that reads the events table after its
// cursor, woken by this process's own commits and by a poll interval for the
// commits of other processes on the same file (pillarctl edits it too).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "store/sqlite/sqlite_tables.h"
#include "store/store.h"

namespace pillar::store {

class SqliteWatch : public WatchHandle {
 public:
  SqliteWatch(std::shared_ptr<SqliteTables> tables, std::string kind, int64_t from_revision,
              EventHandler on_event, ErrorHandler on_error, std::chrono::milliseconds poll);
  ~SqliteWatch() override;
  SqliteWatch(const SqliteWatch&) = delete;
  SqliteWatch& operator=(const SqliteWatch&) = delete;

 private:
  // Owned jointly with the thread, so a handle destroyed from inside a
  // handler can let the thread finish on its own.
  struct State {
    std::shared_ptr<SqliteTables> tables;
    std::string kind;
    int64_t cursor;
    EventHandler on_event;
    ErrorHandler on_error;
    std::chrono::milliseconds poll;
    std::atomic<bool> stop{false};
  };
  static void Run(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace pillar::store
