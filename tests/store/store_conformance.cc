#include "store/store_conformance.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <map>
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
  Status Start(Store& store, const std::string& kind, const std::string& from) {
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

  // Waits until no event has come for a while (the writers have stopped), and
  // returns everything.
  std::vector<Event> Settle() {
    size_t seen = SIZE_MAX;
    while (true) {
      std::this_thread::sleep_for(kQuiet * 2);
      std::lock_guard lock(mu_);
      if (events_.size() == seen || !error_.ok()) return events_;
      seen = events_.size();
    }
  }

  // Waits for the watch to end with an error (OK when none came in time).
  Status WaitForError(milliseconds timeout = kEventWait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !error_.ok(); });
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

// Where a watch of `kind` starts to see only what comes next.
std::string Now(Store& store, const std::string& kind) {
  auto list = store.List(kind);
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(!list.ok() || !list->resource_version.empty());
  return list.ok() ? list->resource_version : std::string();
}

// A watch from a version the history no longer holds: OUT_OF_RANGE, from
// Watch itself or through its error handler.
Status WatchFromLostHistory(Store& store, const std::string& kind, const std::string& from) {
  EventCollector events;
  Status started = events.Start(store, kind, from);
  if (!started.ok()) return started;
  return events.WaitForError();
}

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
  EXPECT_FALSE(created->resource_version.empty());
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
}

STORE_TEST(GetMissingIsNotFound) {
  auto got = store_->Get(kPillarNode, "nope");
  EXPECT_EQ(got.status().code(), Code::kNotFound);
  EXPECT_NE(got.status().message().find("PillarNode/nope"), std::string::npos);
}

STORE_TEST(CreateExistingIsAlreadyExistsAndChangesNothing) {
  Object first = MustCreate(kPillarAgent, "agent-1", {{"address", "10.0.0.1"}});
  EventCollector writes;
  ASSERT_TRUE(writes.Start(*store_, kPillarAgent, first.resource_version).ok());
  auto again = store_->Create(NewObject(kPillarAgent, "agent-1", {{"address", "10.0.0.2"}}));
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  EXPECT_NE(again.status().message().find("PillarAgent/agent-1"), std::string::npos);
  EXPECT_EQ(*store_->Get(kPillarAgent, "agent-1"), first);
  EXPECT_TRUE(writes.Exactly(0).empty());
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
  EXPECT_FALSE(all->resource_version.empty());

  auto z1 = store_->List(kPillarNode, LabelSelector{{"zone", "z1"}, {"role", "consumer"}});
  ASSERT_TRUE(z1.ok());
  ASSERT_EQ(z1->items.size(), 2u);
  EXPECT_EQ(z1->items[0].name, "a");
  EXPECT_EQ(z1->items[1].name, "c");
  EXPECT_TRUE(store_->List(kPillarNode, LabelSelector{{"zone", "z3"}})->items.empty());
  EXPECT_TRUE(store_->List(kPillarVolumeState)->items.empty());
  EXPECT_EQ(store_->List(kPillarNode, LabelSelector{})->items.size(), 3u);
}

STORE_TEST(EveryWriteGetsANewResourceVersion) {
  EventCollector agents;
  ASSERT_TRUE(agents.Start(*store_, kPillarAgent, Now(*store_, kPillarAgent)).ok());
  std::vector<std::string> versions;
  Object a = MustCreate(kPillarNode, "a");
  versions.push_back(a.resource_version);
  Object b = MustCreate(kPillarAgent, "b");
  versions.push_back(b.resource_version);
  a.spec["x"] = 1;
  a = *store_->Update(a);
  versions.push_back(a.resource_version);
  a.status["y"] = 2;
  a = *store_->UpdateStatus(a);
  versions.push_back(a.resource_version);
  ASSERT_TRUE(store_->Delete(kPillarAgent, "b").ok());
  auto got = agents.WaitFor(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].object.resource_version, b.resource_version);
  EXPECT_EQ(got[1].type, EventType::kDeleted);
  versions.push_back(got[1].object.resource_version);
  EXPECT_EQ(std::set<std::string>(versions.begin(), versions.end()).size(), versions.size());
  for (const auto& v : versions) EXPECT_FALSE(v.empty());
}

