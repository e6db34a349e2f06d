// CSI snapshots, restores and clones (csi_snapshots.cc), called directly over
// the real SQLite store, the real reconciler and a scripted agent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "controller/csi_fixture.h"

namespace pillar::controller::testing {
namespace {

using csi::v1::VolumeCapability;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CsiSnapshotTest : public CsiFixture {
 protected:
  static csi::v1::CreateVolumeRequest VolumeRequest(const std::string& name, int64_t bytes,
                                                    const std::string& protocol = "nvmeof-tcp",
                                                    const std::string& pool = "tank") {
    csi::v1::CreateVolumeRequest req;
    req.set_name(name);
    req.mutable_capacity_range()->set_required_bytes(bytes);
    auto* cap = req.add_volume_capabilities();
    if (protocol == "nfs") {
      cap->mutable_mount();
    } else {
      cap->mutable_block();
    }
    cap->mutable_access_mode()->set_mode(VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    (*req.mutable_parameters())["agent"] = kAgentRef;
    (*req.mutable_parameters())["pool"] = pool;
    (*req.mutable_parameters())["protocol"] = protocol;
    return req;
  }

  grpc::Status MakeVolume(const csi::v1::CreateVolumeRequest& req,
                          csi::v1::CreateVolumeResponse* out = nullptr) {
    csi::v1::CreateVolumeResponse ignored;
    return csi_->CreateVolume(nullptr, &req, out != nullptr ? out : &ignored);
  }

  grpc::Status Snap(const std::string& name, const std::string& source,
                    csi::v1::CreateSnapshotResponse* out = nullptr,
                    std::map<std::string, std::string> params = {}) {
    csi::v1::CreateSnapshotRequest req;
    req.set_name(name);
    req.set_source_volume_id(source);
    for (auto& [k, v] : params) (*req.mutable_parameters())[k] = v;
    csi::v1::CreateSnapshotResponse ignored;
    return csi_->CreateSnapshot(nullptr, &req, out != nullptr ? out : &ignored);
  }

  grpc::Status DeleteSnap(const std::string& id) {
    csi::v1::DeleteSnapshotRequest req;
    req.set_snapshot_id(id);
    csi::v1::DeleteSnapshotResponse resp;
    return csi_->DeleteSnapshot(nullptr, &req, &resp);
  }

  std::vector<std::string> Listed(const std::string& source = "", const std::string& id = "") {
    csi::v1::ListSnapshotsRequest req;
    req.set_source_volume_id(source);
    req.set_snapshot_id(id);
    csi::v1::ListSnapshotsResponse resp;
    grpc::Status s = csi_->ListSnapshots(nullptr, &req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> out;
    for (const auto& e : resp.entries()) out.push_back(e.snapshot().snapshot_id());
    return out;
  }

  api::SnapshotRecord SnapshotRecord(const std::string& id) {
    auto rec = api::LoadSnapshot(Get(api::kKindSnapshot, id));
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    return rec.ok() ? *rec : api::SnapshotRecord{};
  }
};

TEST_F(CsiSnapshotTest, CreateSnapshotRecordsItTakesItOnTheSourcesAgentAndIsIdempotent) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", 2 * kGiB)).ok());
  const std::string volume_uid = Get(api::kKindVolume, "pvc-a").uid;

  csi::v1::CreateSnapshotResponse resp;
  grpc::Status s = Snap("snapshot-1", "pvc-a", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.snapshot().snapshot_id(), "snapshot-1");
  EXPECT_EQ(resp.snapshot().source_volume_id(), "pvc-a");
  EXPECT_EQ(resp.snapshot().size_bytes(), 2 * kGiB) << "the real size, never 0";
  EXPECT_TRUE(resp.snapshot().ready_to_use());
  EXPECT_GT(resp.snapshot().creation_time().seconds(), 0);

  api::SnapshotRecord rec = SnapshotRecord("snapshot-1");
  EXPECT_EQ(rec.spec.agent_ref, kAgentRef);
  EXPECT_EQ(rec.spec.agent_snapshot_id, "tank/snapshot-1");
  EXPECT_EQ(rec.spec.source_volume_uid, volume_uid);
  EXPECT_EQ(rec.spec.volume_mode, "block");
  EXPECT_TRUE(rec.status.ready_to_use);
  EXPECT_EQ(rec.status.size_bytes, 2 * kGiB);
  auto taken = agent_->SnapshotOf("tank/snapshot-1");
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->owner_uid, rec.meta.uid) << "marked with the record's lifecycle";

  // Retried: the same lifecycle, one snapshot on the agent.
  const int creates = agent_->Calls(AgentCall::kCreateSnapshot);
  ASSERT_TRUE(Snap("snapshot-1", "pvc-a").ok());
  EXPECT_EQ(Get(api::kKindSnapshot, "snapshot-1").uid, rec.meta.uid);
  EXPECT_EQ(agent_->Calls(AgentCall::kCreateSnapshot), creates) << "a confirmed one is answered";

  // The same name from another source: ALREADY_EXISTS, nothing changes.
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-b", kGiB)).ok());
  EXPECT_EQ(Snap("snapshot-1", "pvc-b").error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(SnapshotRecord("snapshot-1").spec.source_volume_id, "pvc-a");
}

TEST_F(CsiSnapshotTest, BadRequestsAndRefusalsRecordNothingAndAnUnreachableAgentKeepsTheRecord) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", kGiB)).ok());
  EXPECT_EQ(Snap("", "pvc-a").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Snap("snap-x", "").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Snap("snap-x", "pvc-missing").error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status bad = Snap("snap-x", "pvc-a", nullptr, {{"compression", "lz4"}});
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("parameters.compression"));
  EXPECT_EQ(Snap("snap-x", "pvc-a", nullptr, {{"detached", "yes"}}).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(store().Get(api::kKindSnapshot, "snap-x").status().code(), Code::kNotFound);
  // The sidecar's own metadata keys are not ours to judge.
  EXPECT_TRUE(
      Snap("snap-meta", "pvc-a", nullptr, {{"csi.storage.k8s.io/volumesnapshot/name", "backup"}})
          .ok());

  // The agent refuses (linear LVM has no snapshots): the record goes.
  agent_->FailWith(AgentCall::kCreateSnapshot,
                   FailedPrecondition("lvm pool vg: linear LVs have no snapshots"));
  grpc::Status refused = Snap("snap-x", "pvc-a");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("linear LVs"));
  EXPECT_EQ(store().Get(api::kKindSnapshot, "snap-x").status().code(), Code::kNotFound);

  // Unreachable: the record stays (Creating), is listed nowhere, and the
  // retry completes it with the same lifecycle.
  agent_->FailWith(AgentCall::kCreateSnapshot, Unavailable("agent unreachable"));
  EXPECT_EQ(Snap("snap-x", "pvc-a").error_code(), grpc::StatusCode::UNAVAILABLE);
  const std::string uid = Get(api::kKindSnapshot, "snap-x").uid;
  EXPECT_FALSE(api::SnapshotConfirmed(SnapshotRecord("snap-x").status));
  EXPECT_THAT(Listed("pvc-a"), ElementsAre("snap-meta"));
  agent_->ClearFailure(AgentCall::kCreateSnapshot);
  ASSERT_TRUE(Snap("snap-x", "pvc-a").ok());
  EXPECT_EQ(Get(api::kKindSnapshot, "snap-x").uid, uid);
  EXPECT_EQ(agent_->SnapshotOf("tank/snap-x")->owner_uid, uid);
}

TEST_F(CsiSnapshotTest, DeleteSnapshotLeavesEveryListingAtOnceAndIsIdempotent) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", kGiB)).ok());
  ASSERT_TRUE(Snap("snap-1", "pvc-a").ok());
  ASSERT_THAT(Listed(), ElementsAre("snap-1"));

