#include "store/sqlite/sqlite_tables.h"

#include <algorithm>
#include <charconv>
#include <thread>
#include <utility>

namespace pillar::store {

StatusOr<int64_t> ParseRevision(const std::string& resource_version, const std::string& what) {
  int64_t value = 0;
  const char* end = resource_version.data() + resource_version.size();
  auto [ptr, ec] = std::from_chars(resource_version.data(), end, value);
  if (resource_version.empty() || ec != std::errc() || ptr != end || value < 0) {
    return InvalidArgument("resourceVersion \"" + resource_version + "\" of " + what +
                           " is not one this store wrote (a decimal revision)");
  }
  return value;
}
namespace {

constexpr int64_t kSchemaVersion = 1;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS objects (
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  uid TEXT NOT NULL,
  rv INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  created TEXT NOT NULL,
  deletion_ts TEXT,
  labels TEXT NOT NULL,
  spec TEXT NOT NULL,
  status TEXT NOT NULL,
  PRIMARY KEY (kind, name)
);
CREATE TABLE IF NOT EXISTS events (
  rev INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  object TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_kind ON events (kind, rev);
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (key, value) VALUES ('revision', 0), ('compacted', 0);
)sql";

StatusOr<nlohmann::json> ParseColumn(const std::string& text, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(Code::kDataLoss, what + " is not valid JSON");
  return j;
}

Status NonStringLabel(const std::string& what, const std::string& key) {
  return {Code::kDataLoss, what + " label " + key + " is not a string"};
}

// Columns: name, uid, rv, generation, created, deletion_ts, labels, spec, status.
StatusOr<Object> ReadObjectRow(const SqliteStatement& row, const std::string& kind,
                               const std::optional<LabelSelector>& selector, bool* matched) {
  Object o;
  o.kind = kind;
  o.name = row.Text(0);
  const std::string what = "stored " + Describe(kind, o.name);
  ASSIGN_OR_RETURN(nlohmann::json labels, ParseColumn(row.Text(6), what + " labels"));
  if (!labels.is_object()) return Status(Code::kDataLoss, what + " labels are not an object");
  for (const auto& [key, value] : labels.items()) {
    if (!value.is_string()) return NonStringLabel(what, key);
    o.labels[key] = value.get<std::string>();
  }
  // Filtering before parsing spec and status keeps selective lists cheap.
  *matched = !selector || MatchesSelector(o.labels, *selector);
  if (!*matched) return o;
  o.uid = row.Text(1);
  o.resource_version = std::to_string(row.Int(2));
  o.generation = row.Int(3);
  o.creation_timestamp = row.Text(4);
  if (!row.IsNull(5)) o.deletion_timestamp = row.Text(5);
  ASSIGN_OR_RETURN(o.spec, ParseColumn(row.Text(7), what + " spec"));
  ASSIGN_OR_RETURN(o.status, ParseColumn(row.Text(8), what + " status"));
  return o;
}

StatusOr<EventType> ParseEventType(const std::string& s) {
  for (EventType t : {EventType::kAdded, EventType::kModified, EventType::kDeleted}) {
    if (s == EventTypeName(t)) return t;
  }
  return Status(Code::kDataLoss, "stored event has unknown type \"" + s + "\"");
}

}  // namespace

StatusOr<std::shared_ptr<SqliteTables>> SqliteTables::Open(const Options& options) {
  if (options.path.empty()) return InvalidArgument("store path must not be empty");
  if (options.history_limit < 1) return InvalidArgument("store history limit must be at least 1");
  ASSIGN_OR_RETURN(auto conn, SqliteConnection::Open(options.path, options.busy_timeout));
  std::shared_ptr<SqliteTables> tables(new SqliteTables(std::move(conn), options));
  RETURN_IF_ERROR(tables->Configure().Annotate("store " + options.path));
  return tables;
}

Status SqliteTables::Configure() {
  RETURN_IF_ERROR(ConfigureConnection());
  return Write([&]() -> Status {
    RETURN_IF_ERROR(conn_->Exec(kSchema));
    ASSIGN_OR_RETURN(auto get, conn_->Prepare("SELECT value FROM meta WHERE key='schema_version'"));
    ASSIGN_OR_RETURN(bool found, get.Step());
    if (!found) {
      ASSIGN_OR_RETURN(auto put, conn_->Prepare("INSERT INTO meta (key, value) VALUES "
                                                "('schema_version', ?)"));
      return put.Bind(1, kSchemaVersion).Run();
    }
    if (get.Int(0) != kSchemaVersion) {
      return FailedPrecondition("schema version " + std::to_string(get.Int(0)) +
                                " is not the supported version " + std::to_string(kSchemaVersion));
    }
    return Status::Ok();
  });
}

Status SqliteTables::ConfigureConnection() {
  std::lock_guard lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + options_.busy_timeout;
  while (true) {
    // Switching to WAL needs a moment without other writers; retry on busy.
    ASSIGN_OR_RETURN(auto pragma, conn_->Prepare("PRAGMA journal_mode=WAL"));
    auto row = pragma.Step();
    if (row.ok() && *row) {
      if (pragma.Text(0) != "wal") {
        return FailedPrecondition("journal mode is " + pragma.Text(0) + ", WAL is required");
      }
      break;
    }
    Status s = row.ok() ? Internal("PRAGMA journal_mode returned nothing") : row.status();
    if (s.code() != Code::kUnavailable || std::chrono::steady_clock::now() >= deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // FULL: a commit is on disk (WAL synced) before it is acknowledged.
  return conn_->Exec("PRAGMA synchronous=FULL");
}

Status SqliteTables::Transaction(const char* begin, const std::function<Status()>& body) {
  std::lock_guard lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + options_.busy_timeout;
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    Status s = conn_->Exec(begin);
    if (s.ok()) {
      s = body();
      if (s.ok()) s = conn_->Exec("COMMIT");
      // Also after a failed COMMIT, which leaves the transaction open.
      if (!s.ok()) (void)conn_->Exec("ROLLBACK");
    }
    if (s.code() != Code::kUnavailable) return s;
    if (std::chrono::steady_clock::now() >= deadline) {
      return Unavailable("store " + options_.path + " stayed busy for " +
                         std::to_string(options_.busy_timeout.count()) + " ms: " + s.message());
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

Status SqliteTables::Write(const std::function<Status()>& body) {
  Status s = Transaction("BEGIN IMMEDIATE", body);
  if (s.ok()) {
    std::lock_guard lock(notify_mu_);
    ++write_count_;
  }
  notify_cv_.notify_all();
  return s;
}

Status SqliteTables::Read(const std::function<Status()>& body) {
  return Transaction("BEGIN DEFERRED", body);
}

StatusOr<std::optional<Object>> SqliteTables::SelectObject(const std::string& kind,
                                                           const std::string& name) {
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("SELECT name, uid, rv, generation, created, "
                                          "deletion_ts, labels, spec, status FROM objects "
                                          "WHERE kind = ? AND name = ?"));
  q.Bind(1, kind).Bind(2, name);
  ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return std::optional<Object>();
  bool matched = false;
  ASSIGN_OR_RETURN(Object o, ReadObjectRow(q, kind, std::nullopt, &matched));
  return std::optional<Object>(std::move(o));
}

StatusOr<std::vector<Object>> SqliteTables::SelectObjects(
    const std::string& kind, const std::optional<LabelSelector>& selector) {
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("SELECT name, uid, rv, generation, created, "
                                          "deletion_ts, labels, spec, status FROM objects "
                                          "WHERE kind = ? ORDER BY name"));
  q.Bind(1, kind);
  std::vector<Object> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return out;
    bool matched = false;
    ASSIGN_OR_RETURN(Object o, ReadObjectRow(q, kind, selector, &matched));
    if (matched) out.push_back(std::move(o));
  }
}

StatusOr<int64_t> SqliteTables::GetMeta(const char* key) {
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("SELECT value FROM meta WHERE key = ?"));
  q.Bind(1, std::string_view(key));
  ASSIGN_OR_RETURN(bool found, q.Step());
  if (!found) return Status(Code::kDataLoss, std::string("meta key ") + key + " is missing");
  return q.Int(0);
}

Status SqliteTables::SetMeta(const char* key, int64_t value) {
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("UPDATE meta SET value = ? WHERE key = ?"));
  return q.Bind(1, value).Bind(2, std::string_view(key)).Run();
}

