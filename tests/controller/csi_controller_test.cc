// The CSI controller's RPCs, called directly (no context is used), over the
// real SQLite store, the real reconciler and a scripted agent.
#include "controller/csi_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <set>

#include "common/credentials.h"
#include "controller/csi_fixture.h"
#include "controller/leader.h"

namespace pillar::controller::testing {
namespace {

using csi::v1::VolumeCapability;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

VolumeCapability Capability(
    bool block = true,
    VolumeCapability::AccessMode::Mode mode = VolumeCapability::AccessMode::SINGLE_NODE_WRITER) {
  VolumeCapability cap;
  if (block) {
    cap.mutable_block();
  } else {
    cap.mutable_mount();
  }
  cap.mutable_access_mode()->set_mode(mode);
  return cap;
}

class CsiControllerTest : public CsiFixture {
 protected:
  grpc::Status Publish(const std::string& volume, const std::string& node,
                       VolumeCapability cap = Capability(), bool readonly = false,
                       csi::v1::ControllerPublishVolumeResponse* out = nullptr) {
    csi::v1::ControllerPublishVolumeRequest req;
    req.set_volume_id(volume);
    req.set_node_id(node);
    *req.mutable_volume_capability() = std::move(cap);
    req.set_readonly(readonly);
    csi::v1::ControllerPublishVolumeResponse resp;
    return csi_->ControllerPublishVolume(nullptr, &req, out != nullptr ? out : &resp);
  }

  grpc::Status Unpublish(const std::string& volume, const std::string& node) {
    csi::v1::ControllerUnpublishVolumeRequest req;
    req.set_volume_id(volume);
    req.set_node_id(node);
    csi::v1::ControllerUnpublishVolumeResponse resp;
    return csi_->ControllerUnpublishVolume(nullptr, &req, &resp);
  }

  grpc::Status Expand(const std::string& volume, int64_t required, int64_t limit = 0,
                      csi::v1::ControllerExpandVolumeResponse* resp = nullptr) {
    csi::v1::ControllerExpandVolumeRequest req;
    req.set_volume_id(volume);
    req.mutable_capacity_range()->set_required_bytes(required);
    req.mutable_capacity_range()->set_limit_bytes(limit);
    csi::v1::ControllerExpandVolumeResponse ignored;
    return csi_->ControllerExpandVolume(nullptr, &req, resp != nullptr ? resp : &ignored);
  }

  csi::v1::ValidateVolumeCapabilitiesResponse Validate(const std::string& volume,
                                                       const VolumeCapability& cap,
                                                       grpc::Status* status = nullptr) {
    csi::v1::ValidateVolumeCapabilitiesRequest req;
    req.set_volume_id(volume);
    *req.add_volume_capabilities() = cap;
    (*req.mutable_parameters())["pool"] = "tank";
    csi::v1::ValidateVolumeCapabilitiesResponse resp;
    grpc::Status s = csi_->ValidateVolumeCapabilities(nullptr, &req, &resp);
    if (status != nullptr) *status = s;
    EXPECT_TRUE(status != nullptr || s.ok()) << s.error_message();
    return resp;
  }

  // Every record of every kind: "nothing changed" is this staying equal.
  std::vector<store::Object> Snapshot() {
    std::vector<store::Object> all;
    for (const char* kind : {api::kKindVolume, api::kKindNode, api::kKindAgent}) {
      auto list = store().List(kind);
      EXPECT_TRUE(list.ok());
      if (list.ok()) all.insert(all.end(), list->items.begin(), list->items.end());
    }
    return all;
  }

  // A volume published to `nodes` whose export the agent already has.
  void PublishedVolume(const std::string& name, const std::vector<std::string>& nodes) {
    for (const auto& n : nodes) RegisterNode(n);
    CreateVolume(Spec(name), Intent(true, nodes, 1));
    auto r = reconciler_->ReconcileNow(name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(Condition(name), "True/Reconciled");
  }
};

// --- Unpublish: the publication goes only after the target confirmed -------

TEST_F(CsiControllerTest, UnpublishKeepsThePublicationWhenTheRevocationCannotBeApplied) {
  PublishedVolume("pvc-1", {"node-a"});
  agent_->FailWith(AgentCall::kApplyExport, Unavailable("agent down"));

  grpc::Status s = Unpublish("pvc-1", "node-a");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("not yet confirmed"));
  auto v = Volume("pvc-1");
  ASSERT_EQ(v.status.published_nodes.size(), 1u) << "an unconfirmed revoke is never forgotten";
  EXPECT_EQ(v.status.published_nodes[0].node_id, "node-a");
  EXPECT_TRUE(v.status.published_nodes[0].revoking);
  EXPECT_EQ(v.status.publication_generation, 2);
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a"))) << "the target still admits it";

