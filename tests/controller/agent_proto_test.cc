// The controller's translation to and from agent.proto (agent_proto.h): every
// field of every message it sends or reads. Each message is built with every
// field set, checked by reflection, so a field the conversion forgets (or one
// added to agent.proto that neither side knows yet) fails here.
#include "controller/agent_proto.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/protocol_proto.h"

namespace pillar::controller {
namespace {

namespace av1 = pillar::agent::v1;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Every field of `m` holds a value other than its default, recursively; of a
// oneof, the one field set.
void ExpectEveryFieldSet(const Message& m, const std::string& path = "") {
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    std::string name = path + std::string(f->name());
    bool nested = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map();
    if (f->is_repeated()) {
      EXPECT_GT(r->FieldSize(m, f), 0) << name << " is empty";
      for (int j = 0; nested && j < r->FieldSize(m, f); ++j) {
        ExpectEveryFieldSet(r->GetRepeatedMessage(m, f, j), name + "[" + std::to_string(j) + "].");
      }
      continue;
    }
    if (const auto* oneof = f->real_containing_oneof(); oneof != nullptr) {
      EXPECT_TRUE(r->HasOneof(m, oneof)) << std::string(oneof->name()) << " is not set";
      if (!r->HasField(m, f)) continue;
    } else {
      EXPECT_TRUE(r->HasField(m, f)) << name << " is not set";
    }
    if (nested && r->HasField(m, f)) ExpectEveryFieldSet(r->GetMessage(m, f), name + ".");
  }
}

template <typename M>
M Parse(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

// `got` is exactly the message `want` spells, and sets every field.
template <typename M>
void ExpectSentAsEveryField(const M& got, const std::string& want) {
  ExpectEveryFieldSet(got);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(Parse<M>(want), got)) << diff;
}

// A message the agent answers with, every field set.
template <typename M>
M EveryFieldAnswer(const std::string& text) {
  M m = Parse<M>(text);
  ExpectEveryFieldSet(m);
  return m;
}

constexpr const char* kExportText = R"pb(
  agent_volume_id: "tank/pvc-1"
  protocol: PROTOCOL_ISCSI
  target_id: "iqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1"
  spec {
    bind_address: "10.0.0.5"
    port: 3260
    acl_enabled: true
    in_capsule_data_size: 8192
    auth: "chap"
    auth_digest: "sha256:aa"
    nfs_no_root_squash: true
  }
  allowed_hosts: "iqn.1993-08.org.debian:01:a"
  allowed_hosts: "iqn.1993-08.org.debian:01:b"
  backing: "/dev/zvol/tank/pvc-1"
  enabled: true
  fence { volume_uid: "uid-1" publication_generation: 7 }
)pb";

agent_api::Export ExpectedExport() {
  agent_api::Export e;
  e.agent_volume_id = "tank/pvc-1";
  e.protocol = Protocol::kIscsi;
  e.target_id = "iqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1";
  e.spec = {"10.0.0.5", 3260, true, 8192, "chap", "sha256:aa", true};
  e.allowed_hosts = {"iqn.1993-08.org.debian:01:a", "iqn.1993-08.org.debian:01:b"};
  e.backing = "/dev/zvol/tank/pvc-1";
  e.enabled = true;
  e.fence = agent_api::Fence{"uid-1", 7};
  return e;
}

constexpr const char* kVolumeText = R"pb(
  agent_volume_id: "tank/pvc-1"
  pool: "tank"
  name: "pvc-1"
  size_bytes: 1073741824
  mode: VOLUME_MODE_FILESYSTEM
  backend: "zfs"
  device_path: "/dev/zvol/tank/pvc-1"
  export_path: "/tank/pvc-1"
  volume_uid: "uid-1"
  owner_uid: "uid-0"
  pending: "zeroing from byte 4096"
  origin: "snapshot tank/snap-1"
)pb";

agent_api::Volume ExpectedVolume() {
  agent_api::Volume v;
  v.agent_volume_id = "tank/pvc-1";
  v.pool = "tank";
  v.name = "pvc-1";
  v.size_bytes = 1073741824;
  v.mode = agent_api::VolumeMode::kFilesystem;
  v.backend = "zfs";
  v.device_path = "/dev/zvol/tank/pvc-1";
  v.export_path = "/tank/pvc-1";
  v.volume_uid = "uid-1";
  v.owner_uid = "uid-0";
  v.pending = "zeroing from byte 4096";
  v.origin = "snapshot tank/snap-1";
  return v;
}

