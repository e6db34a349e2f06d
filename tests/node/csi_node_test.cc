// The gRPC edge: field presence -> INVALID_ARGUMENT naming the field,
// capabilities, NodeGetInfo, and the stats condition mapping.
#include "node/csi_node.h"

#include <gtest/gtest.h>

#include "common/fake_exec.h"
#include "common/temp_dir.h"
#include "node/attach/iscsi.h"
#include "node/attach/nvme.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;
using testing::FakeClock;
using testing::FakeMounter;

class NodeCsiTest : public ::testing::Test {
 protected:
  NodeCsiTest()
      : fabrics_(exec_),
        nvme_(exec_, fabrics_, fs_, clock_, tmp_.Sub("sys"), tmp_.Sub("hostnqn")),
        iscsi_(exec_, fs_, clock_, tmp_.Sub("sys"), tmp_.Sub("iscsi-nodes")),
        nfs_(exec_),
        formatter_(exec_, claimer_),
        records_(fs_, tmp_.Sub("state/volumes")),
        core_(NodeDeps{fs_, mounter_, Attachers{&nvme_, &iscsi_}, nfs_, formatter_, records_,
                       volume_locks_, connection_locks_, tmp_.Sub("sys")}),
        node_(core_, "worker-1") {
    EXPECT_TRUE(records_.Init().ok());
    std::filesystem::create_directories(tmp_.Sub("sys/module/nvme_tcp"));  // loaded
  }

  csi::v1::VolumeCapability MountCap() {
    csi::v1::VolumeCapability cap;
    cap.mutable_mount()->set_fs_type("ext4");
    cap.mutable_access_mode()->set_mode(csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    return cap;
  }

  TempDir tmp_;
  PosixFs fs_;
  FakeExec exec_;
  FakeClock clock_;
  FakeMounter mounter_;
  testing::ExecFabrics fabrics_;
  NvmeAttacher nvme_;
  IscsiAttacher iscsi_;
  NfsMounter nfs_;
  testing::FakeDeviceClaimer claimer_;
  DeviceFormatter formatter_;
  StageRecordStore records_;
  VolumeLocks volume_locks_;
  NamedLocks connection_locks_;
  NodeCore core_;
  CsiNode node_;
};

void ExpectInvalid(const grpc::Status& s, const std::string& field) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
}

TEST_F(NodeCsiTest, CapabilitiesAndInfo) {
  csi::v1::NodeGetCapabilitiesResponse caps;
  ASSERT_TRUE(node_.NodeGetCapabilities(nullptr, nullptr, &caps).ok());
  std::set<int> types;
  for (const auto& c : caps.capabilities()) types.insert(c.rpc().type());
  using T = csi::v1::NodeServiceCapability::RPC;
  EXPECT_EQ(types, (std::set<int>{T::STAGE_UNSTAGE_VOLUME, T::GET_VOLUME_STATS, T::VOLUME_CONDITION,
                                  T::EXPAND_VOLUME}));
  csi::v1::NodeGetInfoResponse info;
  ASSERT_TRUE(node_.NodeGetInfo(nullptr, nullptr, &info).ok());
  EXPECT_EQ(info.node_id(), "worker-1");
  EXPECT_EQ(info.accessible_topology().segments().at(kTopologyNodeKey), "worker-1");
  csi::v1::GetPluginInfoResponse plugin;
  CsiNodeIdentity identity;
  ASSERT_TRUE(identity.GetPluginInfo(nullptr, nullptr, &plugin).ok());
  EXPECT_EQ(plugin.name(), "pillar-csi.bhyoo.com");
  // The plugin's capabilities, as pillar-controller's: a CO (or csi-sanity)
  // asking the node plugin learns that ControllerPublishVolume comes first.
  csi::v1::GetPluginCapabilitiesResponse plugin_caps;
  ASSERT_TRUE(identity.GetPluginCapabilities(nullptr, nullptr, &plugin_caps).ok());
  bool controller_service = false;
  for (const auto& c : plugin_caps.capabilities()) {
    controller_service |=
        c.service().type() == csi::v1::PluginCapability::Service::CONTROLLER_SERVICE;
  }
  EXPECT_TRUE(controller_service);
}