  // The agent cannot be reached: the CO is told (it retries), and the
  // snapshot is already out of every listing and cannot be restored.
  agent_->FailWith(AgentCall::kDeleteSnapshot, Unavailable("agent unreachable"));
  EXPECT_EQ(DeleteSnap("snap-1").error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(SnapshotRecord("snap-1").status.deleting);
  EXPECT_THAT(Listed(), IsEmpty());
  auto restore = VolumeRequest("pvc-r", kGiB);
  restore.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  EXPECT_EQ(MakeVolume(restore).error_code(), grpc::StatusCode::NOT_FOUND);

  agent_->ClearFailure(AgentCall::kDeleteSnapshot);
  ASSERT_TRUE(DeleteSnap("snap-1").ok());
  EXPECT_EQ(store().Get(api::kKindSnapshot, "snap-1").status().code(), Code::kNotFound);
  EXPECT_FALSE(agent_->SnapshotOf("tank/snap-1").has_value());
  EXPECT_TRUE(DeleteSnap("snap-1").ok()) << "a deleted snapshot deletes again";
  EXPECT_TRUE(DeleteSnap("never-was").ok());
  EXPECT_EQ(DeleteSnap("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CsiSnapshotTest, ListSnapshotsFiltersBySourceAndIdAndPagesInNameOrder) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", kGiB)).ok());
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-b", kGiB)).ok());
  for (const char* n : {"snap-3", "snap-1", "snap-2"}) ASSERT_TRUE(Snap(n, "pvc-a").ok());
  ASSERT_TRUE(Snap("snap-4", "pvc-b").ok());

