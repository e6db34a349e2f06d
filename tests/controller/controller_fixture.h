// A real SQLite store on a temporary directory, a scripted agent ("storage-1")
// and helpers that record intent the way the CSI path does, for the
// reconciler's and the CSI controller's unit tests.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/convert.h"
#include "common/clock.h"
#include "common/target_name.h"
#include "common/temp_dir.h"
#include "controller/desired.h"
#include "controller/fake_agent.h"
#include "store/sqlite/sqlite_store.h"

namespace pillar::controller::testing {

constexpr const char* kAgentRef = "storage-1";
constexpr const char* kAgentAddress = "10.0.0.5";
constexpr const char* kBootEpoch = "epoch-1";

inline std::string NqnOf(const std::string& node) { return "nqn.2014-08.org.example:" + node; }
inline std::string IqnOf(const std::string& node) { return "iqn.1993-08.org.debian:01:" + node; }

// Polls `done` until it holds or `ceiling` passes; true when it held.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds ceiling = std::chrono::seconds(20)) {
  auto until = std::chrono::steady_clock::now() + ceiling;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class ControllerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    store::SqliteStoreOptions options;
    options.path = dir_.Sub("store.db");
    options.poll_interval = std::chrono::milliseconds(20);
    auto opened = store::SqliteStore::Open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    agent_ = agents_.Add(kAgentRef);
    agent_->SetBootEpoch(kBootEpoch);
    RegisterAgent(kAgentRef, kAgentAddress, kBootEpoch);
  }

  store::Store& store() { return *store_; }

  // What a Kubernetes delete waiting on a finalizer leaves: a
  // deletionTimestamp, which only the store sets (written here straight
  // into the SQLite file, as no Store call may).
  void MarkDeletedByStore(const std::string& kind, const std::string& name) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.Sub("store.db").c_str(), &db), SQLITE_OK);
    const std::string sql =
        "UPDATE objects SET deletion_ts = '2025-01-01T00:00:00Z' WHERE kind = '" + kind +
        "' AND name = '" + name + "'";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_changes(db), 1);
    sqlite3_close(db);
  }

  void RegisterAgent(const std::string& name, const std::string& address,
                     const std::string& epoch) {
    api::AgentRecord rec;
    rec.address = address;
    rec.port = 9500;
    rec.boot_epoch = epoch;
    store::Object o;
    o.kind = api::kKindAgent;
    o.name = name;
    o.spec = api::AgentSpecToJson(rec);
    o.status = api::AgentStatusToJson(rec);
    auto c = store_->Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
  }

  // A node plugin's report: NQN and IQN derived from the name, and `ips`.
  void RegisterNode(const std::string& node, std::vector<std::string> ips = {"10.0.1.1"}) {
    api::NodeRecord n;
    n.node_id = node;
    n.host_nqn = NqnOf(node);
    n.initiator_iqn = IqnOf(node);
    n.ip_addresses = std::move(ips);
    store::Object o;
    o.kind = api::kKindNode;
    o.name = node;
    o.spec = api::NodeSpecToJson(n);
    auto c = store_->Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
  }

  static api::VolumeSpec Spec(const std::string& name, Protocol protocol = Protocol::kNvmeofTcp,
                              const std::string& access_type = "block") {
    api::VolumeSpec s;
    s.volume_id = name;
    s.agent_ref = kAgentRef;
    s.agent_volume_id = "tank/" + name;
    s.protocol = protocol;
    s.capacity_bytes = 1LL << 30;
    s.access_type = access_type;
    if (access_type == "mount" && protocol != Protocol::kNfs) s.fs_type = "ext4";
    return s;
  }

  // Recorded intent as CreateVolume records it, published to `nodes` (none revoking).
  static api::VolumeStatus Intent(bool acl = true, std::vector<std::string> nodes = {},
                                  int64_t generation = 0) {
    api::VolumeStatus s;
    s.export_spec = api::ExportSpec{kAgentAddress, 0, acl, std::nullopt};
    for (auto& n : nodes) s.published_nodes.push_back({std::move(n), false});
    s.publication_generation = generation;
    s.capacity_bytes = 1LL << 30;
    return s;
  }

  void CreateVolume(const api::VolumeSpec& spec, const api::VolumeStatus& status) {
    store::Object o;
    o.kind = api::kKindVolume;
    o.name = spec.volume_id;
    o.spec = api::ToJson(spec);
    o.status = api::ToJson(status);
    auto c = store_->Create(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    agent_->AddVolume(spec.agent_volume_id, spec.capacity_bytes);
  }

  store::Object Get(const std::string& kind, const std::string& name) {
    auto o = store_->Get(kind, name);
    EXPECT_TRUE(o.ok()) << kind << "/" << name << ": " << o.status().ToString();
    return o.ok() ? *o : store::Object();
  }

  api::VolumeState Volume(const std::string& name) {
    auto v = api::LoadVolume(Get(api::kKindVolume, name));
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : api::VolumeState();
  }

  // The recorded ExportReconciled condition as "Status/Reason", "" when none.
  std::string Condition(const std::string& name) {
    const api::Condition* c = ConditionOf(name);
    return c == nullptr ? "" : c->status + "/" + c->reason;
  }
  std::string ConditionMessage(const std::string& name) {
    const api::Condition* c = ConditionOf(name);
    return c == nullptr ? "" : c->message;
  }

  // Edits the raw status JSON of a record with CAS retries, as another writer would.
  void EditStatus(const std::string& kind, const std::string& name,
                  const std::function<void(nlohmann::json&)>& edit) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto o = store_->Get(kind, name);
      ASSERT_TRUE(o.ok()) << o.status().ToString();
      edit(o->status);
      auto w = store_->UpdateStatus(*o);
      if (w.ok()) return;
      ASSERT_EQ(w.status().code(), Code::kAborted) << w.status().ToString();
    }
    FAIL() << "status of " << name << " kept changing";
  }

  // What the agent would hold when the volume's export is exactly its intent,
  // fenced at (`fence_uid`, `fence_generation`).
  agent_api::Export ExportFor(const std::string& name, const std::string& fence_uid,
                              int64_t fence_generation) {
    api::VolumeState v = Volume(name);
    auto want = ComputeDesired(v, [this](const std::string& id) -> const api::NodeRecord* {
      auto o = store_->Get(api::kKindNode, id);
      if (!o.ok()) return nullptr;
      auto rec = api::LoadNode(*o);
      if (!rec.ok()) return nullptr;
      nodes_.push_back(std::make_unique<api::NodeRecord>(*rec));
      return nodes_.back().get();
    });
    EXPECT_TRUE(want.ok()) << want.status().ToString();
    agent_api::Export e;
    e.agent_volume_id = v.spec.agent_volume_id;
    e.protocol = v.spec.protocol;
    e.target_id = TargetName(kDefaultNqnPrefix, v.spec.agent_volume_id);
    e.spec.bind_address = want->spec.bind_address;
    e.spec.port = static_cast<int32_t>(want->spec.port);
    e.spec.acl_enabled = want->spec.acl_enabled;
    e.allowed_hosts = want->hosts;
    e.enabled = true;
    e.fence = agent_api::Fence{fence_uid, fence_generation};
    return e;
  }

  std::vector<std::string> AllowedHosts(const std::string& name) {
    api::VolumeState v = Volume(name);
    auto e = agent_->ExportOf(v.spec.agent_volume_id, v.spec.protocol);
    if (!e) return {};
    return e->allowed_hosts;
  }

  pillar::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  FakeAgentDirectory agents_;
  std::shared_ptr<FakeAgent> agent_;
  SystemClock clock_;

 private:
  // From the raw status, so a record that does not load still shows its condition.
  const api::Condition* ConditionOf(const std::string& name) {
    auto o = Get(api::kKindVolume, name);
    auto conds = api::ConditionsFromJson(o.status.value("conditions", nlohmann::json()));
    EXPECT_TRUE(conds.ok()) << conds.status().ToString();
    last_ = conds.ok() ? *conds : std::vector<api::Condition>();
    return api::FindCondition(last_, api::kCondExportReconciled);
  }
  std::vector<api::Condition> last_;
  std::vector<std::unique_ptr<api::NodeRecord>> nodes_;
};

}  // namespace pillar::controller::testing