// A lost compare-and-swap: ABORTED "conflict" naming the object and both versions.
void ExpectConflict(const Status& s, const std::string& stale, const std::string& current) {
  ASSERT_EQ(s.code(), Code::kAborted);
  const std::string& msg = s.message();
  EXPECT_NE(msg.find("conflict"), std::string::npos) << msg;
  EXPECT_NE(msg.find("PillarVolumeState/pvc-1"), std::string::npos) << msg;
  EXPECT_NE(msg.find(stale), std::string::npos) << msg;
  EXPECT_NE(msg.find(current), std::string::npos) << msg;
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

// The status write made from the object a caller last read: a
// compare-and-swap on that read's version, written in one round trip where
// the backend has them.
STORE_TEST(UpdateStatusFromIsACompareAndSwapOnTheBaseItWasMadeFrom) {
  Object in = NewObject(kPillarVolumeState, "pvc-1", {{"capacity", 1}});
  in.status = {{"deleting", false}, {"publicationGeneration", 1}};
  Object v1 = *store_->Create(in);
  Object next = v1;
  next.status.erase("deleting");
  next.status["publicationGeneration"] = 2;
  next.status["conditions"] = nlohmann::json::array({{{"type", "ExportReconciled"}}});
  next.spec["capacity"] = 99;  // never written by a status update
  int64_t before = GetParam().requests ? GetParam().requests(*store_) : 0;
  auto v2 = store_->UpdateStatusFrom(v1, next);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  if (GetParam().requests) {
    EXPECT_EQ(GetParam().requests(*store_) - before, 1) << "no read before the write";
  }
  EXPECT_EQ(v2->status, next.status);
  EXPECT_EQ(v2->spec, v1.spec);
  EXPECT_NE(v2->resource_version, v1.resource_version);
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), *v2);

  // A base that is no longer current: nothing is written.
  Object stale = v1;
  stale.status["publicationGeneration"] = 7;
  auto conflict = store_->UpdateStatusFrom(v1, stale);
  ASSERT_NO_FATAL_FAILURE(
      ExpectConflict(conflict.status(), v1.resource_version, v2->resource_version));
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "pvc-1"), *v2);

  // Nothing changed from the base: nothing written, the object returned.
  auto same = store_->UpdateStatusFrom(*v2, *v2);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->resource_version, v2->resource_version);
}

STORE_TEST(UpdateWritesSpecAndLabelsButNeverStatusOrDeletion) {
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
  EXPECT_FALSE(v2->deletion_timestamp);  // the store's alone
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
  EXPECT_NE(v2->resource_version, v1.resource_version);
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
  const Object created = MustCreate(kPillarVolumeState, "pvc-1", {{"capacity", 1}});
  Object o = created;
  o.labels["l"] = "v";
  o = *store_->Update(o);
  o.status["x"] = 1;
  o = *store_->UpdateStatus(o);
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarVolumeState, o.resource_version).ok());
  auto same = store_->Update(o);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, o);
  auto same_status = store_->UpdateStatus(o);
  ASSERT_TRUE(same_status.ok()) << same_status.status().ToString();
  EXPECT_EQ(*same_status, o);
  EXPECT_TRUE(events.Exactly(0).empty());
  // Still a compare-and-swap: a stale no-op is a conflict, not a success.
  Object stale = o;
  stale.resource_version = created.resource_version;
  EXPECT_EQ(store_->Update(stale).status().code(), Code::kAborted);
  EXPECT_EQ(store_->UpdateStatus(stale).status().code(), Code::kAborted);
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