TEST_F(NodeCsiTest, MissingFieldsAreInvalidArgumentNamingTheField) {
  csi::v1::NodeStageVolumeRequest stage;
  csi::v1::NodeStageVolumeResponse stage_resp;
  ExpectInvalid(node_.NodeStageVolume(nullptr, &stage, &stage_resp), "volume_id");
  stage.set_volume_id("pvc-1");
  ExpectInvalid(node_.NodeStageVolume(nullptr, &stage, &stage_resp), "staging_target_path");
  stage.set_staging_target_path(tmp_.Sub("staging"));
  ExpectInvalid(node_.NodeStageVolume(nullptr, &stage, &stage_resp), "volume_capability");
  stage.mutable_volume_capability()->mutable_access_mode();
  ExpectInvalid(node_.NodeStageVolume(nullptr, &stage, &stage_resp), "access_type");
  *stage.mutable_volume_capability() = MountCap();
  ExpectInvalid(node_.NodeStageVolume(nullptr, &stage, &stage_resp), "protocol");

  csi::v1::NodePublishVolumeRequest pub;
  csi::v1::NodePublishVolumeResponse pub_resp;
  pub.set_volume_id("pvc-1");
  pub.set_staging_target_path(tmp_.Sub("staging"));
  ExpectInvalid(node_.NodePublishVolume(nullptr, &pub, &pub_resp), "target_path");
  pub.set_target_path(tmp_.Sub("target"));
  ExpectInvalid(node_.NodePublishVolume(nullptr, &pub, &pub_resp), "volume_capability");
  *pub.mutable_volume_capability() = MountCap();
  EXPECT_EQ(node_.NodePublishVolume(nullptr, &pub, &pub_resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  csi::v1::NodeUnpublishVolumeRequest unpub;
  csi::v1::NodeUnpublishVolumeResponse unpub_resp;
  unpub.set_volume_id("pvc-1");
  ExpectInvalid(node_.NodeUnpublishVolume(nullptr, &unpub, &unpub_resp), "target_path");
  unpub.set_target_path("relative");
  ExpectInvalid(node_.NodeUnpublishVolume(nullptr, &unpub, &unpub_resp), "target_path");

  csi::v1::NodeUnstageVolumeRequest unstage;
  csi::v1::NodeUnstageVolumeResponse unstage_resp;
  ExpectInvalid(node_.NodeUnstageVolume(nullptr, &unstage, &unstage_resp), "volume_id");

  csi::v1::NodeGetVolumeStatsRequest stats;
  csi::v1::NodeGetVolumeStatsResponse stats_resp;
  stats.set_volume_id("pvc-1");
  ExpectInvalid(node_.NodeGetVolumeStats(nullptr, &stats, &stats_resp), "volume_path");
  stats.set_volume_path(tmp_.Sub("target"));
  EXPECT_EQ(node_.NodeGetVolumeStats(nullptr, &stats, &stats_resp).error_code(),
            grpc::StatusCode::NOT_FOUND);

  csi::v1::NodeExpandVolumeRequest expand;
  csi::v1::NodeExpandVolumeResponse expand_resp;
  ExpectInvalid(node_.NodeExpandVolume(nullptr, &expand, &expand_resp), "volume_id");
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeCsiTest, RepeatedFieldsOverTheirCapsAreRefusedByName) {
  csi::v1::NodeStageVolumeRequest stage;
  csi::v1::NodeStageVolumeResponse stage_resp;
  stage.set_volume_id("pvc-1");
  stage.set_staging_target_path(tmp_.Sub("staging"));
  *stage.mutable_volume_capability() = MountCap();
  for (int i = 0; i < 33; ++i) (*stage.mutable_secrets())["k" + std::to_string(i)] = "v";
  ExpectInvalid(node_.NodeStageVolume(nullptr, &stage, &stage_resp), "secrets has 33 entries");
  stage.clear_secrets();
  for (int i = 0; i < 65; ++i) (*stage.mutable_publish_context())["k" + std::to_string(i)] = "v";
  ExpectInvalid(node_.NodeStageVolume(nullptr, &stage, &stage_resp), "publish_context");

  csi::v1::NodePublishVolumeRequest pub;
  csi::v1::NodePublishVolumeResponse pub_resp;
  pub.set_volume_id("pvc-1");
  *pub.mutable_volume_capability() = MountCap();
  for (int i = 0; i < 33; ++i)
    pub.mutable_volume_capability()->mutable_mount()->add_mount_flags("ro");
  ExpectInvalid(node_.NodePublishVolume(nullptr, &pub, &pub_resp),
                "volume_capability.mount.mount_flags");
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeCsiTest, NfsVolumeStatsCarryTheCondition) {
  exec_.On({"mount", "-t", "nfs4"}, [this](const Command& c) -> StatusOr<ExecResult> {
    mounter_.AddMount({c.argv[c.argv.size() - 2], c.argv.back(), "nfs4"});
    return ExecResult{0, "", ""};
  });
  csi::v1::NodeStageVolumeRequest stage;
  stage.set_volume_id("pvc-n");
  stage.set_staging_target_path(tmp_.Sub("staging"));
  *stage.mutable_volume_capability() = MountCap();
  (*stage.mutable_volume_context())["protocol"] = "nfs";
  (*stage.mutable_volume_context())["targetID"] = "/exports/pvc-n";
  (*stage.mutable_volume_context())["address"] = "10.0.0.5";
  (*stage.mutable_publish_context())["port"] = "2049";
  csi::v1::NodeStageVolumeResponse stage_resp;
  auto s = node_.NodeStageVolume(nullptr, &stage, &stage_resp);
  ASSERT_TRUE(s.ok()) << s.error_message();

  csi::v1::NodeGetVolumeStatsRequest stats;
  stats.set_volume_id("pvc-n");
  stats.set_volume_path(tmp_.Sub("staging"));
  csi::v1::NodeGetVolumeStatsResponse resp;
  ASSERT_TRUE(node_.NodeGetVolumeStats(nullptr, &stats, &resp).ok());
  EXPECT_FALSE(resp.volume_condition().abnormal());
  ASSERT_EQ(resp.usage_size(), 2);
  EXPECT_EQ(resp.usage(0).unit(), csi::v1::VolumeUsage::BYTES);
  EXPECT_EQ(resp.usage(1).unit(), csi::v1::VolumeUsage::INODES);

  mounter_.SetVfs(tmp_.Sub("staging"), VfsStat{EACCES});
  resp.Clear();
  ASSERT_TRUE(node_.NodeGetVolumeStats(nullptr, &stats, &resp).ok());
  EXPECT_TRUE(resp.volume_condition().abnormal());
  EXPECT_NE(resp.volume_condition().message().find("Permission denied"), std::string::npos);
  EXPECT_EQ(resp.usage_size(), 0);
}

}  // namespace
}  // namespace pillar::node