  EXPECT_THAT(Listed(), ElementsAre("snap-1", "snap-2", "snap-3", "snap-4"));
  EXPECT_THAT(Listed("pvc-b"), ElementsAre("snap-4"));
  EXPECT_THAT(Listed("", "snap-2"), ElementsAre("snap-2"));
  EXPECT_THAT(Listed("", "no-such-snapshot"), IsEmpty()) << "an unknown ID lists nothing";
  EXPECT_THAT(Listed("pvc-b", "snap-2"), IsEmpty());

  csi::v1::ListSnapshotsRequest req;
  req.set_max_entries(3);
  csi::v1::ListSnapshotsResponse page1;
  ASSERT_TRUE(csi_->ListSnapshots(nullptr, &req, &page1).ok());
  ASSERT_EQ(page1.entries_size(), 3);
  ASSERT_FALSE(page1.next_token().empty());
  req.set_starting_token(page1.next_token());
  csi::v1::ListSnapshotsResponse page2;
  ASSERT_TRUE(csi_->ListSnapshots(nullptr, &req, &page2).ok());
  ASSERT_EQ(page2.entries_size(), 1);
  EXPECT_EQ(page2.entries(0).snapshot().snapshot_id(), "snap-4");
  EXPECT_TRUE(page2.next_token().empty());

  req.set_starting_token("bogus");
  csi::v1::ListSnapshotsResponse bad;
  EXPECT_EQ(csi_->ListSnapshots(nullptr, &req, &bad).error_code(), grpc::StatusCode::ABORTED);
  req.set_starting_token("");
  req.set_max_entries(-1);
  EXPECT_EQ(csi_->ListSnapshots(nullptr, &req, &bad).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CsiSnapshotTest, RestoreAsksTheAgentForACopyOfTheSnapshotAndRecordsItsOrigin) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", 2 * kGiB)).ok());
  ASSERT_TRUE(Snap("snap-1", "pvc-a").ok());
  const std::string snap_uid = Get(api::kKindSnapshot, "snap-1").uid;

