// CSI Identity + Controller: records intent in the store, drives the agents
// for backend volumes, and confirms every ACL change through the reconciler.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/credentials.h"
#include "common/named_locks.h"
#include "controller/agent_api.h"
#include "controller/leader.h"
#include "controller/reconciler.h"
#include "controller/requests.h"
#include "csi/v1/csi.grpc.pb.h"
#include "store/store.h"

namespace pillar::controller {

class CsiIdentity final : public csi::v1::Identity::Service {
 public:
  explicit CsiIdentity(LeaderGate& leader) : leader_(leader) {}
  grpc::Status GetPluginInfo(grpc::ServerContext*, const csi::v1::GetPluginInfoRequest*,
                             csi::v1::GetPluginInfoResponse* resp) override;
  grpc::Status GetPluginCapabilities(grpc::ServerContext*,
                                     const csi::v1::GetPluginCapabilitiesRequest*,
                                     csi::v1::GetPluginCapabilitiesResponse* resp) override;
  grpc::Status Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                     csi::v1::ProbeResponse* resp) override;

 private:
  LeaderGate& leader_;
};

class CsiController final : public csi::v1::Controller::Service {
 public:
  CsiController(store::Store& store, AgentDirectory& agents, ExportReconciler& reconciler,
                LeaderGate& leader, Clock& clock)
      : store_(store), agents_(agents), reconciler_(reconciler), leader_(leader), clock_(clock) {}

  grpc::Status CreateVolume(grpc::ServerContext*, const csi::v1::CreateVolumeRequest* req,
                            csi::v1::CreateVolumeResponse* resp) override;
  grpc::Status DeleteVolume(grpc::ServerContext*, const csi::v1::DeleteVolumeRequest* req,
                            csi::v1::DeleteVolumeResponse* resp) override;
  grpc::Status ControllerPublishVolume(grpc::ServerContext*,
                                       const csi::v1::ControllerPublishVolumeRequest* req,
                                       csi::v1::ControllerPublishVolumeResponse* resp) override;
  grpc::Status ControllerUnpublishVolume(grpc::ServerContext*,
                                         const csi::v1::ControllerUnpublishVolumeRequest* req,
                                         csi::v1::ControllerUnpublishVolumeResponse* resp) override;
  grpc::Status ValidateVolumeCapabilities(
      grpc::ServerContext*, const csi::v1::ValidateVolumeCapabilitiesRequest* req,
      csi::v1::ValidateVolumeCapabilitiesResponse* resp) override;
  grpc::Status ListVolumes(grpc::ServerContext*, const csi::v1::ListVolumesRequest* req,
                           csi::v1::ListVolumesResponse* resp) override;
  grpc::Status GetCapacity(grpc::ServerContext*, const csi::v1::GetCapacityRequest* req,
                           csi::v1::GetCapacityResponse* resp) override;
  grpc::Status ControllerGetCapabilities(grpc::ServerContext*,
                                         const csi::v1::ControllerGetCapabilitiesRequest*,
                                         csi::v1::ControllerGetCapabilitiesResponse* resp) override;
  grpc::Status ControllerExpandVolume(grpc::ServerContext*,
                                      const csi::v1::ControllerExpandVolumeRequest* req,
                                      csi::v1::ControllerExpandVolumeResponse* resp) override;
  grpc::Status ControllerGetVolume(grpc::ServerContext*,
                                   const csi::v1::ControllerGetVolumeRequest* req,
                                   csi::v1::ControllerGetVolumeResponse* resp) override;
  // Snapshots (csi_snapshots.cc): recorded as PillarSnapshot objects first,
  // then taken by the source volume's agent.
  grpc::Status CreateSnapshot(grpc::ServerContext*, const csi::v1::CreateSnapshotRequest* req,
                              csi::v1::CreateSnapshotResponse* resp) override;
  grpc::Status DeleteSnapshot(grpc::ServerContext*, const csi::v1::DeleteSnapshotRequest* req,
                              csi::v1::DeleteSnapshotResponse* resp) override;
  grpc::Status ListSnapshots(grpc::ServerContext*, const csi::v1::ListSnapshotsRequest* req,
                             csi::v1::ListSnapshotsResponse* resp) override;

 private:
  Status DoCreate(const csi::v1::CreateVolumeRequest& req, csi::v1::Volume* out);
  Status DoDelete(const std::string& volume_id);
  Status OfferPublishSecrets(const api::VolumeState& v,
                             const google::protobuf::Map<std::string, std::string>& secrets);
  Status DoPublish(const csi::v1::ControllerPublishVolumeRequest& req,
                   csi::v1::ControllerPublishVolumeResponse* resp);
  Status DoUnpublish(const std::string& volume_id, const std::string& node_id);
  Status DoExpand(const csi::v1::ControllerExpandVolumeRequest& req,
                  csi::v1::ControllerExpandVolumeResponse* resp);
  Status DoCreateSnapshot(const csi::v1::CreateSnapshotRequest& req, csi::v1::Snapshot* out);
  Status DoDeleteSnapshot(const std::string& snapshot_id);
  // A CreateVolume's content source, checked against the volume to make
  // (same agent and pool, same volume mode, a size that holds it): the
  // source as recorded in spec.contentSource, and the size to ask for.
  struct ResolvedSource {
    api::ContentSource recorded;
    agent_api::VolumeSource request;
    int64_t size_bytes = 0;
  };
  StatusOr<ResolvedSource> ResolveSource(const CreatePlan& plan, const std::string& access_type,
                                         int64_t size_bytes, const csi::v1::CapacityRange& range);
  StatusOr<store::Object> MutateSnapshotStatus(
      const std::string& snapshot_id, const std::function<Status(api::SnapshotStatus&)>& mutate);
  // Applies `mutate` to the pvst status with CAS retries.
  StatusOr<store::Object> MutateStatus(const std::string& volume_id,
                                       const std::function<Status(api::VolumeStatus&)>& mutate);
  StatusOr<std::shared_ptr<AgentClient>> ClientFor(const std::string& agent_ref,
                                                   api::AgentRecord* record = nullptr);
  Status RequireLeader();

  store::Store& store_;
  AgentDirectory& agents_;
  ExportReconciler& reconciler_;
  LeaderGate& leader_;
  Clock& clock_;
  NamedLocks locks_;  // one CSI operation per volume at a time
};

}  // namespace pillar::controller
