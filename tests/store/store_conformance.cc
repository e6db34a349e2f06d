#include "store/store_conformance.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace pillar::store::testing {

std::string BackendName(const ::testing::TestParamInfo<StoreBackend>& info) {
  return info.param.name;
}

void StoreConformanceTest::SetUp() {
  ASSERT_FALSE(dir_.path().empty());
  store_ = Open();
  ASSERT_NE(store_, nullptr);
}

namespace {

using std::chrono::milliseconds;

// Long enough for any backend to deliver an event it has (polling included),
// even on a slow machine: a ceiling, never reached when all is well.
constexpr milliseconds kEventWait{60000};
// How long we wait to be sure an event that should not come does not.
constexpr milliseconds kQuiet{400};

Object NewObject(const std::string& kind, const std::string& name,
                 nlohmann::json spec = nlohmann::json::object()) {
  Object o;
  o.kind = kind;
  o.name = name;
  o.spec = std::move(spec);
  return o;
}

}  // namespace

Object StoreConformanceTest::MustCreate(const std::string& kind, const std::string& name,
                                        nlohmann::json spec) {
  auto created = store_->Create(NewObject(kind, name, std::move(spec)));
  EXPECT_TRUE(created.ok()) << created.status().ToString();
  return created.ok() ? *created : Object{};
}

namespace {

// Collects the events of one watch; the handle stops the watch when the
// collector goes away.
class EventCollector {
 public:
  Status Start(Store& store, const std::string& kind, int64_t from) {
    auto handle = store.Watch(
        kind, from,
        [this](const Event& e) {
          std::lock_guard lock(mu_);
          events_.push_back(e);
          cv_.notify_all();
        },
        [this](const Status& s) {
          std::lock_guard lock(mu_);
          error_ = s;
          cv_.notify_all();
        });
    if (!handle.ok()) return handle.status();
    handle_ = std::move(handle).value();
    return Status::Ok();
  }

  // Waits for at least n events; returns all received so far.
  std::vector<Event> WaitFor(size_t n, milliseconds timeout = kEventWait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return events_.size() >= n || !error_.ok(); });
    return events_;
  }

  // Waits for n events, then a quiet period, and returns everything: a test
  // of "exactly these events".
  std::vector<Event> Exactly(size_t n) {
    WaitFor(n);
    std::this_thread::sleep_for(kQuiet);
    std::lock_guard lock(mu_);
    return events_;
  }

  Status error() {
    std::lock_guard lock(mu_);
    return error_;
  }

  void Stop() { handle_.reset(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  Status error_;
  std::unique_ptr<WatchHandle> handle_;  // last: stopped before the rest goes
};

#define STORE_TEST(name) TEST_P(StoreConformanceTest, name)

STORE_TEST(CreateSetsMetadataAndGetReturnsIt) {
  Object in = NewObject(kPillarVolumeState, "pvc-1", {{"volumeID", "pvc-1"}, {"capacity", 1024}});
  in.labels = {{"agent", "node-a"}};
  in.status = {{"exportSpec", {{"bindAddress", "10.0.0.1"}, {"port", 4420}}}};
  in.uid = "ignored";
  in.generation = 7;
  auto created = store_->Create(in);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->kind, kPillarVolumeState);
  EXPECT_EQ(created->name, "pvc-1");
  EXPECT_EQ(created->uid.size(), 36u);
  EXPECT_NE(created->uid, "ignored");
  EXPECT_GT(created->resource_version, 0);
  EXPECT_EQ(created->generation, 1);
  EXPECT_EQ(created->creation_timestamp.size(), 20u);  // 2024-01-02T03:04:05Z
  EXPECT_EQ(created->creation_timestamp.back(), 'Z');
  EXPECT_FALSE(created->deletion_timestamp);
  EXPECT_EQ(created->labels, in.labels);
  EXPECT_EQ(created->spec, in.spec);
  EXPECT_EQ(created->status, in.status);  // intent recorded at create, atomically

  auto got = store_->Get(kPillarVolumeState, "pvc-1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, *created);
  EXPECT_EQ(*store_->CurrentRevision(), created->resource_version);
}

STORE_TEST(GetMissingIsNotFound) {
  auto got = store_->Get(kPillarNode, "nope");
  EXPECT_EQ(got.status().code(), Code::kNotFound);
  EXPECT_NE(got.status().message().find("PillarNode/nope"), std::string::npos);
}

STORE_TEST(CreateExistingIsAlreadyExistsAndChangesNothing) {
  Object first = MustCreate(kPillarAgent, "agent-1", {{"address", "10.0.0.1"}});
  auto again = store_->Create(NewObject(kPillarAgent, "agent-1", {{"address", "10.0.0.2"}}));
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  EXPECT_NE(again.status().message().find("PillarAgent/agent-1"), std::string::npos);
  EXPECT_EQ(*store_->Get(kPillarAgent, "agent-1"), first);
  EXPECT_EQ(*store_->CurrentRevision(), first.resource_version);
  // The same name in another kind is another object.
  EXPECT_TRUE(store_->Create(NewObject(kPillarNode, "agent-1")).ok());
}

STORE_TEST(ListReturnsOneKindSortedAndFiltersByLabels) {
  for (std::string name : {"c", "a", "b"}) {
    Object o = NewObject(kPillarNode, name, {{"nodeID", name}});
    o.labels = {{"zone", name == "b" ? "z2" : "z1"}, {"role", "consumer"}};
    ASSERT_TRUE(store_->Create(o).ok());
  }
  MustCreate(kPillarAgent, "a");
  auto all = store_->List(kPillarNode);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->items.size(), 3u);
  EXPECT_EQ(all->items[0].name, "a");
  EXPECT_EQ(all->items[1].name, "b");
  EXPECT_EQ(all->items[2].name, "c");
  EXPECT_EQ(all->items[2].spec["nodeID"], "c");
  EXPECT_EQ(all->revision, *store_->CurrentRevision());

  auto z1 = store_->List(kPillarNode, LabelSelector{{"zone", "z1"}, {"role", "consumer"}});
  ASSERT_TRUE(z1.ok());
  ASSERT_EQ(z1->items.size(), 2u);
  EXPECT_EQ(z1->items[0].name, "a");
  EXPECT_EQ(z1->items[1].name, "c");
  EXPECT_TRUE(store_->List(kPillarNode, LabelSelector{{"zone", "z3"}})->items.empty());
  EXPECT_TRUE(store_->List(kPillarVolumeState)->items.empty());
  EXPECT_EQ(store_->List(kPillarNode, LabelSelector{})->items.size(), 3u);
}

