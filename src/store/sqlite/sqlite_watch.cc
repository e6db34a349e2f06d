#include "store/sqlite/sqlite_watch.h"

#include <utility>

#include "common/log.h"

namespace pillar::store {
namespace {

// Events per read: bounds the memory of a watch that starts far behind.
constexpr int64_t kBatch = 512;

}  // namespace

SqliteWatch::SqliteWatch(std::shared_ptr<SqliteTables> tables, std::string kind,
                         int64_t from_revision, EventHandler on_event, ErrorHandler on_error,
                         std::chrono::milliseconds poll)
    : state_(std::make_shared<State>()) {
  state_->tables = std::move(tables);
  state_->kind = std::move(kind);
  state_->cursor = from_revision;
  state_->on_event = std::move(on_event);
  state_->on_error = std::move(on_error);
  state_->poll = poll;
  thread_ = std::thread([state = state_] { Run(state); });
}

SqliteWatch::~SqliteWatch() {
  state_->stop = true;
  state_->tables->WakeAll();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // destroyed by its own handler: Run sees stop and returns
  } else {
    thread_.join();
  }
}

void SqliteWatch::Run(const std::shared_ptr<State>& state) {
  auto fail = [&](const Status& status) {
    log::Warn("store watch ended",
              {{"kind", state->kind}, {"revision", state->cursor}, {"error", status.ToString()}});
    if (state->on_error && !state->stop) state->on_error(status);
  };
  while (!state->stop) {
    // Taken before the read, so a commit that lands after it wakes the wait.
    uint64_t seen = state->tables->WriteCount();
    EventBatch batch;
    Status s = state->tables->Read([&]() -> Status {
      ASSIGN_OR_RETURN(batch, state->tables->SelectEvents(state->kind, state->cursor, kBatch));
      return Status::Ok();
    });
    if (!s.ok() && s.code() != Code::kUnavailable) return fail(s);
    if (s.ok()) {
      if (batch.compacted > state->cursor) {
        return fail(OutOfRange("revision compacted: watch of " + state->kind + " at revision " +
                               std::to_string(state->cursor) + " fell behind the history, " +
                               "which now starts after revision " +
                               std::to_string(batch.compacted) + "; relist"));
      }
      for (size_t i = 0; i < batch.events.size(); ++i) {
        if (state->stop) return;
        state->on_event(batch.events[i]);
        state->cursor = batch.revisions[i];
      }
      if (static_cast<int64_t>(batch.events.size()) == kBatch) continue;
      // Every event of this kind up to head was in the snapshot.
      state->cursor = std::max(state->cursor, batch.head);
    }
    state->tables->WaitForWrite(seen, state->poll, [&] { return state->stop.load(); });
  }
}

}  // namespace pillar::store
