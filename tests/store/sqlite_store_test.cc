#include "store/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/temp_dir.h"
#include "store/store_conformance.h"

namespace pillar::store {
namespace {

using std::chrono::milliseconds;

SqliteStoreOptions OptionsFor(const std::string& dir) {
  SqliteStoreOptions options;
  options.path = dir + "/store.db";
  options.poll_interval = milliseconds(20);  // keeps the cross-client watch tests quick
  return options;
}

testing::StoreBackend SqliteBackend() {
  testing::StoreBackend backend;
  backend.name = "sqlite";
  backend.open = [](const std::string& dir) -> std::unique_ptr<Store> {
    auto store = SqliteStore::Open(OptionsFor(dir));
    if (!store.ok()) {
      ADD_FAILURE() << store.status().ToString();
      return nullptr;
    }
    return std::move(store).value();
  };
  backend.compact = [](Store& store, const std::string& resource_version) -> Status {
    ASSIGN_OR_RETURN(int64_t revision, ParseRevision(resource_version, "compact"));
    return dynamic_cast<SqliteStore&>(store).Compact(revision);
  };
  backend.check_integrity = [](const std::string& dir) -> Status {
    sqlite3* db = nullptr;
    std::string result = "cannot open";
    if (sqlite3_open((dir + "/store.db").c_str(), &db) == SQLITE_OK) {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr) == SQLITE_OK &&
          sqlite3_step(stmt) == SQLITE_ROW) {
        result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      }
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    if (result != "ok") return Internal("integrity_check: " + result);
    return Status::Ok();
  };
  return backend;
}

using testing::StoreConformanceTest;
INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformanceTest, ::testing::Values(SqliteBackend()),
                         testing::BackendName);

// Raw SQL access to the file, as an operator (or a bug) might have.
class RawDb {
 public:
  explicit RawDb(const std::string& path) { sqlite3_open(path.c_str(), &db_); }
  ~RawDb() { sqlite3_close(db_); }
  std::string One(const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return sqlite3_errmsg(db_);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      auto text = sqlite3_column_text(stmt, 0);
      if (text != nullptr) out = reinterpret_cast<const char*>(text);
    }
    sqlite3_finalize(stmt);
    return out;
  }
  int Exec(const char* sql) { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }

 private:
  sqlite3* db_ = nullptr;
};

std::unique_ptr<SqliteStore> MustOpen(const SqliteStoreOptions& options) {
  auto store = SqliteStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

Object Obj(const std::string& kind, const std::string& name) {
  Object o;
  o.kind = kind;
  o.name = name;
  return o;
}

TEST(SqliteStoreTest, FileIsPrivateWalAndHasTheSchema) {
  pillar::testing::TempDir tmp;
  auto store = SqliteStore::Open(OptionsFor(tmp.path()));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Create(Obj(kPillarNode, "n")).ok());
  struct stat st {};
  ASSERT_EQ(stat((tmp.path() + "/store.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  RawDb raw(tmp.path() + "/store.db");
  EXPECT_EQ(raw.One("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.One("SELECT value FROM meta WHERE key='schema_version'"), "1");
  EXPECT_EQ(raw.One("SELECT value FROM meta WHERE key='revision'"), "1");
  EXPECT_EQ(raw.One("SELECT type FROM events WHERE rev=1"), "ADDED");
}

TEST(SqliteStoreTest, RetentionDropsOldHistoryInBatches) {
  pillar::testing::TempDir tmp;
  SqliteStoreOptions options = OptionsFor(tmp.path());
  options.history_limit = 20;
  auto opened = SqliteStore::Open(options);
  ASSERT_TRUE(opened.ok());
  auto& store = *opened;
  Object o = *store->Create(Obj(kPillarAgent, "a"));
  for (int i = 0; i < 99; ++i) {
    o.status["i"] = i;
    o = *store->UpdateStatus(o);
  }
  RawDb raw(tmp.path() + "/store.db");
  int64_t kept = std::stoll(raw.One("SELECT count(*) FROM events"));
  EXPECT_GE(kept, 20);
  EXPECT_LE(kept, 22);
  int64_t compacted = std::stoll(raw.One("SELECT value FROM meta WHERE key='compacted'"));
  EXPECT_EQ(compacted, 100 - kept);
  EXPECT_EQ(store->Watch(kPillarAgent, std::to_string(compacted - 1), [](const Event&) {})
                .status()
                .code(),
            Code::kOutOfRange);
  EXPECT_TRUE(store->Watch(kPillarAgent, std::to_string(compacted), [](const Event&) {}).ok());
  // This backend's versions are decimal revisions; anything else is refused.
  for (const char* bad : {"-1", "x", "1.5", ""}) {
    EXPECT_EQ(store->Watch(kPillarAgent, bad, [](const Event&) {}).status().code(),
              Code::kInvalidArgument)
        << bad;
  }
}

TEST(SqliteStoreTest, WatchThatFallsBehindTheHistoryReportsOutOfRange) {
  pillar::testing::TempDir tmp;
  SqliteStoreOptions options = OptionsFor(tmp.path());
  options.history_limit = 5;
  auto opened = SqliteStore::Open(options);
  ASSERT_TRUE(opened.ok());
  auto& store = *opened;

  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int delivered = 0;
  std::optional<Status> error;
  auto watch = store->Watch(
      kPillarAgent, "0",
      [&](const Event&) {
        std::unique_lock lock(mu);
        ++delivered;
        cv.notify_all();
        cv.wait(lock, [&] { return release; });  // a slow consumer
      },
      [&](const Status& s) {
        std::lock_guard lock(mu);
        error = s;
        cv.notify_all();
      });
  ASSERT_TRUE(watch.ok());
  Object o = *store->Create(Obj(kPillarAgent, "a"));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return delivered == 1; }));
  }
  for (int i = 0; i < 30; ++i) {
    o.status["i"] = i;
    o = *store->UpdateStatus(o);
  }
  std::unique_lock lock(mu);
  release = true;
  cv.notify_all();
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return error.has_value(); }));
  EXPECT_EQ(error->code(), Code::kOutOfRange);
  EXPECT_NE(error->message().find("compacted"), std::string::npos);
  EXPECT_EQ(delivered, 1);
}