STORE_TEST(EveryWriteGetsANewHigherRevision) {
  std::vector<int64_t> revs;
  Object a = MustCreate(kPillarNode, "a");
  revs.push_back(a.resource_version);
  Object b = MustCreate(kPillarAgent, "b");
  revs.push_back(b.resource_version);
  a.spec["x"] = 1;
  a = *store_->Update(a);
  revs.push_back(a.resource_version);
  a.status["y"] = 2;
  a = *store_->UpdateStatus(a);
  revs.push_back(a.resource_version);
  ASSERT_TRUE(store_->Delete(kPillarAgent, "b").ok());
  revs.push_back(*store_->CurrentRevision());
  for (size_t i = 1; i < revs.size(); ++i) EXPECT_GT(revs[i], revs[i - 1]) << i;
}

// A lost compare-and-swap: ABORTED "conflict" naming the object and both versions.
void ExpectConflict(const Status& s, int64_t stale, int64_t current) {
  ASSERT_EQ(s.code(), Code::kAborted);
  const std::string& msg = s.message();
  EXPECT_NE(msg.find("conflict"), std::string::npos) << msg;
  EXPECT_NE(msg.find("PillarVolumeState/pvc-1"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(stale)), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(current)), std::string::npos) << msg;
}

STORE_TEST(UpdateWithStaleVersionIsConflictAndChangesNothing) {
  Object v1 = MustCreate(kPillarVolumeState, "pvc-1", {{"capacity", 1}});
  Object fresh = v1;
  fresh.spec["capacity"] = 2;
  auto v2 = store_->Update(fresh);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();

  Object stale = v1;
  stale.spec["capacity"] = 3;
  auto conflict = store_->Update(stale);
  ASSERT_NO_FATAL_FAILURE(
      ExpectConflict(conflict.status(), v1.resource_version, v2->resource_version));
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), *v2);
  EXPECT_EQ(*store_->CurrentRevision(), v2->resource_version);
}

