// The one translation between the controller's agent types (agent_api.h) and
// agent.proto, used only by the gRPC client (agent_client.cc): requests go
// out as protobuf, answers come back as pillar types.
#pragma once

#include <string>
#include <vector>

#include "controller/agent_api.h"
#include "pillar/agent/v1/agent.pb.h"

namespace pillar::controller {

pillar::agent::v1::CreateVolumeRequest ToProto(const agent_api::CreateVolumeRequest& r);
pillar::agent::v1::ExpandVolumeRequest ToProto(const agent_api::ExpandVolumeRequest& r);
pillar::agent::v1::DeleteVolumeRequest ToProto(const agent_api::DeleteVolumeRequest& r);
pillar::agent::v1::ApplyExportRequest ToProto(const agent_api::ApplyExportRequest& r);
pillar::agent::v1::UnexportVolumeRequest ToProto(const agent_api::UnexportVolumeRequest& r);
pillar::agent::v1::CreateSnapshotRequest ToProto(const agent_api::CreateSnapshotRequest& r);
pillar::agent::v1::DeleteSnapshotRequest ToProto(const agent_api::DeleteSnapshotRequest& r);
pillar::agent::v1::ListSnapshotsRequest ListSnapshotsRequestProto(const std::string& pool);
pillar::agent::v1::GetCapacityRequest GetCapacityRequestProto(const std::string& pool);
pillar::agent::v1::GetExportRequest GetExportRequestProto(const std::string& agent_volume_id,
                                                          Protocol protocol);

// Answers. Enum values this controller does not know are left out (see
// agent_api.h), never an error: what the controller needs of them is checked
// where it is used.
agent_api::Info FromProto(const pillar::agent::v1::GetInfoResponse& m);
agent_api::Volume FromProto(const pillar::agent::v1::Volume& m);
agent_api::Pool FromProto(const pillar::agent::v1::Pool& m);
agent_api::Export FromProto(const pillar::agent::v1::Export& m);
agent_api::ApplyExportResult FromProto(const pillar::agent::v1::ApplyExportResponse& m);
pillar::agent::v1::ApplyExportsRequest ToProto(
    const std::vector<agent_api::ApplyExportRequest>& rs);
// INTERNAL when the agent answered another number of items than it was asked.
StatusOr<std::vector<agent_api::ApplyExportItem>> FromProto(
    const pillar::agent::v1::ApplyExportsResponse& m, size_t asked);
std::vector<agent_api::Pool> FromProto(const pillar::agent::v1::GetCapacityResponse& m);
std::vector<agent_api::Export> FromProto(const pillar::agent::v1::ListExportsResponse& m);
std::vector<std::string> FromProto(const pillar::agent::v1::UnexportVolumeResponse& m);
agent_api::Snapshot FromProto(const pillar::agent::v1::Snapshot& m);
std::vector<agent_api::Snapshot> FromProto(const pillar::agent::v1::ListSnapshotsResponse& m);

}  // namespace pillar::controller