  // Asked for less than the snapshot holds (or nothing): the snapshot's size.
  auto req = VolumeRequest("pvc-r", kGiB);
  req.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  csi::v1::CreateVolumeResponse resp;
  grpc::Status s = MakeVolume(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.volume().capacity_bytes(), 2 * kGiB);
  EXPECT_EQ(resp.volume().content_source().snapshot().snapshot_id(), "snap-1");
  const auto create = agent_->Creates().back();
  ASSERT_TRUE(create.source.has_value());
  EXPECT_EQ(create.source->agent_snapshot_id, "tank/snap-1");
  EXPECT_EQ(create.source->source_uid, snap_uid);
  EXPECT_FALSE(create.source->detached);
  auto v = Volume("pvc-r");
  ASSERT_TRUE(v.spec.content_source.has_value());
  EXPECT_EQ(v.spec.content_source->snapshot_id, "snap-1");
  EXPECT_EQ(v.spec.content_source->uid, snap_uid);
  EXPECT_EQ(agent_->VolumeOf("tank/pvc-r")->origin, "snapshot tank/snap-1");
  EXPECT_EQ(Condition("pvc-r"), "True/Reconciled");

  // Into a larger size, detached on request.
  auto big = VolumeRequest("pvc-big", 5 * kGiB);
  (*big.mutable_parameters())["detached"] = "true";
  big.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  ASSERT_TRUE(MakeVolume(big, &resp).ok());
  EXPECT_EQ(resp.volume().capacity_bytes(), 5 * kGiB);
  EXPECT_TRUE(agent_->Creates().back().source->detached);

  // The same name again with another source, or none: ALREADY_EXISTS.
  ASSERT_TRUE(Snap("snap-2", "pvc-a").ok());
  auto other = req;
  other.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-2");
  EXPECT_EQ(MakeVolume(other).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  auto none = req;
  none.clear_volume_content_source();
  EXPECT_EQ(MakeVolume(none).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(MakeVolume(req).ok()) << "the same request is idempotent";
}

TEST_F(CsiSnapshotTest, ARestoreThatCannotWorkIsRefusedBeforeAnythingIsRecorded) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", 2 * kGiB)).ok());
  ASSERT_TRUE(Snap("snap-1", "pvc-a").ok());
  agent_->AddPool("other", 100 * kGiB, 40 * kGiB);

  auto expect_refused = [&](csi::v1::CreateVolumeRequest req, grpc::StatusCode code,
                            const std::string& says) {
    grpc::Status s = MakeVolume(req);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(says));
    EXPECT_EQ(store().Get(api::kKindVolume, req.name()).status().code(), Code::kNotFound);
  };
  auto missing = VolumeRequest("pvc-r1", kGiB);
  missing.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-none");
  expect_refused(missing, grpc::StatusCode::NOT_FOUND, "snap-none");

  auto other_pool = VolumeRequest("pvc-r2", kGiB, "nvmeof-tcp", "other");
  other_pool.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  expect_refused(other_pool, grpc::StatusCode::INVALID_ARGUMENT, "pool tank");

  auto as_nfs = VolumeRequest("pvc-r3", kGiB, "nfs");
  as_nfs.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  expect_refused(as_nfs, grpc::StatusCode::INVALID_ARGUMENT, "block");

  auto too_small = VolumeRequest("pvc-r4", kGiB);
  too_small.mutable_capacity_range()->set_limit_bytes(kGiB);
  too_small.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  expect_refused(too_small, grpc::StatusCode::OUT_OF_RANGE, "limit_bytes");

  auto empty_id = VolumeRequest("pvc-r5", kGiB);
  empty_id.mutable_volume_content_source()->mutable_snapshot();
  expect_refused(empty_id, grpc::StatusCode::INVALID_ARGUMENT, "snapshot_id");
  EXPECT_EQ(agent_->Creates().size(), 1u) << "only pvc-a's create reached the agent";
}

TEST_F(CsiSnapshotTest, CloneCopiesAVolumeOfTheSamePoolAndAccessType) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", 2 * kGiB)).ok());
  const std::string source_uid = Get(api::kKindVolume, "pvc-a").uid;
  auto req = VolumeRequest("pvc-c", 3 * kGiB);
  req.mutable_volume_content_source()->mutable_volume()->set_volume_id("pvc-a");
  csi::v1::CreateVolumeResponse resp;
  grpc::Status s = MakeVolume(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.volume().capacity_bytes(), 3 * kGiB);
  EXPECT_EQ(resp.volume().content_source().volume().volume_id(), "pvc-a");
  const auto create = agent_->Creates().back();
  ASSERT_TRUE(create.source.has_value());
  EXPECT_EQ(create.source->agent_volume_id, "tank/pvc-a");
  EXPECT_EQ(create.source->source_uid, source_uid);
  EXPECT_EQ(Volume("pvc-c").spec.content_source->volume_id, "pvc-a");