STORE_TEST(DeleteHonoursPreconditions) {
  const Object first = MustCreate(kPillarAgent, "a");
  Object o = first;
  o.spec["x"] = 1;
  o = *store_->Update(o);
  EventCollector writes;
  ASSERT_TRUE(writes.Start(*store_, kPillarAgent, o.resource_version).ok());
  EXPECT_EQ(
      store_->Delete(kPillarAgent, "a", {.uid = "00000000-0000-4000-8000-000000000000"}).code(),
      Code::kAborted);
  EXPECT_EQ(store_->Delete(kPillarAgent, "a", {.resource_version = first.resource_version}).code(),
            Code::kAborted);
  EXPECT_EQ(*store_->Get(kPillarAgent, "a"), o);
  EXPECT_TRUE(writes.Exactly(0).empty());
  EXPECT_TRUE(
      store_->Delete(kPillarAgent, "a", {.uid = o.uid, .resource_version = o.resource_version})
          .ok());
  EXPECT_EQ(store_->Get(kPillarAgent, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->Delete(kPillarAgent, "a").code(), Code::kNotFound);
  EXPECT_TRUE(store_->List(kPillarAgent)->items.empty());
}

STORE_TEST(WatchDeliversExactlyTheEventsAfterAVersionInOrder) {
  const std::string start = Now(*store_, kPillarVolumeState);
  Object a = MustCreate(kPillarVolumeState, "a");
  const std::string after_a = a.resource_version;
  Object b = MustCreate(kPillarVolumeState, "b");
  const std::string b_created = b.resource_version;
  a.spec["x"] = 1;
  a = *store_->Update(a);
  b.status["y"] = 2;
  b = *store_->UpdateStatus(b);
  ASSERT_TRUE(store_->Delete(kPillarVolumeState, "a").ok());

  EventCollector all;
  ASSERT_TRUE(all.Start(*store_, kPillarVolumeState, start).ok());
  auto events = all.Exactly(5);
  ASSERT_EQ(events.size(), 5u);
  std::vector<std::pair<EventType, std::string>> want = {{EventType::kAdded, "a"},
                                                         {EventType::kAdded, "b"},
                                                         {EventType::kModified, "a"},
                                                         {EventType::kModified, "b"},
                                                         {EventType::kDeleted, "a"}};
  const std::vector<std::string> versions = {after_a, b_created, a.resource_version,
                                             b.resource_version};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(events[i].type, want[i].first) << i;
    EXPECT_EQ(events[i].object.name, want[i].second) << i;
    if (i < versions.size()) {
      EXPECT_EQ(events[i].object.resource_version, versions[i]) << i;
    }
  }
  EXPECT_EQ(events[3].object, b);
  EXPECT_FALSE(events[4].object.resource_version.empty());
  EXPECT_EQ(std::count(versions.begin(), versions.end(), events[4].object.resource_version), 0);

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
  ASSERT_TRUE(events.Start(*store_, kPillarNode, list.resource_version).ok());
  Object fresh = MustCreate(kPillarNode, "new");
  auto got = events.Exactly(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].object, fresh);
  EXPECT_NE(got[0].object.resource_version, list.resource_version);
}

STORE_TEST(WatchDeliversOnlyItsKind) {
  EventCollector nodes;
  ASSERT_TRUE(nodes.Start(*store_, kPillarNode, Now(*store_, kPillarNode)).ok());
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
  EXPECT_NE(got[0].object.resource_version, o.resource_version);
  EXPECT_FALSE(got[0].object.resource_version.empty());
}

STORE_TEST(WatchSeesWritesOfAnotherClient) {
  auto other = Open();
  ASSERT_NE(other, nullptr);
  const std::string start = Now(*store_, kPillarNode);
  EventCollector here;
  ASSERT_TRUE(here.Start(*store_, kPillarNode, start).ok());
  EventCollector there;
  ASSERT_TRUE(there.Start(*other, kPillarNode, start).ok());

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
    EXPECT_EQ(got[1].object, mine);
  }
  // A conflict is a conflict whichever client wrote first.
  EXPECT_EQ(other->Update(theirs).status().code(), Code::kAborted);
  EXPECT_EQ(*other->Get(kPillarNode, "n2"), mine);
}

