// gRPC edge of the agent: translates agent.proto to AgentCore calls and
// Status to gRPC codes. No logic lives here.
#pragma once

#include "agent/agent_core.h"
#include "pillar/agent/v1/agent.grpc.pb.h"

namespace pillar::agent {

class AgentService final : public pillar::agent::v1::Agent::Service {
 public:
  explicit AgentService(AgentCore& core) : core_(core) {}

  grpc::Status GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest* req,
                       v1::GetInfoResponse* resp) override;
  grpc::Status CreateVolume(grpc::ServerContext* ctx, const v1::CreateVolumeRequest* req,
                            v1::CreateVolumeResponse* resp) override;
  grpc::Status ExpandVolume(grpc::ServerContext* ctx, const v1::ExpandVolumeRequest* req,
                            v1::ExpandVolumeResponse* resp) override;
  grpc::Status DeleteVolume(grpc::ServerContext* ctx, const v1::DeleteVolumeRequest* req,
                            v1::DeleteVolumeResponse* resp) override;
  grpc::Status ListVolumes(grpc::ServerContext* ctx, const v1::ListVolumesRequest* req,
                           v1::ListVolumesResponse* resp) override;
  grpc::Status GetCapacity(grpc::ServerContext* ctx, const v1::GetCapacityRequest* req,
                           v1::GetCapacityResponse* resp) override;
  grpc::Status ApplyExport(grpc::ServerContext* ctx, const v1::ApplyExportRequest* req,
                           v1::ApplyExportResponse* resp) override;
  grpc::Status ApplyExports(grpc::ServerContext* ctx, const v1::ApplyExportsRequest* req,
                            v1::ApplyExportsResponse* resp) override;
  grpc::Status GetExport(grpc::ServerContext* ctx, const v1::GetExportRequest* req,
                         v1::GetExportResponse* resp) override;
  grpc::Status ListExports(grpc::ServerContext* ctx, const v1::ListExportsRequest* req,
                           v1::ListExportsResponse* resp) override;
  grpc::Status UnexportVolume(grpc::ServerContext* ctx, const v1::UnexportVolumeRequest* req,
                              v1::UnexportVolumeResponse* resp) override;
  grpc::Status CreateSnapshot(grpc::ServerContext* ctx, const v1::CreateSnapshotRequest* req,
                              v1::CreateSnapshotResponse* resp) override;
  grpc::Status DeleteSnapshot(grpc::ServerContext* ctx, const v1::DeleteSnapshotRequest* req,
                              v1::DeleteSnapshotResponse* resp) override;
  grpc::Status ListSnapshots(grpc::ServerContext* ctx, const v1::ListSnapshotsRequest* req,
                             v1::ListSnapshotsResponse* resp) override;

  // The most items one ApplyExports carries (about 3 MB of requests).
  static constexpr int kMaxApplyExports = 10000;

 private:
  AgentCore& core_;
};

}  // namespace pillar::agent