TEST(SqliteStoreTest, NewerSchemaIsRefused) {
  pillar::testing::TempDir tmp;
  ASSERT_TRUE(SqliteStore::Open(OptionsFor(tmp.path())).ok());
  {
    RawDb raw(tmp.path() + "/store.db");
    ASSERT_EQ(raw.Exec("UPDATE meta SET value = 2 WHERE key = 'schema_version'"), SQLITE_OK);
  }
  auto store = SqliteStore::Open(OptionsFor(tmp.path()));
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("schema version 2"), std::string::npos);
}

TEST(SqliteStoreTest, CorruptRowIsDataLossNamingTheObject) {
  pillar::testing::TempDir tmp;
  auto store = MustOpen(OptionsFor(tmp.path()));
  ASSERT_TRUE(store->Create(Obj(kPillarNode, "n")).ok());
  {
    RawDb raw(tmp.path() + "/store.db");
    ASSERT_EQ(raw.Exec("UPDATE objects SET spec = '{broken' WHERE name = 'n'"), SQLITE_OK);
  }
  auto got = store->Get(kPillarNode, "n");
  EXPECT_EQ(got.status().code(), Code::kDataLoss);
  EXPECT_NE(got.status().message().find("PillarNode/n"), std::string::npos);
}

TEST(SqliteStoreTest, WriterBlockedBeyondBusyTimeoutIsUnavailable) {
  pillar::testing::TempDir tmp;
  SqliteStoreOptions options = OptionsFor(tmp.path());
  options.busy_timeout = milliseconds(200);
  auto store = MustOpen(options);
  RawDb raw(options.path);
  ASSERT_EQ(raw.Exec("BEGIN IMMEDIATE"), SQLITE_OK);  // another process holds the write lock
  auto blocked = store->Create(Obj(kPillarNode, "n"));
  EXPECT_EQ(blocked.status().code(), Code::kUnavailable);
  // Reads go on under WAL.
  EXPECT_EQ(store->Get(kPillarNode, "n").status().code(), Code::kNotFound);
  ASSERT_EQ(raw.Exec("COMMIT"), SQLITE_OK);
  EXPECT_TRUE(store->Create(Obj(kPillarNode, "n")).ok());
}

TEST(SqliteStoreTest, WatchOutlivesTheStoreObject) {
  pillar::testing::TempDir tmp;
  auto store = MustOpen(OptionsFor(tmp.path()));
  std::atomic<int> events{0};
  auto watch = store->Watch(kPillarNode, "0", [&](const Event&) { ++events; });
  ASSERT_TRUE(watch.ok());
  store.reset();
  auto writer = MustOpen(OptionsFor(tmp.path()));
  ASSERT_TRUE(writer->Create(Obj(kPillarNode, "n")).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (events == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(events, 1);
}

TEST(SqliteStoreTest, BadOptionsAreInvalidArgument) {
  SqliteStoreOptions options;
  EXPECT_EQ(SqliteStore::Open(options).status().code(), Code::kInvalidArgument);
  pillar::testing::TempDir tmp;
  options = OptionsFor(tmp.path());
  options.history_limit = 0;
  EXPECT_EQ(SqliteStore::Open(options).status().code(), Code::kInvalidArgument);
  options = OptionsFor(tmp.path());
  options.path = tmp.path() + "/missing-dir/store.db";
  EXPECT_EQ(SqliteStore::Open(options).status().code(), Code::kUnavailable);
}

TEST(StoreJsonTest, RoundTripsTheKubernetesLayout) {
  Object o = Obj(kPillarVolumeState, "pvc-1");
  o.uid = "0b5c3a52-4a8e-4f59-9d2e-3f3a7cbe1a10";
  o.resource_version = "42";
  o.generation = 3;
  o.creation_timestamp = "2024-01-02T03:04:05Z";
  o.deletion_timestamp = "2024-01-03T00:00:00Z";
  o.labels = {{"a", "b"}};
  o.spec = {{"volumeID", "pvc-1"}};
  o.status = {{"deleting", true}};
  nlohmann::json j = ToJson(o);
  EXPECT_EQ(j["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(j["metadata"]["labels"]["a"], "b");
  auto back = FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, o);
  j["metadata"]["resourceVersion"] = 42;  // Kubernetes writes a string
  EXPECT_EQ(FromJson(j).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FromJson(nlohmann::json::array()).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pillar::store