STORE_TEST(UpdateStatusWithStaleVersionIsConflictAndChangesNothing) {
  Object v1 = MustCreate(kPillarVolumeState, "pvc-1");
  Object fresh = v1;
  fresh.status["publicationGeneration"] = 1;
  auto v2 = store_->UpdateStatus(fresh);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();

  Object stale = v1;
  stale.status["publicationGeneration"] = 5;
  auto conflict = store_->UpdateStatus(stale);
  ASSERT_NO_FATAL_FAILURE(
      ExpectConflict(conflict.status(), v1.resource_version, v2->resource_version));
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), *v2);
}

STORE_TEST(UpdateWritesSpecLabelsAndDeletionButNeverStatus) {
  Object in = NewObject(kPillarVolumeState, "pvc-1", {{"capacity", 1}});
  in.status = {{"deleting", false}};
  Object v1 = *store_->Create(in);
  Object change = v1;
  change.spec["capacity"] = 2;
  change.labels["agent"] = "a";
  change.deletion_timestamp = "2024-05-01T10:00:00Z";
  change.status = {{"deleting", true}, {"bogus", 1}};
  auto v2 = store_->Update(change);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->spec["capacity"], 2);
  EXPECT_EQ(v2->labels.at("agent"), "a");
  EXPECT_EQ(v2->deletion_timestamp, "2024-05-01T10:00:00Z");
  EXPECT_EQ(v2->status, in.status);
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), *v2);
}

STORE_TEST(UpdateStatusWritesOnlyStatus) {
  Object v1 = MustCreate(kPillarVolumeState, "pvc-1", {{"capacity", 1}});
  Object change = v1;
  change.status["conditions"] = nlohmann::json::array({{{"type", "ExportReconciled"}}});
  change.spec["capacity"] = 99;
  change.labels["x"] = "y";
  change.deletion_timestamp = "2024-05-01T10:00:00Z";
  auto v2 = store_->UpdateStatus(change);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->status, change.status);
  EXPECT_EQ(v2->spec, v1.spec);
  EXPECT_EQ(v2->labels, v1.labels);
  EXPECT_FALSE(v2->deletion_timestamp);
  EXPECT_EQ(v2->generation, 1);
  EXPECT_GT(v2->resource_version, v1.resource_version);
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), *v2);
}

STORE_TEST(GenerationIncrementsOnlyOnSpecChange) {
  Object o = MustCreate(kPillarVolumeState, "pvc-1", {{"capacity", 1}});
  EXPECT_EQ(o.generation, 1);
  o.status["x"] = 1;
  o = *store_->UpdateStatus(o);
  EXPECT_EQ(o.generation, 1);
  o.labels["l"] = "v";
  o = *store_->Update(o);
  EXPECT_EQ(o.generation, 1);
  o.spec["capacity"] = 2;
  o = *store_->Update(o);
  EXPECT_EQ(o.generation, 2);
  o.spec["capacity"] = 3;
  o = *store_->Update(o);
  EXPECT_EQ(o.generation, 3);
  EXPECT_EQ(store_->Get(kPillarVolumeState, "pvc-1")->generation, 3);
}

STORE_TEST(UpdateThatChangesNothingWritesNothing) {
  Object o = MustCreate(kPillarVolumeState, "pvc-1", {{"capacity", 1}});
  o.status["x"] = 1;
  o = *store_->UpdateStatus(o);
  int64_t rev = *store_->CurrentRevision();
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarVolumeState, rev).ok());
  auto same = store_->Update(o);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, o);
  auto same_status = store_->UpdateStatus(o);
  ASSERT_TRUE(same_status.ok()) << same_status.status().ToString();
  EXPECT_EQ(*same_status, o);
  EXPECT_EQ(*store_->CurrentRevision(), rev);
  EXPECT_TRUE(events.Exactly(0).empty());
  // Still a compare-and-swap: a stale no-op is a conflict, not a success.
  Object stale = o;
  stale.resource_version -= 1;
  EXPECT_EQ(store_->Update(stale).status().code(), Code::kAborted);
}

STORE_TEST(UidIsStableAcrossUpdatesAndNewOnRecreate) {
  Object o = MustCreate(kPillarVolumeState, "pvc-1");
  const std::string uid = o.uid;
  o.spec["a"] = 1;
  o = *store_->Update(o);
  o.status["b"] = 2;
  o = *store_->UpdateStatus(o);
  EXPECT_EQ(o.uid, uid);
  EXPECT_EQ(store_->Get(kPillarVolumeState, "pvc-1")->uid, uid);
  ASSERT_TRUE(store_->Delete(kPillarVolumeState, "pvc-1").ok());
  Object again = MustCreate(kPillarVolumeState, "pvc-1");
  EXPECT_NE(again.uid, uid);
  EXPECT_EQ(again.generation, 1);
}