STORE_TEST(WatchStopsWhenTheHandleIsDestroyed) {
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarAgent, Now(*store_, kPillarAgent)).ok());
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
  const std::string start = Now(*store_, kPillarAgent);
  std::unique_lock lock(mu);
  auto started = store_->Watch(kPillarAgent, start, [&](const Event&) {
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

STORE_TEST(WatchFromCompactedVersionIsOutOfRange) {
  Object o = MustCreate(kPillarVolumeState, "pvc-1");
  std::vector<std::string> versions = {o.resource_version};
  for (int i = 0; i < 9; ++i) {
    o.status["i"] = i;
    o = *store_->UpdateStatus(o);
    versions.push_back(o.resource_version);
  }
  Status compacted = GetParam().compact(*store_, versions[4]);
  ASSERT_TRUE(compacted.ok()) << compacted.ToString();
  Status old = WatchFromLostHistory(*store_, kPillarVolumeState, versions[2]);
  ASSERT_EQ(old.code(), Code::kOutOfRange) << old.ToString();
  EXPECT_NE(old.message().find("compacted"), std::string::npos) << old.ToString();

  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarVolumeState, versions[4]).ok());
  auto got = events.Exactly(5);
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].object.resource_version, versions[5 + i]);
  }
  EXPECT_TRUE(events.error().ok()) << events.error().ToString();
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
  const std::string start = Now(*store_, kPillarNode);
  Object a = MustCreate(kPillarVolumeState, "a", {{"capacity", 1}});
  a.status["exportSpec"] = {{"port", 4420}};
  a = *store_->UpdateStatus(a);
  MustCreate(kPillarNode, "n");
  ASSERT_TRUE(store_->Delete(kPillarNode, "n").ok());
  store_.reset();

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(*store_->Get(kPillarVolumeState, "a"), a);
  EXPECT_EQ(store_->Get(kPillarNode, "n").status().code(), Code::kNotFound);
  Object b = MustCreate(kPillarVolumeState, "b");
  EXPECT_NE(b.resource_version, a.resource_version);
  // History survives too.
  EventCollector events;
  ASSERT_TRUE(events.Start(*store_, kPillarNode, start).ok());
  auto got = events.Exactly(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].type, EventType::kDeleted);
}