  auto missing = VolumeRequest("pvc-c2", kGiB);
  missing.mutable_volume_content_source()->mutable_volume()->set_volume_id("pvc-none");
  EXPECT_EQ(MakeVolume(missing).error_code(), grpc::StatusCode::NOT_FOUND);
  auto as_mount = VolumeRequest("pvc-c3", kGiB);
  as_mount.mutable_volume_capabilities(0)->mutable_mount();
  as_mount.mutable_volume_content_source()->mutable_volume()->set_volume_id("pvc-a");
  EXPECT_EQ(MakeVolume(as_mount).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// The reconciler knows snapshots: one that left the storage is SnapshotMissing
// (not ready, not restorable), an unreachable agent is AgentUnavailable, a
// delete the CO left half done is finished.
TEST_F(CsiSnapshotTest, TheResyncReportsWhatTheAgentHoldsAndFinishesWhatWasLeftHalfDone) {
  ASSERT_TRUE(MakeVolume(VolumeRequest("pvc-a", kGiB)).ok());
  for (const char* n : {"snap-1", "snap-2", "snap-3"}) ASSERT_TRUE(Snap(n, "pvc-a").ok());

  SnapshotResyncStats stats = reconciler_->ResyncSnapshots();
  EXPECT_EQ(stats.snapshots, 3);
  EXPECT_EQ(stats.status_writes, 0) << "nothing changed, nothing written";

  agent_->DropSnapshot("tank/snap-1");  // removed by hand on the storage node
  stats = reconciler_->ResyncSnapshots();
  EXPECT_EQ(stats.status_writes, 1);
  auto missing = SnapshotRecord("snap-1");
  EXPECT_FALSE(missing.status.ready_to_use);
  const api::Condition* c = api::FindCondition(missing.status.conditions, api::kCondSnapshotReady);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status + "/" + c->reason, "False/SnapshotMissing");
  EXPECT_THAT(c->message, HasSubstr("tank/snap-1"));
  auto restore = VolumeRequest("pvc-r", kGiB);
  restore.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id("snap-1");
  EXPECT_EQ(MakeVolume(restore).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(reconciler_->ResyncSnapshots().status_writes, 0) << "written once, on the change";

  agent_->FailWith(AgentCall::kListSnapshots, Unavailable("agent unreachable"));
  reconciler_->ResyncSnapshots();
  auto cond_of = [&](const std::string& id) {
    auto rec = SnapshotRecord(id);
    const api::Condition* r = api::FindCondition(rec.status.conditions, api::kCondSnapshotReady);
    return r == nullptr ? std::string("none") : r->status + "/" + r->reason;
  };
  EXPECT_EQ(cond_of("snap-2"), "Unknown/AgentUnavailable");
  agent_->ClearFailure(AgentCall::kListSnapshots);
  reconciler_->ResyncSnapshots();
  EXPECT_EQ(cond_of("snap-2"), "True/Created");

  // A delete whose agent call failed, never retried by the CO: finished.
  agent_->FailWith(AgentCall::kDeleteSnapshot, Unavailable("agent unreachable"));
  EXPECT_FALSE(DeleteSnap("snap-3").ok());
  agent_->ClearFailure(AgentCall::kDeleteSnapshot);
  stats = reconciler_->ResyncSnapshots();
  EXPECT_EQ(stats.deletes_finished, 1);
  EXPECT_EQ(store().Get(api::kKindSnapshot, "snap-3").status().code(), Code::kNotFound);
  EXPECT_FALSE(agent_->SnapshotOf("tank/snap-3").has_value());
}

}  // namespace
}  // namespace pillar::controller::testing