constexpr const char* kPoolText = R"pb(
  name: "tank"
  backend: "zfs"
  total_bytes: 4096
  available_bytes: 1024
  modes: VOLUME_MODE_BLOCK
  modes: VOLUME_MODE_FILESYSTEM
)pb";

agent_api::Pool ExpectedPool() {
  return {"tank",
          "zfs",
          4096,
          1024,
          {agent_api::VolumeMode::kBlock, agent_api::VolumeMode::kFilesystem}};
}

TEST(AgentProtoTest, CreateVolumeRequest) {
  agent_api::CreateVolumeRequest r;
  r.pool = "tank";
  r.name = "pvc-1";
  r.size_bytes = 1073741824;
  r.mode = agent_api::VolumeMode::kFilesystem;
  r.volume_uid = "uid-1";
  r.parameters = {{"thin", "true"}};
  r.import_existing = true;
  r.root = agent_api::VolumeRoot{02770, 1000, 2000};
  r.source = agent_api::VolumeSource{"tank/snap-1", "", "uid-s", true};
  ExpectSentAsEveryField(ToProto(r), R"pb(
    pool: "tank"
    name: "pvc-1"
    size_bytes: 1073741824
    mode: VOLUME_MODE_FILESYSTEM
    volume_uid: "uid-1"
    parameters { key: "thin" value: "true" }
    import_existing: true
    root { mode: 1528 uid: 1000 gid: 2000 }
    source { agent_snapshot_id: "tank/snap-1" source_uid: "uid-s" detached: true }
  )pb");

  // A clone names a volume; a volume made empty has no source at all.
  r.source = agent_api::VolumeSource{"", "tank/pvc-0", "uid-0", false};
  auto clone = ToProto(r);
  EXPECT_EQ(clone.source().agent_volume_id(), "tank/pvc-0");
  EXPECT_FALSE(clone.source().has_agent_snapshot_id());
  r.source.reset();
  EXPECT_FALSE(ToProto(r).has_source());

  // A block volume; no root directory: the field is absent, not zero.
  r.mode = agent_api::VolumeMode::kBlock;
  r.root.reset();
  auto block = ToProto(r);
  EXPECT_EQ(block.mode(), av1::VOLUME_MODE_BLOCK);
  EXPECT_FALSE(block.has_root());
}

TEST(AgentProtoTest, ExpandAndDeleteVolumeRequests) {
  ExpectSentAsEveryField(
      ToProto(agent_api::ExpandVolumeRequest{"tank/pvc-1", 2048, "uid-1"}),
      R"pb(agent_volume_id: "tank/pvc-1" size_bytes: 2048 volume_uid: "uid-1")pb");
  ExpectSentAsEveryField(ToProto(agent_api::DeleteVolumeRequest{"tank/pvc-1", "uid-1"}),
                         R"pb(agent_volume_id: "tank/pvc-1" volume_uid: "uid-1")pb");
}

TEST(AgentProtoTest, ApplyExportRequest) {
  agent_api::ApplyExportRequest r;
  r.agent_volume_id = "tank/pvc-1";
  r.protocol = Protocol::kNfs;
  r.spec = {"fd00::5", 2049, true, 16384, "chap", "sha256:bb", true};
  r.fence = {"uid-1", 9};
  r.allowed_hosts = {"10.0.1.1", "10.0.1.2"};
  r.credentials = Credentials{"user", "secret", "target", "mutual-secret"};
  ExpectSentAsEveryField(ToProto(r), R"pb(
    agent_volume_id: "tank/pvc-1"
    protocol: PROTOCOL_NFS
    spec {
      bind_address: "fd00::5"
      port: 2049
      acl_enabled: true
      in_capsule_data_size: 16384
      auth: "chap"
      auth_digest: "sha256:bb"
      nfs_no_root_squash: true
    }
    fence { volume_uid: "uid-1" publication_generation: 9 }
    allowed_hosts: "10.0.1.1"
    allowed_hosts: "10.0.1.2"
    credentials {
      username: "user"
      secret: "secret"
      mutual_username: "target"
      mutual_secret: "mutual-secret"
    }
  )pb");

  // Without credentials the agent uses its own copy: the field is absent.
  r.credentials.reset();
  EXPECT_FALSE(ToProto(r).has_credentials());
  // Each protocol keeps its own value.
  for (Protocol p : kAllProtocols) {
    r.protocol = p;
    EXPECT_EQ(ToProto(r).protocol(), pillar::ToProto(p)) << ProtocolName(p);
  }
}