STORE_TEST(NamesRoundTrip) {
  std::vector<std::string> names = {"pvc-0a1b", "a.b-c", "0", std::string(253, 'x')};
  if (GetParam().dns_names) {
    // Kubernetes object names: what another grammar allows is refused, by name.
    for (const char* name : {"tank:vol 1", "UPPER", "a..b", "-a", "a-", "ünïcode"}) {
      Status s = store_->Create(NewObject(kPillarVolumeState, name)).status();
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << name << ": " << s.ToString();
      EXPECT_NE(s.message().find("name"), std::string::npos) << s.ToString();
    }
  } else {
    names.insert(names.end(), {"tank:vol 1", "UPPER_and.dots", "ünïcode", "a..b"});
  }
  for (const std::string& name : names) {
    auto created = store_->Create(NewObject(kPillarVolumeState, name));
    ASSERT_TRUE(created.ok()) << name << ": " << created.status().ToString();
    EXPECT_EQ(store_->Get(kPillarVolumeState, name)->name, name);
  }
  EXPECT_EQ(store_->List(kPillarVolumeState)->items.size(), names.size());
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
    o.resource_version = "1";
    expect_invalid(store_->Update(o).status(), "name", "update");
    expect_invalid(store_->UpdateStatus(o).status(), "name", "update status");
  }
  for (std::string kind : {"", "pillarNode", "Pillar-Node", "Pillar/Node"}) {
    expect_invalid(store_->Create(NewObject(kind, "n")).status(), "kind", "create");
    expect_invalid(store_->Get(kind, "n").status(), "kind", "get");
    expect_invalid(store_->List(kind).status(), "kind", "list");
    expect_invalid(store_->Delete(kind, "n"), "kind", "delete");
    expect_invalid(store_->Watch(kind, "1", [](const Event&) {}).status(), "kind", "watch");
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
  with_version.resource_version = "4";
  expect_invalid(store_->Create(with_version).status(), "resourceVersion", "create with rv");
  Object deleting = NewObject(kPillarNode, "n");
  deleting.deletion_timestamp = "2024-01-01T00:00:00Z";
  expect_invalid(store_->Create(deleting).status(), "deletionTimestamp", "create deleting");
  expect_invalid(store_->Watch(kPillarNode, "", [](const Event&) {}).status(), "resourceVersion",
                 "watch without a version");

  Object o = MustCreate(kPillarNode, "n");
  EventCollector writes;
  ASSERT_TRUE(writes.Start(*store_, kPillarNode, o.resource_version).ok());
  Object unversioned = o;
  unversioned.resource_version.clear();
  expect_invalid(store_->Update(unversioned).status(), "resourceVersion", "update without rv");
  expect_invalid(store_->UpdateStatus(unversioned).status(), "resourceVersion",
                 "update status without rv");
  // Nothing of the above was written.
  EXPECT_TRUE(writes.Exactly(0).empty());
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
  const std::string start = Now(*store_, kPillarVolumeState);
  store_.reset();  // no connection of ours is carried across fork
  std::set<std::string> versions_seen;
  for (int round = 0; round < 5; ++round) {
    std::string round_start;
    {
      auto probe = Open();
      ASSERT_NE(probe, nullptr);
      round_start = Now(*probe, kPillarVolumeState);
    }
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) CrashWriter(GetParam(), dir_.path());
    auto watcher = Open();
    ASSERT_NE(watcher, nullptr);
    EventCollector progress;
    ASSERT_TRUE(progress.Start(*watcher, kPillarVolumeState, round_start).ok());

    // Let it write a while (a different moment each round), then kill it.
    progress.WaitFor(40 + size_t{17} * round, std::chrono::seconds(30));
    std::this_thread::sleep_for(milliseconds(3 * round));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "writer exited on its own with " << WEXITSTATUS(wstatus);
    EXPECT_GE(progress.Settle().size(), 40u) << "round " << round;
    progress.Stop();
    watcher.reset();

    if (GetParam().check_integrity) {
      Status integrity = GetParam().check_integrity(dir_.path());
      EXPECT_TRUE(integrity.ok()) << integrity.ToString();
    }
    auto store = Open();
    ASSERT_NE(store, nullptr) << "round " << round;
    auto list = store->List(kPillarVolumeState);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    // Every write since the start has its event, and the last event of each
    // object is the state it is in (or its delete).
    EventCollector history;
    ASSERT_TRUE(history.Start(*store, kPillarVolumeState, start).ok());
    std::map<std::string, Event> last;
    for (const Event& e : history.Settle()) {
      last[e.object.name] = e;
      versions_seen.insert(e.object.resource_version);
    }
    ASSERT_TRUE(history.error().ok()) << history.error().ToString();
    std::set<std::string> versions;
    std::set<std::string> listed;
    for (const Object& o : list->items) {
      SCOPED_TRACE(o.name + " round " + std::to_string(round));
      listed.insert(o.name);
      int64_t n = o.spec["n"].get<int64_t>();
      EXPECT_EQ(o.labels.at("n"), std::to_string(n));
      EXPECT_EQ(o.spec["pad"], std::string(6000, static_cast<char>('a' + n % 26)));
      EXPECT_EQ(o.generation, 1 + n);
      EXPECT_TRUE(versions.insert(o.resource_version).second);
      ASSERT_EQ(last.count(o.name), 1u);
      EXPECT_NE(last[o.name].type, EventType::kDeleted);
      EXPECT_EQ(last[o.name].object, o);
    }
    for (const auto& [name, e] : last) {
      if (listed.count(name) == 0) {
        EXPECT_EQ(e.type, EventType::kDeleted) << name;
      }
    }
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  Object after = *store->Create(NewObject(kPillarVolumeState, "after-crash"));
  EXPECT_EQ(versions_seen.count(after.resource_version), 0u);
}

}  // namespace
}  // namespace pillar::store::testing
