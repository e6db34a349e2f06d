// The informer-style cache: one list per kind, then only the watch; a watch
// that ends is followed by a relist whose differences reach the handlers.
#include "store/cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/temp_dir.h"
#include "store/sqlite/sqlite_store.h"

namespace pillar::store {
namespace {

using std::chrono::milliseconds;

// Forwards to a real store, counts Lists, and can end every live watch the
// way a compaction or a cut stream would.
class CountingStore : public Store {
 public:
  explicit CountingStore(Store& inner) : inner_(inner) {}
  StatusOr<Object> Get(const std::string& k, const std::string& n) override {
    gets++;
    return inner_.Get(k, n);
  }
  StatusOr<ListResult> List(const std::string& k,
                            const std::optional<LabelSelector>& s = {}) override {
    lists++;
    return inner_.List(k, s);
  }
  StatusOr<Object> Create(const Object& o) override { return inner_.Create(o); }
  StatusOr<Object> Update(const Object& o) override { return inner_.Update(o); }
  StatusOr<Object> UpdateStatus(const Object& o) override { return inner_.UpdateStatus(o); }
  Status Delete(const std::string& k, const std::string& n, const Preconditions& p = {}) override {
    return inner_.Delete(k, n, p);
  }
  StatusOr<std::unique_ptr<WatchHandle>> Watch(const std::string& kind, const std::string& from,
                                               EventHandler on_event,
                                               ErrorHandler on_error) override {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.push_back(on_error);
    auto handler = [this, on_event = std::move(on_event)](const Event& e) {
      if (!blind) on_event(e);
    };
    return inner_.Watch(kind, from, handler, [](const Status&) {});
  }
  // Ends the watches seen so far with OUT_OF_RANGE, as a compaction would.
  void EndWatches() {
    std::vector<ErrorHandler> errors;
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors.swap(errors_);
    }
    for (auto& e : errors) e(OutOfRange("revision compacted"));
  }

  std::atomic<int> gets{0};
  std::atomic<int> lists{0};
  std::atomic<bool> blind{false};  // drop events, as a cut stream would

 private:
  Store& inner_;
  std::mutex mu_;
  std::vector<ErrorHandler> errors_;
};

Object Vol(const std::string& name) {
  Object o;
  o.kind = "PillarVolumeState";
  o.name = name;
  o.spec = {{"agentRef", "a"}};
  return o;
}

template <typename F>
bool Eventually(F f) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return false;
}

class StoreCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions options;
    options.path = dir_.Sub("store.db");
    options.poll_interval = milliseconds(20);
    auto opened = SqliteStore::Open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    sqlite_ = std::move(opened).value();
    store_ = std::make_unique<CountingStore>(*sqlite_);
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> sqlite_;
  std::unique_ptr<CountingStore> store_;
};

TEST_F(StoreCacheTest, ServesReadsFromMemoryAfterOneList) {
  ASSERT_TRUE(store_->Create(Vol("pvc-1")).ok());
  StoreCache cache(*store_, {"PillarVolumeState"});
  ASSERT_TRUE(cache.Start().ok());
  EXPECT_EQ(store_->lists.load(), 1);
  ASSERT_TRUE(store_->Create(Vol("pvc-2")).ok());
  ASSERT_TRUE(Eventually([&] { return cache.Get("PillarVolumeState", "pvc-2").ok(); }));
  for (int i = 0; i < 100; ++i) {
    auto all = cache.List("PillarVolumeState");
    ASSERT_TRUE(all.ok());
    ASSERT_EQ(all->size(), 2u);
    EXPECT_EQ((*all)[0].name, "pvc-1") << "sorted by name";
  }
  EXPECT_EQ(store_->lists.load(), 1) << "reads never list the store again";
  EXPECT_EQ(store_->gets.load(), 0);
  EXPECT_EQ(cache.Get("PillarVolumeState", "nope").status().code(), Code::kNotFound);
  EXPECT_EQ(cache.Get("PillarNode", "x").status().code(), Code::kFailedPrecondition);

  ASSERT_TRUE(store_->Delete("PillarVolumeState", "pvc-1").ok());
  ASSERT_TRUE(Eventually(
      [&] { return cache.Get("PillarVolumeState", "pvc-1").status().code() == Code::kNotFound; }));
  EXPECT_EQ(cache.stats().lists, 1);
}

TEST_F(StoreCacheTest, EndedWatchRelistsAndReportsWhatChangedMeanwhile) {
  ASSERT_TRUE(store_->Create(Vol("keep")).ok());
  ASSERT_TRUE(store_->Create(Vol("gone")).ok());
  StoreCache cache(*store_, {"PillarVolumeState"});
  std::mutex mu;
  std::vector<std::pair<EventType, std::string>> seen;
  cache.OnChange("PillarVolumeState", [&](const Event& e) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(e.type, e.object.name);
  });
  ASSERT_TRUE(cache.Start().ok());
  // Changes the cache cannot see: the stream is cut before they happen.
  store_->blind = true;
  ASSERT_TRUE(store_->Delete("PillarVolumeState", "gone").ok());
  ASSERT_TRUE(store_->Create(Vol("new")).ok());
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(cache.Get("PillarVolumeState", "gone").ok()) << "the cache was blind";
  store_->blind = false;
  store_->EndWatches();
  ASSERT_TRUE(Eventually([&] { return cache.stats().relists >= 1; }));
  EXPECT_EQ(cache.Get("PillarVolumeState", "gone").status().code(), Code::kNotFound);
  EXPECT_TRUE(cache.Get("PillarVolumeState", "new").ok());
  std::lock_guard<std::mutex> lock(mu);
  bool deleted = false, kept = false, added = false;
  for (const auto& [type, name] : seen) {
    deleted = deleted || (type == EventType::kDeleted && name == "gone");
    kept = kept || (type == EventType::kModified && name == "keep");
    added = added || (type == EventType::kModified && name == "new");
  }
  EXPECT_TRUE(deleted);
  EXPECT_TRUE(added);
  EXPECT_TRUE(kept) << "a relist reports every listed object, so triggers see it";
  EXPECT_EQ(store_->lists.load(), 2);
}

}  // namespace
}  // namespace pillar::store