STORE_TEST(UpdateOfAnotherLifecycleIsRefused) {
  Object old = MustCreate(kPillarVolumeState, "pvc-1", {{"v", 1}});
  ASSERT_TRUE(store_->Delete(kPillarVolumeState, "pvc-1").ok());
  Object now = MustCreate(kPillarVolumeState, "pvc-1", {{"v", 2}});
  old.spec["v"] = 3;
  EXPECT_EQ(store_->Update(old).status().code(), Code::kAborted);
  EXPECT_EQ(store_->UpdateStatus(old).status().code(), Code::kAborted);
  // Even with the current resourceVersion, the uid must be the stored one.
  Object forged = now;
  forged.uid = old.uid;
  forged.spec["v"] = 4;
  auto refused = store_->Update(forged);
  EXPECT_EQ(refused.status().code(), Code::kAborted);
  EXPECT_NE(refused.status().message().find(old.uid), std::string::npos);
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), now);
}

STORE_TEST(UpdateOfMissingObjectIsNotFound) {
  Object o = MustCreate(kPillarNode, "n");
  ASSERT_TRUE(store_->Delete(kPillarNode, "n").ok());
  EXPECT_EQ(store_->Update(o).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->UpdateStatus(o).status().code(), Code::kNotFound);
}

STORE_TEST(DeletionTimestampCannotChangeOnceSet) {
  Object o = MustCreate(kPillarVolumeState, "pvc-1");
  o.deletion_timestamp = "2024-05-01T10:00:00Z";
  o = *store_->Update(o);
  Object cleared = o;
  cleared.deletion_timestamp.reset();
  EXPECT_EQ(store_->Update(cleared).status().code(), Code::kInvalidArgument);
  Object moved = o;
  moved.deletion_timestamp = "2025-01-01T00:00:00Z";
  EXPECT_EQ(store_->Update(moved).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), o);
}

STORE_TEST(DeleteHonoursPreconditions) {
  Object o = MustCreate(kPillarAgent, "a");
  EXPECT_EQ(
      store_->Delete(kPillarAgent, "a", {.uid = "00000000-0000-4000-8000-000000000000"}).code(),
      Code::kAborted);
  EXPECT_EQ(
      store_->Delete(kPillarAgent, "a", {.resource_version = o.resource_version + 100}).code(),
      Code::kAborted);
  EXPECT_EQ(*store_->Get(kPillarAgent, "a"), o);
  EXPECT_EQ(*store_->CurrentRevision(), o.resource_version);
  EXPECT_TRUE(
      store_->Delete(kPillarAgent, "a", {.uid = o.uid, .resource_version = o.resource_version})
          .ok());
  EXPECT_EQ(store_->Get(kPillarAgent, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->Delete(kPillarAgent, "a").code(), Code::kNotFound);
  EXPECT_TRUE(store_->List(kPillarAgent)->items.empty());
}

STORE_TEST(WatchDeliversExactlyTheEventsAfterARevisionInOrder) {
  Object a = MustCreate(kPillarVolumeState, "a");
  const int64_t after_a = a.resource_version;
  Object b = MustCreate(kPillarVolumeState, "b");
  a.spec["x"] = 1;
  a = *store_->Update(a);
  b.status["y"] = 2;
  b = *store_->UpdateStatus(b);
  ASSERT_TRUE(store_->Delete(kPillarVolumeState, "a").ok());
  const int64_t deleted_at = *store_->CurrentRevision();

  EventCollector all;
  ASSERT_TRUE(all.Start(*store_, kPillarVolumeState, 0).ok());
  auto events = all.Exactly(5);
  ASSERT_EQ(events.size(), 5u);
  std::vector<std::pair<EventType, std::string>> want = {{EventType::kAdded, "a"},
                                                         {EventType::kAdded, "b"},
                                                         {EventType::kModified, "a"},
                                                         {EventType::kModified, "b"},
                                                         {EventType::kDeleted, "a"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(events[i].type, want[i].first) << i;
    EXPECT_EQ(events[i].object.name, want[i].second) << i;
    EXPECT_EQ(events[i].object.resource_version, events[i].revision) << i;
    if (i > 0) {
      EXPECT_GT(events[i].revision, events[i - 1].revision) << i;
    }
  }
  EXPECT_EQ(events[3].object, b);
  EXPECT_EQ(events[4].revision, deleted_at);

  EventCollector later;
  ASSERT_TRUE(later.Start(*store_, kPillarVolumeState, after_a).ok());
  auto tail = later.Exactly(4);
  ASSERT_EQ(tail.size(), 4u);
  EXPECT_EQ(tail[0].object.name, "b");
  EXPECT_EQ(tail[0].type, EventType::kAdded);

  // Live events follow the replay without gaps.
  MustCreate(kPillarVolumeState, "c");
  auto more = later.WaitFor(5);
  ASSERT_EQ(more.size(), 5u);
  EXPECT_EQ(more[4].object.name, "c");
  EXPECT_TRUE(later.error().ok());
}

STORE_TEST(WatchFromCurrentRevisionSeesOnlyNewWrites) {
  MustCreate(kPillarNode, "old");
  ListResult list = *store_->List(kPillarNode);
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarNode, list.revision).ok());
  MustCreate(kPillarNode, "new");
  auto got = events.Exactly(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].object.name, "new");
  EXPECT_GT(got[0].revision, list.revision);
}