  // The CO retries once the agent is back: now it completes.
  agent_->ClearFailure(AgentCall::kApplyExport);
  s = Unpublish("pvc-1", "node-a");
  EXPECT_TRUE(s.ok()) << s.error_message();
  v = Volume("pvc-1");
  EXPECT_THAT(v.status.published_nodes, IsEmpty());
  EXPECT_EQ(v.status.publication_generation, 3);
  EXPECT_THAT(AllowedHosts("pvc-1"), IsEmpty());
  EXPECT_EQ(agent_->MarkOf("tank/pvc-1")->publication_generation, 3)
      << "the final pass advances the fence";
}

TEST_F(CsiControllerTest, UnpublishKeepsThePublicationWhenTheTargetStillListsTheNode) {
  PublishedVolume("pvc-1", {"node-a", "node-b"});
  // The agent answers OK, but the kernel kept node-a's entry.
  agent_->RewriteApply([](agent_api::Export& e) { e.allowed_hosts.push_back(NqnOf("node-a")); });

  grpc::Status s = Unpublish("pvc-1", "node-a");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  auto v = Volume("pvc-1");
  ASSERT_EQ(v.status.published_nodes.size(), 2u);
  EXPECT_EQ(v.status.published_nodes[0].node_id, "node-a");
  EXPECT_TRUE(v.status.published_nodes[0].revoking);
  EXPECT_FALSE(v.status.published_nodes[1].revoking);
  EXPECT_EQ(Condition("pvc-1"), "False/ReconcileFailed");
}

TEST_F(CsiControllerTest, UnpublishRemovesOnlyThatNodesEntryThenDropsIt) {
  PublishedVolume("pvc-1", {"node-a", "node-b"});
  grpc::Status s = Unpublish("pvc-1", "node-a");
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto v = Volume("pvc-1");
  ASSERT_EQ(v.status.published_nodes.size(), 1u);
  EXPECT_EQ(v.status.published_nodes[0].node_id, "node-b");
  EXPECT_EQ(v.status.publication_generation, 3) << "revoking +1, dropped +1";
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-b")));
  // The revoke itself was applied at the revoking generation, without node-a.
  auto applies = agent_->Applies();
  ASSERT_GE(applies.size(), 2u);
  EXPECT_EQ(applies[1].fence.publication_generation, 2);
  EXPECT_THAT(applies[1].allowed_hosts, ElementsAre(NqnOf("node-b")));

  // Idempotent: a node that is not published, a volume that does not exist.
  EXPECT_TRUE(Unpublish("pvc-1", "node-a").ok());
  EXPECT_TRUE(Unpublish("pvc-gone", "node-a").ok());
  EXPECT_EQ(Volume("pvc-1").status.publication_generation, 3);
}

// --- CreateVolume / DeleteVolume ----------------------------------------------

TEST_F(CsiControllerTest, CreateVolumeRecordsTheExportSpecAndAnswersOnlyOnceExported) {
  csi::v1::CreateVolumeRequest req;
  req.set_name("pvc-new");
  req.mutable_capacity_range()->set_required_bytes(2 * kGiB);
  *req.add_volume_capabilities() = Capability();
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
  csi::v1::CreateVolumeResponse resp;
  grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.volume().volume_id(), "pvc-new");
  EXPECT_EQ(resp.volume().capacity_bytes(), 2 * kGiB);
  auto v = Volume("pvc-new");
  ASSERT_TRUE(v.status.export_spec.has_value());
  EXPECT_EQ(v.status.export_spec->bind_address, kAgentAddress) << "the agent's address";
  EXPECT_TRUE(v.status.export_spec->acl_enabled);
  EXPECT_EQ(Condition("pvc-new"), "True/Reconciled");
  EXPECT_THAT(AllowedHosts("pvc-new"), IsEmpty()) << "published to nobody yet";
  EXPECT_EQ(v.status.backend, "file") << "the backend kind the agent's create answered";