TEST(AgentProtoTest, UnexportGetExportAndGetCapacityRequests) {
  ExpectSentAsEveryField(
      ToProto(agent_api::UnexportVolumeRequest{"tank/pvc-1", Protocol::kNvmeofTcp, {"uid-1", 3}}),
      R"pb(
        agent_volume_id: "tank/pvc-1"
        protocol: PROTOCOL_NVMEOF_TCP
        fence { volume_uid: "uid-1" publication_generation: 3 }
      )pb");
  ExpectSentAsEveryField(GetExportRequestProto("tank/pvc-1", Protocol::kIscsi),
                         R"pb(agent_volume_id: "tank/pvc-1" protocol: PROTOCOL_ISCSI)pb");
  ExpectSentAsEveryField(GetCapacityRequestProto("tank"), R"pb(pool: "tank")pb");
}

TEST(AgentProtoTest, SnapshotRequestsAndAnswers) {
  ExpectSentAsEveryField(
      ToProto(agent_api::CreateSnapshotRequest{"tank/pvc-1", "uid-1", "snap-1", "uid-s", true}),
      R"pb(
        source_volume_id: "tank/pvc-1"
        source_volume_uid: "uid-1"
        name: "snap-1"
        snapshot_uid: "uid-s"
        detached: true
      )pb");
  ExpectSentAsEveryField(ToProto(agent_api::DeleteSnapshotRequest{"tank/snap-1", "uid-s"}),
                         R"pb(agent_snapshot_id: "tank/snap-1" snapshot_uid: "uid-s")pb");
  ExpectSentAsEveryField(ListSnapshotsRequestProto("tank"), R"pb(pool: "tank")pb");

  constexpr const char* kSnapshotText = R"pb(
    agent_snapshot_id: "tank/snap-1"
    pool: "tank"
    name: "snap-1"
    source_volume_id: "tank/pvc-1"
    size_bytes: 1073741824
    creation_time_unix_nanos: 1765000000000000001
    backend: "zfs"
    owner_uid: "uid-s"
    ready_to_use: true
    used_bytes: 65536
    detached: true
  )pb";
  agent_api::Snapshot want{
      "tank/snap-1", "tank",  "snap-1", "tank/pvc-1", 1073741824, 1765000000000000001,
      "zfs",         "uid-s", true,     65536,        true};
  EXPECT_EQ(FromProto(EveryFieldAnswer<av1::Snapshot>(kSnapshotText)), want);
  auto listed = EveryFieldAnswer<av1::ListSnapshotsResponse>(std::string("snapshots {") +
                                                             kSnapshotText + "}");
  EXPECT_EQ(FromProto(listed), std::vector<agent_api::Snapshot>{want});
}