STORE_TEST(WatchDeliversOnlyItsKind) {
  EventCollector nodes;
  ASSERT_TRUE(nodes.Start(*store_, kPillarNode, 0).ok());
  MustCreate(kPillarAgent, "a");
  MustCreate(kPillarVolumeState, "v");
  MustCreate(kPillarNode, "n");
  auto got = nodes.Exactly(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].object.kind, kPillarNode);
}

STORE_TEST(DeletedEventCarriesTheLastState) {
  Object o = MustCreate(kPillarVolumeState, "pvc-1", {{"capacity", 5}});
  o.status["exportInfo"] = {{"targetID", "nqn.2024-01.com.example:pvc-1"}};
  o = *store_->UpdateStatus(o);
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarVolumeState, o.resource_version).ok());
  ASSERT_TRUE(store_->Delete(kPillarVolumeState, "pvc-1").ok());
  auto got = events.WaitFor(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].type, EventType::kDeleted);
  EXPECT_EQ(got[0].object.uid, o.uid);
  EXPECT_EQ(got[0].object.spec, o.spec);
  EXPECT_EQ(got[0].object.status, o.status);
  EXPECT_EQ(got[0].object.generation, o.generation);
  EXPECT_GT(got[0].revision, o.resource_version);
  EXPECT_EQ(got[0].object.resource_version, got[0].revision);
}

STORE_TEST(WatchSeesWritesOfAnotherClient) {
  auto other = Open();
  ASSERT_NE(other, nullptr);
  EventCollector here;
  ASSERT_TRUE(here.Start(*store_, kPillarNode, 0).ok());
  EventCollector there;
  ASSERT_TRUE(there.Start(*other, kPillarNode, 0).ok());

  auto created = other->Create(NewObject(kPillarNode, "n1", {{"ip", "10.0.0.1"}}));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Object mine = MustCreate(kPillarNode, "n2");
  Object theirs = *store_->Get(kPillarNode, "n1");
  theirs.spec["ip"] = "10.0.0.2";
  ASSERT_TRUE(store_->Update(theirs).ok());

  for (EventCollector* c : {&here, &there}) {
    auto got = c->Exactly(3);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].object.name, "n1");
    EXPECT_EQ(got[1].object.name, "n2");
    EXPECT_EQ(got[2].type, EventType::kModified);
    EXPECT_EQ(got[2].object.spec["ip"], "10.0.0.2");
    EXPECT_LT(got[0].revision, got[1].revision);
    EXPECT_LT(got[1].revision, got[2].revision);
  }
  EXPECT_EQ(*other->CurrentRevision(), *store_->CurrentRevision());
  // A conflict is a conflict whichever client wrote first.
  EXPECT_EQ(other->Update(theirs).status().code(), Code::kAborted);
  EXPECT_EQ(*other->Get(kPillarNode, "n2"), mine);
}

STORE_TEST(WatchStopsWhenTheHandleIsDestroyed) {
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarAgent, 0).ok());
  MustCreate(kPillarAgent, "a");
  ASSERT_EQ(events.WaitFor(1).size(), 1u);
  events.Stop();
  MustCreate(kPillarAgent, "b");
  EXPECT_EQ(events.Exactly(1).size(), 1u);
}