StatusOr<int64_t> SqliteTables::Revision() { return GetMeta("revision"); }
StatusOr<int64_t> SqliteTables::Compacted() { return GetMeta("compacted"); }

StatusOr<int64_t> SqliteTables::NextRevision() {
  ASSIGN_OR_RETURN(int64_t rev, Revision());
  RETURN_IF_ERROR(SetMeta("revision", rev + 1));
  return rev + 1;
}

Status SqliteTables::PutObject(const Object& o) {
  const std::string what = Describe(o.kind, o.name);
  ASSIGN_OR_RETURN(int64_t revision, ParseRevision(o.resource_version, what));
  ASSIGN_OR_RETURN(std::string labels, DumpJson(nlohmann::json(o.labels), what + " labels"));
  ASSIGN_OR_RETURN(std::string spec, DumpJson(o.spec, what + " spec"));
  ASSIGN_OR_RETURN(std::string status, DumpJson(o.status, what + " status"));
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("INSERT OR REPLACE INTO objects (kind, name, uid, rv, "
                                          "generation, created, deletion_ts, labels, spec, "
                                          "status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  q.Bind(1, o.kind).Bind(2, o.name).Bind(3, o.uid).Bind(4, revision);
  q.Bind(5, o.generation).Bind(6, o.creation_timestamp);
  if (o.deletion_timestamp) {
    q.Bind(7, *o.deletion_timestamp);
  } else {
    q.BindNull(7);
  }
  q.Bind(8, labels).Bind(9, spec).Bind(10, status);
  return q.Run();
}

Status SqliteTables::RemoveObject(const std::string& kind, const std::string& name) {
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("DELETE FROM objects WHERE kind = ? AND name = ?"));
  return q.Bind(1, kind).Bind(2, name).Run();
}