  // Retried with the same parameters: the same lifecycle, the same backend volume.
  const std::string uid = Get(api::kKindVolume, "pvc-new").uid;
  resp.Clear();
  ASSERT_TRUE(csi_->CreateVolume(nullptr, &req, &resp).ok());
  EXPECT_EQ(Get(api::kKindVolume, "pvc-new").uid, uid);
  EXPECT_EQ(agent_->VolumeOf("tank/pvc-new")->size_bytes, 2 * kGiB);
  (*req.mutable_parameters())["acl"] = "false";
  EXPECT_EQ(csi_->CreateVolume(nullptr, &req, &resp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
}

// Issue 22, items 3 and 4: a create the agent refuses leaves no record; one
// that may have left storage behind (the agent unreachable) keeps its record
// for the retry, which reuses its lifecycle, and until the agent confirms it
// nothing publishes, lists or reconciles it.
TEST_F(CsiControllerTest, ARefusedCreateLeavesNoRecordAndAnUnconfirmedOneIsNoVolumeYet) {
  csi::v1::CreateVolumeRequest req;
  req.set_name("pvc-new");
  req.mutable_capacity_range()->set_required_bytes(kGiB);
  *req.add_volume_capabilities() = Capability();
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
  csi::v1::CreateVolumeResponse resp;

  agent_->FailWith(AgentCall::kCreateVolume, AlreadyExists("tank/pvc-new is not pillar's"));
  EXPECT_EQ(csi_->CreateVolume(nullptr, &req, &resp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(store().Get(api::kKindVolume, "pvc-new").status().code(), Code::kNotFound);

  agent_->FailWith(AgentCall::kCreateVolume, Unavailable("agent unreachable"));
  EXPECT_EQ(csi_->CreateVolume(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
  const store::Object pending = Get(api::kKindVolume, "pvc-new");
  EXPECT_FALSE(api::IsProvisioned(Volume("pvc-new").status));
  RegisterNode("node-a");
  EXPECT_EQ(Publish("pvc-new", "node-a").error_code(), grpc::StatusCode::NOT_FOUND);
  csi::v1::ListVolumesRequest lreq;
  csi::v1::ListVolumesResponse lresp;
  ASSERT_TRUE(csi_->ListVolumes(nullptr, &lreq, &lresp).ok());
  for (const auto& e : lresp.entries()) EXPECT_NE(e.volume().volume_id(), "pvc-new");
  EXPECT_EQ(agent_->Calls(AgentCall::kApplyExport), 0);

  agent_->ClearFailure(AgentCall::kCreateVolume);
  ASSERT_TRUE(csi_->CreateVolume(nullptr, &req, &resp).ok());
  EXPECT_EQ(Get(api::kKindVolume, "pvc-new").uid, pending.uid) << "the retry's lifecycle";
  EXPECT_TRUE(api::IsProvisioned(Volume("pvc-new").status));
  EXPECT_EQ(Condition("pvc-new"), "True/Reconciled");

  // Sizes whose rounding would overflow are OUT_OF_RANGE, recorded nowhere.
  req.set_name("pvc-huge");
  req.mutable_capacity_range()->set_required_bytes(std::numeric_limits<int64_t>::max() - 1);
  EXPECT_EQ(csi_->CreateVolume(nullptr, &req, &resp).error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(store().Get(api::kKindVolume, "pvc-huge").status().code(), Code::kNotFound);
}

// Issue 28: connection timing is validated at CreateVolume, named when bad,
// recorded, and carried in the volume context with the defaults filled in.
TEST_F(CsiControllerTest, ConnectionTimingIsValidatedAndCarriedInTheVolumeContext) {
  csi::v1::CreateVolumeRequest req;
  req.set_name("pvc-timing");
  req.mutable_capacity_range()->set_required_bytes(kGiB);
  *req.add_volume_capabilities() = Capability();
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
  csi::v1::CreateVolumeResponse resp;
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"nvmeReconnectDelay", "0"}, {"iscsiReplacementTimeout", "600"}}) {
    (*req.mutable_parameters())[key] = value;
    grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << key;
    EXPECT_NE(s.error_message().find("parameters." + key), std::string::npos) << s.error_message();
    EXPECT_EQ(store().Get(api::kKindVolume, "pvc-timing").status().code(), Code::kNotFound);
    req.mutable_parameters()->erase(key);
  }
  (*req.mutable_parameters())["nvmeCtrlLossTimeout"] = "1800";
  grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto& ctx = resp.volume().volume_context();
  EXPECT_EQ(ctx.at("nvmeCtrlLossTimeout"), "1800") << "the StorageClass's choice";
  EXPECT_EQ(ctx.at("nvmeReconnectDelay"), "1") << "pillar's default";
  EXPECT_EQ(ctx.at("nvmeKeepAliveTimeout"), "5");
  EXPECT_EQ(ctx.count("iscsiReplacementTimeout"), 0U);
  EXPECT_EQ(Volume("pvc-timing").spec.parameters.value("nvmeCtrlLossTimeout", ""), "1800");
}

// Issue 11: every repeated field of a request is capped, refused by name
// before anything is recorded; parameters.import must be a boolean.
TEST_F(CsiControllerTest, RequestsOverTheCapsOrWithABadImportAreRefusedAndRecordNothing) {
  csi::v1::CreateVolumeRequest req;
  req.set_name("pvc-capped");
  req.mutable_capacity_range()->set_required_bytes(kGiB);
  *req.add_volume_capabilities() = Capability();
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
  auto expect_invalid = [&](const std::string& field) {
    csi::v1::CreateVolumeResponse resp;
    grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
    EXPECT_EQ(store().Get(api::kKindVolume, "pvc-capped").status().code(), Code::kNotFound);
  };
  (*req.mutable_parameters())["import"] = "yes";
  expect_invalid("parameters.import");
  req.mutable_parameters()->erase("import");
  for (int i = 0; i < 63; ++i) (*req.mutable_secrets())["k" + std::to_string(i)] = "v";
  expect_invalid("secrets has 63 entries; at most 32");
  req.clear_secrets();
  for (int i = 0; i < 33; ++i) {
    req.mutable_volume_capabilities(0)->mutable_mount()->add_mount_flags("noatime");
  }
  expect_invalid("volume_capabilities[0].mount.mount_flags has 33 entries");
  req.mutable_volume_capabilities(0)->mutable_mount()->clear_mount_flags();
  for (int i = 0; i < 17; ++i) *req.add_volume_capabilities() = Capability();
  expect_invalid("volume_capabilities has 18 entries");
  while (req.volume_capabilities_size() > 1) req.mutable_volume_capabilities()->RemoveLast();
  for (int i = 0; i < 62; ++i) (*req.mutable_parameters())["backend.p" + std::to_string(i)] = "v";
  expect_invalid("parameters has 65 entries; at most 64");
}

// Any CSI name of up to 128 bytes is taken (csi-sanity's carry upper-case hex):
// a name that is not already a safe volume ID maps to one, always the same,
// and a name whose ID is held by another name is ALREADY_EXISTS, never that
// other volume.
TEST_F(CsiControllerTest, AnyCsiNameMapsToOneStableVolumeIdAndNeverToAnothersVolume) {
  EXPECT_EQ(VolumeIdForName("pvc-0a1b2c3d-1111-4222-8333-444455556666"),
            "pvc-0a1b2c3d-1111-4222-8333-444455556666")
      << "Kubernetes' names are kept as they are";
  const std::string id = VolumeIdForName("Sanity-Create_Twice-5849EFB6");
  EXPECT_THAT(id, ::testing::MatchesRegex("sanity-create-twice-5849efb6-[0-9a-f]{16}"));
  EXPECT_EQ(VolumeIdForName("Sanity-Create_Twice-5849EFB6"), id) << "stable";
  EXPECT_NE(VolumeIdForName("A"), VolumeIdForName("a")) << "'a' is kept; 'A' maps";
  EXPECT_THAT(VolumeIdForName("___"), ::testing::MatchesRegex("vol-[0-9a-f]{16}"));
  EXPECT_LE(VolumeIdForName(std::string(128, 'X')).size(), 57u);

  csi::v1::CreateVolumeRequest req;
  req.set_name("Sanity-Create_Twice-5849EFB6");
  req.mutable_capacity_range()->set_required_bytes(kGiB);
  *req.add_volume_capabilities() = Capability();
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
  csi::v1::CreateVolumeResponse resp;
  grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.volume().volume_id(), id);
  EXPECT_EQ(Condition(id), "True/Reconciled");
  ASSERT_TRUE(agent_->VolumeOf("tank/" + id).has_value());
  resp.Clear();
  ASSERT_TRUE(csi_->CreateVolume(nullptr, &req, &resp).ok()) << "idempotent";
  EXPECT_EQ(resp.volume().volume_id(), id);

  // A name that is itself the ID another name maps to: not that volume.
  csi::v1::CreateVolumeRequest other = req;
  other.set_name(id);
  EXPECT_EQ(csi_->CreateVolume(nullptr, &other, &resp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  req.set_name(std::string(128, 'N'));
  EXPECT_TRUE(csi_->CreateVolume(nullptr, &req, &resp).ok()) << "the CSI limit, 128 bytes";
  req.set_name(std::string(129, 'N'));
  s = csi_->CreateVolume(nullptr, &req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("name"));
}

// The Kubernetes store writes an object and its status in two requests; a
// create cut off between them leaves a record without status. The retry of
// the same request completes it; a record that was ever reconciled but has
// no exportSpec (created before 0.2.0) is never filled in.
TEST_F(CsiControllerTest, CreateRetryCompletesARecordWhoseStatusWasNeverWritten) {
  csi::v1::CreateVolumeRequest req;
  req.set_name("pvc-cut");
  req.mutable_capacity_range()->set_required_bytes(kGiB);
  *req.add_volume_capabilities() = Capability();
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
  (*req.mutable_parameters())["acl"] = "false";
  csi::v1::CreateVolumeResponse resp;
  // What the first request of a cut-off create wrote: the spec alone (taken
  // from a whole create of another name).
  req.set_name("pvc-whole");
  ASSERT_TRUE(csi_->CreateVolume(nullptr, &req, &resp).ok());
  store::Object cut;
  cut.kind = api::kKindVolume;
  cut.name = "pvc-cut";
  cut.spec = Get(api::kKindVolume, "pvc-whole").spec;
  cut.spec["volumeID"] = "pvc-cut";
  cut.spec["agentVolumeID"] = "tank/pvc-cut";
  ASSERT_TRUE(store().Create(cut).ok());
  req.set_name("pvc-cut");

  grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto v = Volume("pvc-cut");
  ASSERT_TRUE(v.status.export_spec.has_value());
  EXPECT_FALSE(v.status.export_spec->acl_enabled) << "from the request, as first recorded";
  EXPECT_EQ(v.status.export_spec->bind_address, kAgentAddress);
  EXPECT_EQ(Condition("pvc-cut"), "True/Reconciled");

  // A pre-0.2.0 record: reconciled once, no exportSpec. Never completed here.
  EditStatus(api::kKindVolume, "pvc-cut", [](nlohmann::json& st) { st.erase("exportSpec"); });
  EXPECT_FALSE(csi_->CreateVolume(nullptr, &req, &resp).ok());
  EXPECT_FALSE(Volume("pvc-cut").status.export_spec.has_value());
}

TEST_F(CsiControllerTest, DeleteVolumeRefusesWhilePublishedThenUnexportsAndDeletes) {
  PublishedVolume("pvc-1", {"node-a"});
  csi::v1::DeleteVolumeRequest del;
  del.set_volume_id("pvc-1");
  csi::v1::DeleteVolumeResponse resp;
  grpc::Status s = csi_->DeleteVolume(nullptr, &del, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_TRUE(agent_->VolumeOf("tank/pvc-1").has_value());
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));
  EXPECT_FALSE(Volume("pvc-1").status.deleting);

  ASSERT_TRUE(Unpublish("pvc-1", "node-a").ok());
  s = csi_->DeleteVolume(nullptr, &del, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(agent_->VolumeOf("tank/pvc-1").has_value());
  EXPECT_FALSE(agent_->ExportOf("tank/pvc-1", Protocol::kNvmeofTcp).has_value());
  EXPECT_EQ(store().Get(api::kKindVolume, "pvc-1").status().code(), Code::kNotFound);
  EXPECT_TRUE(csi_->DeleteVolume(nullptr, &del, &resp).ok()) << "gone is success";
}

// --- Publish -----------------------------------------------------------------

TEST_F(CsiControllerTest, PublishRecordsThenConfirmsAndRefusesASecondSingleNodeWriter) {
  RegisterNode("node-a");
  RegisterNode("node-b");
  CreateVolume(Spec("pvc-1"), Intent(true, {}, 0));
  csi::v1::ControllerPublishVolumeRequest req;
  req.set_volume_id("pvc-1");
  req.set_node_id("node-a");
  *req.mutable_volume_capability() = Capability();
  csi::v1::ControllerPublishVolumeResponse resp;
  grpc::Status s = csi_->ControllerPublishVolume(nullptr, &req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.publish_context().at("targetID"), "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1");
  EXPECT_EQ(resp.publish_context().at("port"), "4420");
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));

  s = Publish("pvc-1", "node-b");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));
  EXPECT_EQ(Publish("pvc-1", "node-unknown").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Publish("pvc-none", "node-a").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Publish("pvc-1", "node-a", Capability(false)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT)
      << "a block volume is not published for mount access";
}

// CSI: publishing again to the same node is idempotent with the same
// readonly flag and ALREADY_EXISTS with another (csi-sanity checks it).
TEST_F(CsiControllerTest, RepublishToTheSameNodeWithAnotherReadonlyFlagIsAlreadyExists) {
  RegisterNode("node-a");
  CreateVolume(Spec("pvc-1"), Intent(true, {}, 0));
  ASSERT_TRUE(Publish("pvc-1", "node-a").ok());
  ASSERT_TRUE(Publish("pvc-1", "node-a").ok()) << "idempotent";
  grpc::Status s = Publish("pvc-1", "node-a", Capability(), true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("readonly=false"));
  EXPECT_THAT(AllowedHosts("pvc-1"), ElementsAre(NqnOf("node-a")));
  // After an unpublish the node can be published read-only; that is recorded.
  ASSERT_TRUE(Unpublish("pvc-1", "node-a").ok());
  csi::v1::ControllerPublishVolumeResponse resp;
  ASSERT_TRUE(Publish("pvc-1", "node-a", Capability(), true, &resp).ok());
  EXPECT_EQ(resp.publish_context().at("readonly"), "true");
  api::VolumeState v = Volume("pvc-1");
  ASSERT_EQ(v.status.published_nodes.size(), 1u);
  EXPECT_TRUE(v.status.published_nodes[0].read_only);
}

// --- In-band authentication (issue 11) ----------------------------------------

TEST_F(CsiControllerTest, ChapRecordsOnlyADigestAndHandsTheKeyToTheAgentOnce) {
  const std::string key = "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2:";
  const std::string other = "DHHC-1:00:SlVga3aBjJeirbjDztnk7/oFEBsmMTxHUl1oc36JlJ9Udcmo:";
  RegisterNode("node-a");
  csi::v1::CreateVolumeRequest req;
  req.set_name("pvc-auth");
  *req.add_volume_capabilities() = Capability();
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
  (*req.mutable_parameters())["auth"] = "chap";
  csi::v1::CreateVolumeResponse resp;

  // No secret: refused by field, nothing recorded.
  grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("secrets.dhchapKey"), std::string::npos) << s.error_message();
  EXPECT_FALSE(store_->Get(api::kKindVolume, "pvc-auth").ok());
  (*req.mutable_secrets())["dhchapKey"] = "DHHC-1:00:bm90LWEta2V5:";
  s = csi_->CreateVolume(nullptr, &req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().find("bm90LWEta2V5"), std::string::npos) << "no secret in errors";

  (*req.mutable_secrets())["dhchapKey"] = key;
  s = csi_->CreateVolume(nullptr, &req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.volume().volume_context().at("auth"), "chap");
  auto obj = Get(api::kKindVolume, "pvc-auth");
  EXPECT_EQ(obj.status.dump().find(key.substr(10, 20)), std::string::npos) << obj.status.dump();
  EXPECT_EQ(obj.spec.dump().find(key.substr(10, 20)), std::string::npos);
  auto v = Volume("pvc-auth");
  ASSERT_TRUE(v.status.export_spec);
  EXPECT_EQ(v.status.export_spec->auth, "chap");
  EXPECT_EQ(v.status.export_spec->auth_digest,
            CredentialsDigest("tank/pvc-auth", {"", key, "", ""}));
  auto applies = agent_->Applies();
  ASSERT_FALSE(applies.empty());
  ASSERT_TRUE(applies.back().credentials.has_value());
  EXPECT_EQ(applies.back().credentials->secret, key);
  EXPECT_EQ(applies.back().spec.auth, "chap");
  EXPECT_EQ(applies.back().spec.auth_digest, v.status.export_spec->auth_digest);

  // Later applies carry the digest only: the agent keeps the key.
  ASSERT_TRUE(Publish("pvc-auth", "node-a").ok());
  applies = agent_->Applies();
  EXPECT_FALSE(applies.back().credentials.has_value());
  EXPECT_EQ(applies.back().spec.auth_digest, v.status.export_spec->auth_digest);

  // ControllerPublish secrets, when given, must be the same key; they are
  // handed over again (an agent that lost its state directory).
  RegisterNode("node-b");
  csi::v1::ControllerPublishVolumeRequest pub;
  pub.set_volume_id("pvc-auth");
  pub.set_node_id("node-b");
  *pub.mutable_volume_capability() = Capability();
  pub.mutable_volume_capability()->mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER);
  (*pub.mutable_secrets())["dhchapKey"] = other;
  csi::v1::ControllerPublishVolumeResponse presp;
  s = csi_->ControllerPublishVolume(nullptr, &pub, &presp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("secrets"), std::string::npos);
  (*pub.mutable_secrets())["dhchapKey"] = key;
  s = csi_->ControllerPublishVolume(nullptr, &pub, &presp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(agent_->Applies().back().credentials.has_value());
  EXPECT_EQ(agent_->Applies().back().credentials->secret, key);

  // A retried create with another key is another volume's request.
  (*req.mutable_secrets())["dhchapKey"] = other;
  EXPECT_EQ(csi_->CreateVolume(nullptr, &req, &resp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(CsiControllerTest, NfsRecordsRootSquashUnlessOptedOut) {
  for (const auto& [name, squash] : std::vector<std::pair<std::string, std::string>>{
           {"nfs-default", ""}, {"nfs-open", "false"}}) {
    csi::v1::CreateVolumeRequest req;
    req.set_name(name);
    *req.add_volume_capabilities() = Capability(false);
    req.mutable_volume_capabilities(0)->mutable_access_mode()->set_mode(
        csi::v1::VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER);
    (*req.mutable_parameters())["agent"] = kAgentRef;
    (*req.mutable_parameters())["pool"] = "tank";
    (*req.mutable_parameters())["protocol"] = "nfs";
    if (!squash.empty()) (*req.mutable_parameters())["nfsRootSquash"] = squash;
    csi::v1::CreateVolumeResponse resp;
    grpc::Status s = csi_->CreateVolume(nullptr, &req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    auto v = Volume(name);
    ASSERT_TRUE(v.status.export_spec);
    EXPECT_EQ(agent_->Applies().back().spec.nfs_no_root_squash, squash == "false") << name;
    EXPECT_EQ(v.status.export_spec->nfs_root_squash.value_or(true), squash != "false") << name;
  }
}

TEST_F(CsiControllerTest, NfsSendsTheRootModeAndOwnerToTheAgentAndRecordsTheParameters) {
  auto create = [&](const std::string& name, const std::map<std::string, std::string>& extra,
                    bool block = false) {
    csi::v1::CreateVolumeRequest req;
    req.set_name(name);
    *req.add_volume_capabilities() = Capability(block);
    (*req.mutable_parameters())["agent"] = kAgentRef;
    (*req.mutable_parameters())["pool"] = "tank";
    (*req.mutable_parameters())["protocol"] = block ? "nvmeof-tcp" : "nfs";
    for (const auto& [k, v] : extra) (*req.mutable_parameters())[k] = v;
    csi::v1::CreateVolumeResponse resp;
    return csi_->CreateVolume(nullptr, &req, &resp);
  };
  grpc::Status s = create("nfs-default", {});
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(agent_->Creates().back().root.has_value());
  EXPECT_EQ(agent_->Creates().back().root->mode, 0777u);
  EXPECT_EQ(agent_->Creates().back().root->uid, 0u);
  EXPECT_EQ(agent_->Creates().back().root->gid, 0u);

  const std::map<std::string, std::string> shared = {{"nfsRootMode", "2770"},
                                                     {"nfsRootOwner", "1000:2000"}};
  s = create("nfs-shared", shared);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(agent_->Creates().back().root.has_value());
  EXPECT_EQ(agent_->Creates().back().root->mode, 02770u);
  EXPECT_EQ(agent_->Creates().back().root->uid, 1000u);
  EXPECT_EQ(agent_->Creates().back().root->gid, 2000u);
  // Recorded with the other create parameters: a retry with another owner is
  // another request, not a way to change the volume.
  EXPECT_EQ(Volume("nfs-shared").spec.parameters.value("nfsRootOwner", ""), "1000:2000");
  EXPECT_EQ(create("nfs-shared", {{"nfsRootMode", "2770"}, {"nfsRootOwner", "0:0"}}).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  // A block volume's request carries none.
  s = create("blk", {}, /*block=*/true);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(agent_->Creates().back().root.has_value());

  // A bad value is refused before anything is recorded or asked of the agent.
  const size_t creates = agent_->Creates().size();
  EXPECT_EQ(create("nfs-bad", {{"nfsRootMode", "0999"}}).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(agent_->Creates().size(), creates);
  EXPECT_EQ(store().Get(api::kKindVolume, "nfs-bad").status().code(), Code::kNotFound);
}

// --- ValidateVolumeCapabilities ---------------------------------------------

TEST_F(CsiControllerTest, ValidateVolumeCapabilitiesConfirmsOnlyWhatTheVolumeSupports) {
  CreateVolume(Spec("blk"), Intent());
  CreateVolume(Spec("share", Protocol::kNfs, "mount"), Intent(false));

  auto r = Validate("blk", Capability());
  ASSERT_TRUE(r.has_confirmed()) << r.message();
  ASSERT_EQ(r.confirmed().volume_capabilities_size(), 1);
  EXPECT_TRUE(r.confirmed().volume_capabilities(0).has_block());
  EXPECT_EQ(r.confirmed().parameters().at("pool"), "tank");
  // Multi-node raw block is allowed; multi-node writers on a filesystem are not.
  EXPECT_TRUE(
      Validate("blk", Capability(true, VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER))
          .has_confirmed());

  r = Validate("blk", Capability(false));
  EXPECT_FALSE(r.has_confirmed());
  EXPECT_THAT(r.message(), HasSubstr("block access"));
  r = Validate("share", Capability(true));
  EXPECT_FALSE(r.has_confirmed());
  EXPECT_THAT(r.message(), HasSubstr("nfs volumes cannot be block volumes"));
  EXPECT_TRUE(
      Validate("share", Capability(false, VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER))
          .has_confirmed());
  r = Validate("blk", Capability(true, VolumeCapability::AccessMode::UNKNOWN));
  EXPECT_FALSE(r.has_confirmed());
  EXPECT_THAT(r.message(), HasSubstr("access_mode is required"));

  grpc::Status s;
  Validate("", Capability(), &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  Validate("pvc-none", Capability(), &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  csi::v1::ValidateVolumeCapabilitiesRequest no_caps;
  no_caps.set_volume_id("blk");
  csi::v1::ValidateVolumeCapabilitiesResponse resp;
  EXPECT_EQ(csi_->ValidateVolumeCapabilities(nullptr, &no_caps, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// --- ListVolumes ---------------------------------------------------------------

TEST_F(CsiControllerTest, ListVolumesPagesInNameOrderAndRejectsABadToken) {
  for (const char* n : {"pvc-e", "pvc-a", "pvc-c", "pvc-b", "pvc-d"}) {
    CreateVolume(Spec(n), Intent());
  }
  EditStatus(api::kKindVolume, "pvc-b", [](nlohmann::json& s) {
    s["publishedNodes"] = {{{"nodeID", "node-x"}, {"revoking", false}},
                           {{"nodeID", "node-y"}, {"revoking", true}}};
  });

  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    csi::v1::ListVolumesRequest req;
    req.set_max_entries(2);
    req.set_starting_token(token);
    csi::v1::ListVolumesResponse resp;
    grpc::Status s = csi_->ListVolumes(nullptr, &req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_LE(resp.entries_size(), 2);
    for (const auto& e : resp.entries()) {
      seen.push_back(e.volume().volume_id());
      EXPECT_EQ(e.volume().capacity_bytes(), kGiB);
      if (e.volume().volume_id() == "pvc-b") {
        EXPECT_THAT(e.status().published_node_ids(), ElementsAre("node-x"))
            << "a revoking node is not published";
      }
    }
    token = resp.next_token();
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(seen, ElementsAre("pvc-a", "pvc-b", "pvc-c", "pvc-d", "pvc-e"));

  csi::v1::ListVolumesRequest all;
  csi::v1::ListVolumesResponse resp;
  ASSERT_TRUE(csi_->ListVolumes(nullptr, &all, &resp).ok());
  EXPECT_EQ(resp.entries_size(), 5);
  EXPECT_TRUE(resp.next_token().empty());

  // A volume deleted between pages: its name still resumes the listing.
  csi::v1::ListVolumesRequest after_deleted;
  after_deleted.set_starting_token("after:pvc-bb");
  resp.Clear();
  ASSERT_TRUE(csi_->ListVolumes(nullptr, &after_deleted, &resp).ok());
  ASSERT_EQ(resp.entries_size(), 3);
  EXPECT_EQ(resp.entries(0).volume().volume_id(), "pvc-c");

  for (const char* bad :
       {"not a token", "../pvc-a", "PVC-A", "pvc-a", "invalid-token", "after:", "after:../x"}) {
    csi::v1::ListVolumesRequest req;
    req.set_starting_token(bad);
    resp.Clear();
    EXPECT_EQ(csi_->ListVolumes(nullptr, &req, &resp).error_code(), grpc::StatusCode::ABORTED)
        << bad;
  }
  csi::v1::ListVolumesRequest negative;
  negative.set_max_entries(-1);
  EXPECT_EQ(csi_->ListVolumes(nullptr, &negative, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// --- ControllerGetVolume -------------------------------------------------------

TEST_F(CsiControllerTest, ControllerGetVolumeReportsPublicationsAndTheCondition) {
  RegisterNode("node-a");
  auto intent = Intent(true, {"node-a"}, 2);
  intent.published_nodes.push_back({"node-b", true});
  CreateVolume(Spec("pvc-1"), intent);
  CreateVolume(Spec("pvc-2"), Intent());

  csi::v1::ControllerGetVolumeRequest req;
  req.set_volume_id("pvc-2");
  csi::v1::ControllerGetVolumeResponse resp;
  ASSERT_TRUE(csi_->ControllerGetVolume(nullptr, &req, &resp).ok());
  EXPECT_TRUE(resp.status().volume_condition().abnormal()) << "never reconciled";
  EXPECT_EQ(resp.status().volume_condition().message(), "not reconciled yet");

  ASSERT_TRUE(reconciler_->ReconcileNow("pvc-1").ok());
  req.set_volume_id("pvc-1");
  resp.Clear();
  ASSERT_TRUE(csi_->ControllerGetVolume(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.volume().volume_id(), "pvc-1");
  EXPECT_EQ(resp.volume().capacity_bytes(), kGiB);
  EXPECT_EQ(resp.volume().volume_context().at("protocol"), "nvmeof-tcp");
  EXPECT_EQ(resp.volume().volume_context().at("targetID"),
            "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1");
  EXPECT_THAT(resp.status().published_node_ids(), ElementsAre("node-a"));
  EXPECT_FALSE(resp.status().volume_condition().abnormal());
  EXPECT_THAT(resp.status().volume_condition().message(), HasSubstr("Reconciled"));

  agent_->FailWith(AgentCall::kGetExport, Unavailable("agent down"));
  ASSERT_TRUE(reconciler_->ReconcileNow("pvc-1").ok());
  resp.Clear();
  ASSERT_TRUE(csi_->ControllerGetVolume(nullptr, &req, &resp).ok());
  EXPECT_TRUE(resp.status().volume_condition().abnormal());
  EXPECT_THAT(resp.status().volume_condition().message(), HasSubstr("AgentUnavailable"));

  req.set_volume_id("");
  EXPECT_EQ(csi_->ControllerGetVolume(nullptr, &req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  req.set_volume_id("pvc-none");
  EXPECT_EQ(csi_->ControllerGetVolume(nullptr, &req, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// --- GetCapacity -----------------------------------------------------------------

TEST_F(CsiControllerTest, GetCapacityAsksTheAgentForThePool) {
  agent_->AddPool("other", 10 * kGiB, 1 * kGiB);
  csi::v1::GetCapacityRequest req;
  (*req.mutable_parameters())["agent"] = kAgentRef;
  (*req.mutable_parameters())["pool"] = "tank";
  csi::v1::GetCapacityResponse resp;
  grpc::Status s = csi_->GetCapacity(nullptr, &req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.available_capacity(), 40 * kGiB);
  EXPECT_EQ(resp.maximum_volume_size().value(), 40 * kGiB);

  agent_->FailWith(AgentCall::kGetCapacity, Unavailable("agent down"));
  EXPECT_EQ(csi_->GetCapacity(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);

  (*req.mutable_parameters())["agent"] = "storage-9";
  EXPECT_EQ(csi_->GetCapacity(nullptr, &req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT)
      << "an unknown agent is a bad parameter";
  req.mutable_parameters()->erase("pool");
  EXPECT_EQ(csi_->GetCapacity(nullptr, &req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT)
      << "an agent without its pool";

  // No parameters at all: every pool of every agent, together.
  agent_->ClearFailure(AgentCall::kGetCapacity);
  csi::v1::GetCapacityRequest none;
  resp.Clear();
  s = csi_->GetCapacity(nullptr, &none, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.available_capacity(), 41 * kGiB) << "tank's 40 GiB and other's 1 GiB";
  EXPECT_EQ(resp.maximum_volume_size().value(), 40 * kGiB);
  agent_->FailWith(AgentCall::kGetCapacity, Unavailable("agent down"));
  EXPECT_EQ(csi_->GetCapacity(nullptr, &none, &resp).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "an agent that cannot answer is not counted as empty";
}

// --- ControllerGetCapabilities ----------------------------------------------------

TEST_F(CsiControllerTest, ControllerGetCapabilitiesAdvertisesWhatIsImplemented) {
  csi::v1::ControllerGetCapabilitiesRequest req;
  csi::v1::ControllerGetCapabilitiesResponse resp;
  ASSERT_TRUE(csi_->ControllerGetCapabilities(nullptr, &req, &resp).ok());
  using T = csi::v1::ControllerServiceCapability::RPC;
  std::set<int> got;
  for (const auto& c : resp.capabilities()) got.insert(c.rpc().type());
  EXPECT_EQ(got,
            (std::set<int>{T::CREATE_DELETE_VOLUME, T::PUBLISH_UNPUBLISH_VOLUME, T::LIST_VOLUMES,
                           T::GET_CAPACITY, T::PUBLISH_READONLY, T::EXPAND_VOLUME,
                           T::LIST_VOLUMES_PUBLISHED_NODES, T::VOLUME_CONDITION, T::GET_VOLUME,
                           T::CREATE_DELETE_SNAPSHOT, T::LIST_SNAPSHOTS, T::CLONE_VOLUME}));
}

// --- ControllerExpandVolume -------------------------------------------------------

TEST_F(CsiControllerTest, ControllerExpandVolumeGrowsAndReportsNodeExpansion) {
  CreateVolume(Spec("fs-1", Protocol::kNvmeofTcp, "mount"), Intent());
  CreateVolume(Spec("blk-1"), Intent());

  csi::v1::ControllerExpandVolumeResponse resp;
  grpc::Status s = Expand("fs-1", 2 * kGiB + 1, 0, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(resp.capacity_bytes(), 2 * kGiB + 1);
  EXPECT_EQ(resp.capacity_bytes() % (4 << 20), 0) << "rounded up to the allocation quantum";
  EXPECT_TRUE(resp.node_expansion_required()) << "a filesystem on a block device";
  EXPECT_EQ(Volume("fs-1").status.capacity_bytes, resp.capacity_bytes());
  EXPECT_EQ(agent_->VolumeOf("tank/fs-1")->size_bytes, resp.capacity_bytes());
  int64_t grown = resp.capacity_bytes();

  // Smaller than what it has: nothing to do, the current size is the answer.
  resp.Clear();
  ASSERT_TRUE(Expand("fs-1", kGiB, 0, &resp).ok());
  EXPECT_EQ(resp.capacity_bytes(), grown);
  EXPECT_EQ(agent_->Calls(AgentCall::kExpandVolume), 1);

  resp.Clear();
  ASSERT_TRUE(Expand("blk-1", 3 * kGiB, 0, &resp).ok());
  EXPECT_EQ(resp.capacity_bytes(), 3 * kGiB);
  EXPECT_FALSE(resp.node_expansion_required()) << "raw block needs no node step";

  EXPECT_EQ(Expand("blk-1", 5 * kGiB, 4 * kGiB).error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(Expand("blk-1", -1).error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(Expand("", kGiB).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Expand("pvc-none", 4 * kGiB).error_code(), grpc::StatusCode::NOT_FOUND);
  csi::v1::ControllerExpandVolumeRequest no_range;
  no_range.set_volume_id("blk-1");
  EXPECT_EQ(csi_->ControllerExpandVolume(nullptr, &no_range, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // The agent fails: the recorded capacity stays what the agent last confirmed.
  agent_->FailWith(AgentCall::kExpandVolume, Internal("lvextend failed"));
  EXPECT_EQ(Expand("blk-1", 8 * kGiB).error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(Volume("blk-1").status.capacity_bytes, 3 * kGiB);
}

// --- The leader gate -----------------------------------------------------------

class CsiLeaderGateTest : public CsiControllerTest {};

TEST_F(CsiLeaderGateTest, NonLeaderRefusesEveryMutationAndChangesNothing) {
  PublishedVolume("pvc-1", {"node-a"});
  RegisterNode("node-b");
  CreateVolume(Spec("pvc-2"), Intent(true, {}, 0));
  const auto before = Snapshot();
  const int calls = agent_->TotalCalls();
  leader_.Set(false);

  csi::v1::CreateVolumeRequest create;
  create.set_name("pvc-new");
  *create.add_volume_capabilities() = Capability();
  (*create.mutable_parameters())["agent"] = kAgentRef;
  (*create.mutable_parameters())["pool"] = "tank";
  (*create.mutable_parameters())["protocol"] = "nvmeof-tcp";
  csi::v1::CreateVolumeResponse created;
  csi::v1::DeleteVolumeRequest del;
  del.set_volume_id("pvc-2");
  csi::v1::DeleteVolumeResponse deleted;

  EXPECT_EQ(csi_->CreateVolume(nullptr, &create, &created).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(csi_->DeleteVolume(nullptr, &del, &deleted).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Publish("pvc-2", "node-b").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Unpublish("pvc-1", "node-a").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Expand("pvc-1", 4 * kGiB).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Snapshot(), before) << "a non-leader records nothing";
  EXPECT_EQ(agent_->TotalCalls(), calls) << "and drives no agent";

  csi::v1::ProbeRequest probe;
  csi::v1::ProbeResponse ready;
  CsiIdentity identity(leader_);
  ASSERT_TRUE(identity.Probe(nullptr, &probe, &ready).ok());
  EXPECT_FALSE(ready.ready().value());

  // The same requests succeed once this replica leads.
  leader_.Set(true);
  EXPECT_TRUE(csi_->CreateVolume(nullptr, &create, &created).ok());
  EXPECT_TRUE(csi_->DeleteVolume(nullptr, &del, &deleted).ok());
  EXPECT_TRUE(Unpublish("pvc-1", "node-a").ok());
  EXPECT_TRUE(Expand("pvc-1", 4 * kGiB).ok());
  EXPECT_NE(Snapshot(), before);
  ready.Clear();
  ASSERT_TRUE(identity.Probe(nullptr, &probe, &ready).ok());
  EXPECT_TRUE(ready.ready().value());
}

TEST(CsiLeaderFileLockTest, OneReplicaLeadsAndTheOtherTakesOverWhenItGoes) {
  pillar::testing::TempDir dir;
  const std::string lock = dir.Sub("controller.lock");
  auto first = std::make_unique<FileLockLeader>(lock);
  ASSERT_TRUE(first->WaitForLeadership().ok());
  EXPECT_TRUE(first->IsLeader());

  // The second replica waits on its own thread; shared, so a failed test
  // that leaves it blocked does not pull its state from under it.
  struct Replica {
    explicit Replica(std::string path) : leader(std::move(path)) {}
    FileLockLeader leader;
    std::atomic<bool> returned{false};
    pillar::Status result;
  };
  auto second = std::make_shared<Replica>(lock);
  std::thread([second] {
    second->result = second->leader.WaitForLeadership();
    second->returned = true;
  }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(second->returned) << "two leaders on one lock";
  EXPECT_FALSE(second->leader.IsLeader());
  EXPECT_TRUE(first->IsLeader());

  first.reset();  // the leader exits; its lock goes with it
  ASSERT_TRUE(WaitFor([&] { return second->returned.load(); }))
      << "the waiting replica never took over";
  EXPECT_TRUE(second->result.ok()) << second->result.ToString();
  EXPECT_TRUE(second->leader.IsLeader());
}

}  // namespace
}  // namespace pillar::controller::testing