STORE_TEST(WatchHandleMayBeDestroyedFromItsHandler) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<WatchHandle> handle;
  int calls = 0;
  bool done = false;
  std::unique_lock lock(mu);
  auto started = store_->Watch(kPillarAgent, 0, [&](const Event&) {
    std::unique_ptr<WatchHandle> self;
    {
      std::lock_guard inner(mu);
      ++calls;
      self = std::move(handle);
      done = true;
    }
    cv.notify_all();
    self.reset();  // ends the watch from its own thread
  });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  handle = std::move(started).value();
  lock.unlock();
  MustCreate(kPillarAgent, "a");
  MustCreate(kPillarAgent, "b");
  lock.lock();
  ASSERT_TRUE(cv.wait_for(lock, kEventWait, [&] { return done; }));
  lock.unlock();
  std::this_thread::sleep_for(kQuiet);
  lock.lock();
  EXPECT_EQ(calls, 1);
}

STORE_TEST(WatchFromCompactedRevisionIsOutOfRange) {
  // Revisions are compared, never assumed to start at 0 or to be dense.
  Object o = MustCreate(kPillarVolumeState, "pvc-1");
  std::vector<int64_t> revs = {o.resource_version};
  for (int i = 0; i < 9; ++i) {
    o.status["i"] = i;
    o = *store_->UpdateStatus(o);
    revs.push_back(o.resource_version);
  }
  ASSERT_TRUE(GetParam().compact(*store_, revs[4]).ok());
  auto old = store_->Watch(kPillarVolumeState, revs[2], [](const Event&) {});
  ASSERT_EQ(old.status().code(), Code::kOutOfRange);
  EXPECT_NE(old.status().message().find("compacted"), std::string::npos);

  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarVolumeState, revs[4]).ok());
  auto got = events.Exactly(5);
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].revision, revs[5 + i]);
  EXPECT_EQ(got.back().object, o);
  // Reads are not affected by compaction.
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), o);
}