Status SqliteTables::AppendEvent(EventType type, const Object& o) {
  ASSIGN_OR_RETURN(int64_t revision, ParseRevision(o.resource_version, Describe(o.kind, o.name)));
  ASSIGN_OR_RETURN(std::string json, DumpJson(ToJson(o), Describe(o.kind, o.name)));
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("INSERT INTO events (rev, kind, name, type, object) "
                                          "VALUES (?, ?, ?, ?, ?)"));
  q.Bind(1, revision).Bind(2, o.kind).Bind(3, o.name);
  q.Bind(4, std::string_view(EventTypeName(type))).Bind(5, json);
  RETURN_IF_ERROR(q.Run());
  // Compact in batches, not on every write: retained history stays between
  // history_limit and history_limit + slack events.
  ASSIGN_OR_RETURN(int64_t compacted, Compacted());
  const int64_t limit = options_.history_limit;
  const int64_t slack = std::clamp<int64_t>(limit / 10, 1, 1000);
  if (revision - compacted > limit + slack) {
    return CompactTo(revision - limit);
  }
  return Status::Ok();
}

Status SqliteTables::CompactTo(int64_t revision) {
  ASSIGN_OR_RETURN(int64_t head, Revision());
  ASSIGN_OR_RETURN(int64_t compacted, Compacted());
  revision = std::min(revision, head);
  if (revision <= compacted) return Status::Ok();
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("DELETE FROM events WHERE rev <= ?"));
  RETURN_IF_ERROR(q.Bind(1, revision).Run());
  return SetMeta("compacted", revision);
}

StatusOr<EventBatch> SqliteTables::SelectEvents(const std::string& kind, int64_t after,
                                                int64_t limit) {
  EventBatch batch;
  ASSIGN_OR_RETURN(batch.head, Revision());
  ASSIGN_OR_RETURN(batch.compacted, Compacted());
  ASSIGN_OR_RETURN(auto q, conn_->Prepare("SELECT rev, type, object FROM events "
                                          "WHERE kind = ? AND rev > ? ORDER BY rev LIMIT ?"));
  q.Bind(1, kind).Bind(2, after).Bind(3, limit);
  while (true) {
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) return batch;
    Event e;
    const int64_t revision = q.Int(0);
    ASSIGN_OR_RETURN(e.type, ParseEventType(q.Text(1)));
    ASSIGN_OR_RETURN(nlohmann::json j,
                     ParseColumn(q.Text(2), "stored event " + std::to_string(revision)));
    auto object = FromJson(j);
    if (!object.ok()) {
      return Status(Code::kDataLoss,
                    "stored event " + std::to_string(revision) + ": " + object.status().message());
    }
    e.object = std::move(object).value();
    batch.events.push_back(std::move(e));
    batch.revisions.push_back(revision);
  }
}

uint64_t SqliteTables::WriteCount() {
  std::lock_guard lock(notify_mu_);
  return write_count_;
}

void SqliteTables::WaitForWrite(uint64_t seen, std::chrono::milliseconds timeout,
                                const std::function<bool()>& stop) {
  std::unique_lock lock(notify_mu_);
  notify_cv_.wait_for(lock, timeout, [&] { return write_count_ != seen || stop(); });
}

void SqliteTables::WakeAll() {
  { std::lock_guard lock(notify_mu_); }
  notify_cv_.notify_all();
}

}  // namespace pillar::store