TEST(AgentProtoTest, GetInfoResponse) {
  auto m = EveryFieldAnswer<av1::GetInfoResponse>(std::string(R"pb(
                                                    node_name: "storage-1"
                                                    agent_version: "0.1.0"
                                                    boot_epoch: "epoch-2"
                                                    protocols: PROTOCOL_NVMEOF_TCP
                                                    protocols: PROTOCOL_NFS
                                                    pools {)pb") +
                                                  kPoolText + "}");
  agent_api::Info want{
      "storage-1", "0.1.0", "epoch-2", {ExpectedPool()}, {Protocol::kNvmeofTcp, Protocol::kNfs}};
  EXPECT_EQ(FromProto(m), want);
}

TEST(AgentProtoTest, VolumeAnswers) {
  EXPECT_EQ(FromProto(EveryFieldAnswer<av1::Volume>(kVolumeText)), ExpectedVolume());
  auto pools = EveryFieldAnswer<av1::GetCapacityResponse>(std::string("pools {") + kPoolText + "}");
  EXPECT_EQ(FromProto(pools), std::vector<agent_api::Pool>{ExpectedPool()});
}

TEST(AgentProtoTest, ExportAnswers) {
  EXPECT_EQ(FromProto(EveryFieldAnswer<av1::Export>(kExportText)), ExpectedExport());
  auto applied = EveryFieldAnswer<av1::ApplyExportResponse>(
      std::string("export {") + kExportText + "} changes: \"created\" changes: \"admitted a\"");
  agent_api::ApplyExportResult want{ExpectedExport(), {"created", "admitted a"}};
  EXPECT_EQ(FromProto(applied), want);
  auto listed = EveryFieldAnswer<av1::ListExportsResponse>(std::string("exports {") + kExportText +
                                                           "} exports {" + kExportText + "}");
  EXPECT_EQ(FromProto(listed),
            (std::vector<agent_api::Export>{ExpectedExport(), ExpectedExport()}));
  auto unexported = EveryFieldAnswer<av1::UnexportVolumeResponse>(R"pb(changes: "removed")pb");
  EXPECT_EQ(FromProto(unexported), std::vector<std::string>{"removed"});
}

TEST(AgentProtoTest, ApplyExportsCarriesEachItemAndAnswersEachOnItsOwn) {
  agent_api::ApplyExportRequest a;
  a.agent_volume_id = "tank/pvc-1";
  a.fence = {"uid-1", 1};
  agent_api::ApplyExportRequest b = a;
  b.agent_volume_id = "tank/pvc-2";
  auto m = ToProto(std::vector<agent_api::ApplyExportRequest>{a, b});
  ASSERT_EQ(m.exports_size(), 2);
  EXPECT_EQ(m.exports(1).agent_volume_id(), "tank/pvc-2");

  auto answer = Parse<av1::ApplyExportsResponse>(
      std::string("results { agent_volume_id: \"tank/pvc-1\" code: 0 message: \"\" export {") +
      kExportText +
      "} changes: \"created\" } results { agent_volume_id: \"tank/pvc-2\" code: 10 message: "
      "\"stale generation\" }");
  auto items = FromProto(answer, 2);
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_TRUE((*items)[0].status.ok());
  EXPECT_EQ((*items)[0].result, (agent_api::ApplyExportResult{ExpectedExport(), {"created"}}));
  EXPECT_EQ((*items)[1].status.code(), Code::kAborted);
  EXPECT_EQ((*items)[1].status.message(), "stale generation");

  // Another number of answers than items asked is no answer at all.
  EXPECT_EQ(FromProto(answer, 3).status().code(), Code::kInternal);
  // A code outside google.rpc.Code is never taken for one (ABORTED least).
  av1::ApplyExportsResponse odd;
  odd.add_results()->set_code(99);
  odd.add_results()->set_code(-10);
  auto odd_items = FromProto(odd, 2);
  ASSERT_TRUE(odd_items.ok());
  EXPECT_EQ((*odd_items)[0].status.code(), Code::kUnknown);
  EXPECT_EQ((*odd_items)[1].status.code(), Code::kUnknown);
  EXPECT_FALSE((*odd_items)[0].status.message().empty());
}

TEST(AgentProtoTest, WhatTheControllerDoesNotKnowIsLeftOut) {
  // No protocol, no mark: absent, not a default that means something.
  auto bare = FromProto(av1::Export());
  EXPECT_FALSE(bare.protocol.has_value());
  EXPECT_FALSE(bare.fence.has_value());
  av1::Export marked;
  marked.mutable_fence();  // a mark of no lifecycle is still a mark
  EXPECT_EQ(FromProto(marked).fence, agent_api::Fence{});

  av1::GetInfoResponse info;
  info.add_protocols(av1::PROTOCOL_ISCSI);
  info.add_protocols(av1::PROTOCOL_UNSPECIFIED);
  info.add_protocols(static_cast<av1::Protocol>(42));  // a newer agent's
  EXPECT_EQ(FromProto(info).protocols, std::vector<Protocol>{Protocol::kIscsi});

  av1::Pool pool;
  pool.add_modes(static_cast<av1::VolumeMode>(42));
  pool.add_modes(av1::VOLUME_MODE_BLOCK);
  EXPECT_EQ(FromProto(pool).modes,
            std::vector<agent_api::VolumeMode>{agent_api::VolumeMode::kBlock});
  EXPECT_FALSE(FromProto(av1::Volume()).mode.has_value());
}

}  // namespace
}  // namespace pillar::controller