STORE_TEST(ConcurrentCompareAndSwapHasOneWinnerPerRound) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 30;
  auto other = Open();
  ASSERT_NE(other, nullptr);
  Object counter = NewObject(kPillarVolumeState, "counter");
  counter.status["count"] = 0;
  ASSERT_TRUE(store_->Create(counter).ok());

  std::atomic<int> wins{0};
  std::atomic<int> unexpected{0};
  std::vector<int> winners_per_round(kRounds, 0);
  std::mutex mu;
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Half the writers go through a second client: CAS must hold across clients.
    Store* store = t % 2 == 0 ? store_.get() : other.get();
    threads.emplace_back([&, store] {
      for (int round = 0; round < kRounds; ++round) {
        auto read = store->Get(kPillarVolumeState, "counter");
        sync.arrive_and_wait();  // everyone holds the same version
        if (!read.ok()) {
          ++unexpected;
          sync.arrive_and_wait();
          continue;
        }
        Object next = *read;
        next.status["count"] = next.status["count"].get<int>() + 1;
        auto wrote = store->UpdateStatus(next);
        if (wrote.ok()) {
          ++wins;
          std::lock_guard lock(mu);
          ++winners_per_round[round];
        } else if (wrote.status().code() != Code::kAborted) {
          ++unexpected;
        }
        sync.arrive_and_wait();  // the round is over before anyone reads again
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(unexpected, 0);
  for (int round = 0; round < kRounds; ++round) EXPECT_EQ(winners_per_round[round], 1) << round;
  EXPECT_EQ(wins, kRounds);
  EXPECT_EQ(store_->Get(kPillarVolumeState, "counter")->status["count"], kRounds);
}

STORE_TEST(ConcurrentIncrementsWithRetryLoseNoUpdate) {
  constexpr int kThreads = 4;
  constexpr int kIncrements = 40;
  auto other = Open();
  ASSERT_NE(other, nullptr);
  Object counter = NewObject(kPillarNode, "counter", {{"count", 0}});
  ASSERT_TRUE(store_->Create(counter).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Store* store = t % 2 == 0 ? store_.get() : other.get();
    threads.emplace_back([&, store] {
      for (int i = 0; i < kIncrements; ++i) {
        while (true) {
          auto read = store->Get(kPillarNode, "counter");
          if (!read.ok()) {
            ++failures;
            return;
          }
          Object next = *read;
          next.spec["count"] = next.spec["count"].get<int>() + 1;
          auto wrote = store->Update(next);
          if (wrote.ok()) break;
          if (wrote.status().code() != Code::kAborted) {
            ++failures;
            return;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  Object final = *store_->Get(kPillarNode, "counter");
  EXPECT_EQ(final.spec["count"], kThreads * kIncrements);
  EXPECT_EQ(final.generation, 1 + kThreads * kIncrements);
}

STORE_TEST(EverythingSurvivesReopen) {
  Object a = MustCreate(kPillarVolumeState, "a", {{"capacity", 1}});
  a.status["exportSpec"] = {{"port", 4420}};
  a = *store_->UpdateStatus(a);
  MustCreate(kPillarNode, "n");
  ASSERT_TRUE(store_->Delete(kPillarNode, "n").ok());
  const int64_t rev = *store_->CurrentRevision();
  store_.reset();

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(*store_->CurrentRevision(), rev);
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "a"), a);
  EXPECT_EQ(store_->Get(kPillarNode, "n").status().code(), Code::kNotFound);
  Object b = MustCreate(kPillarVolumeState, "b");
  EXPECT_GT(b.resource_version, rev);
  // History survives too.
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarNode, 0).ok());
  auto got = events.Exactly(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].type, EventType::kDeleted);
}

STORE_TEST(OpaqueNamesRoundTrip) {
  for (const std::string& name : std::vector<std::string>{
           "pvc-0a1b", "tank:vol 1", "UPPER_and.dots", "ünïcode", "a..b", std::string(253, 'x')}) {
    auto created = store_->Create(NewObject(kPillarVolumeState, name));
    ASSERT_TRUE(created.ok()) << name << ": " << created.status().ToString();
    EXPECT_EQ(store_->Get(kPillarVolumeState, name)->name, name);
  }
  EXPECT_EQ(store_->List(kPillarVolumeState)->items.size(), 6u);
}

STORE_TEST(BadInputIsInvalidArgumentNamingTheField) {
  auto expect_invalid = [](const Status& s, const std::string& field, const std::string& what) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find(field), std::string::npos) << what << ": " << s.ToString();
  };
  const std::vector<std::string> bad_names = {"",
                                              "a/b",
                                              std::string("a\0b", 3),
                                              ".",
                                              "..",
                                              "line\nbreak",
                                              "tab\t",
                                              std::string(254, 'x'),
                                              "bad\xff"};
  for (const auto& name : bad_names) {
    expect_invalid(store_->Create(NewObject(kPillarNode, name)).status(), "name", "create");
    expect_invalid(store_->Get(kPillarNode, name).status(), "name", "get");
    expect_invalid(store_->Delete(kPillarNode, name), "name", "delete");
    Object o = NewObject(kPillarNode, name);
    o.resource_version = 1;
    expect_invalid(store_->Update(o).status(), "name", "update");
    expect_invalid(store_->UpdateStatus(o).status(), "name", "update status");
  }
  for (std::string kind : {"", "pillarNode", "Pillar-Node", "Pillar/Node"}) {
    expect_invalid(store_->Create(NewObject(kind, "n")).status(), "kind", "create");
    expect_invalid(store_->Get(kind, "n").status(), "kind", "get");
    expect_invalid(store_->List(kind).status(), "kind", "list");
    expect_invalid(store_->Delete(kind, "n"), "kind", "delete");
    expect_invalid(store_->Watch(kind, 0, [](const Event&) {}).status(), "kind", "watch");
  }
  Object labelled = NewObject(kPillarNode, "n");
  labelled.labels[""] = "v";
  expect_invalid(store_->Create(labelled).status(), "label", "empty label key");
  expect_invalid(store_->List(kPillarNode, LabelSelector{{"", "v"}}).status(), "label", "selector");
  Object array_spec = NewObject(kPillarNode, "n", nlohmann::json::array());
  expect_invalid(store_->Create(array_spec).status(), "spec", "spec array");
  Object bad_utf8 = NewObject(kPillarNode, "n", {{"k", "\xff\xfe"}});
  expect_invalid(store_->Create(bad_utf8).status(), "spec", "spec not UTF-8");
  Object with_version = NewObject(kPillarNode, "n");
  with_version.resource_version = 4;
  expect_invalid(store_->Create(with_version).status(), "resourceVersion", "create with rv");
  Object deleting = NewObject(kPillarNode, "n");
  deleting.deletion_timestamp = "2024-01-01T00:00:00Z";
  expect_invalid(store_->Create(deleting).status(), "deletionTimestamp", "create deleting");
  expect_invalid(store_->Watch(kPillarNode, -1, [](const Event&) {}).status(), "revision",
                 "negative watch revision");

  Object o = MustCreate(kPillarNode, "n");
  Object unversioned = o;
  unversioned.resource_version = 0;
  expect_invalid(store_->Update(unversioned).status(), "resourceVersion", "update without rv");
  expect_invalid(store_->UpdateStatus(unversioned).status(), "resourceVersion",
                 "update status without rv");
  // Nothing of the above was written.
  EXPECT_EQ(*store_->CurrentRevision(), o.resource_version);
  EXPECT_EQ(store_->List(kPillarNode)->items.size(), 1u);
}

// The writer the crash test kills: cycles over a few objects, each write
// putting the same counter into spec, labels and a large padding field, so a
// half-applied write would show as a mismatch.
[[noreturn]] void CrashWriter(const StoreBackend& backend, const std::string& dir) {
  auto store = backend.open(dir);
  if (store == nullptr) _exit(2);
  for (int64_t i = 0;; ++i) {
    std::string name = "obj-" + std::to_string(i % 5);
    auto got = store->Get(kPillarVolumeState, name);
    if (got.status().code() == Code::kNotFound) {
      Object o = NewObject(kPillarVolumeState, name, {{"n", 0}, {"pad", std::string(6000, 'a')}});
      o.labels["n"] = "0";
      if (!store->Create(o).ok()) _exit(3);
      continue;
    }
    if (!got.ok()) _exit(4);
    Object o = *got;
    int64_t n = o.spec["n"].get<int64_t>() + 1;
    if (n % 7 == 0) {
      if (!store->Delete(kPillarVolumeState, name, {.uid = o.uid}).ok()) _exit(5);
      continue;
    }
    o.spec["n"] = n;
    o.spec["pad"] = std::string(6000, static_cast<char>('a' + n % 26));
    o.labels["n"] = std::to_string(n);
    if (!store->Update(o).ok()) _exit(6);
  }
}

STORE_TEST(SigkilledWriterLeavesAConsistentStore) {
  store_.reset();  // no connection of ours is carried across fork
  int64_t last_revision = 0;
  for (int round = 0; round < 5; ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) CrashWriter(GetParam(), dir_.path());

    // Let it write a while (a different moment each round), then kill it.
    auto watcher = Open();
    ASSERT_NE(watcher, nullptr);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    const int64_t target = last_revision + 40 + int64_t{17} * round;
    while (*watcher->CurrentRevision() < target && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    watcher.reset();
    std::this_thread::sleep_for(milliseconds(3 * round));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "writer exited on its own with " << WEXITSTATUS(wstatus);

    if (GetParam().check_integrity) {
      Status integrity = GetParam().check_integrity(dir_.path());
      EXPECT_TRUE(integrity.ok()) << integrity.ToString();
    }
    auto store = Open();
    ASSERT_NE(store, nullptr) << "round " << round;
    auto list = store->List(kPillarVolumeState);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    EXPECT_GE(list->revision, target) << "round " << round;
    EXPECT_GE(list->revision, last_revision);
    std::set<int64_t> revisions;
    for (const Object& o : list->items) {
      SCOPED_TRACE(o.name + " round " + std::to_string(round));
      int64_t n = o.spec["n"].get<int64_t>();
      EXPECT_EQ(o.labels.at("n"), std::to_string(n));
      EXPECT_EQ(o.spec["pad"], std::string(6000, static_cast<char>('a' + n % 26)));
      EXPECT_EQ(o.generation, 1 + n);
      EXPECT_LE(o.resource_version, list->revision);
      EXPECT_TRUE(revisions.insert(o.resource_version).second);
      // The write that produced this state has its event, with this state.
      EventCollector events;
      ASSERT_TRUE(events.Start(*store, kPillarVolumeState, o.resource_version - 1).ok());
      auto got = events.WaitFor(1);
      ASSERT_FALSE(got.empty());
      EXPECT_EQ(got[0].revision, o.resource_version);
      EXPECT_EQ(got[0].object, o);
    }
    last_revision = list->revision;
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  Object after = *store->Create(NewObject(kPillarVolumeState, "after-crash"));
  EXPECT_GT(after.resource_version, last_revision);
}

}  // namespace
}  // namespace pillar::store::testing
