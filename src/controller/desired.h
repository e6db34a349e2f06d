// The reconciler's desired state for one volume, derived only from the
// recorded intent: status.exportSpec plus the identities of the non-revoking
// published nodes, resolved through the current PillarNode records.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "controller/model.h"
#include "pillar/agent/v1/agent.pb.h"

namespace pillar::controller {

struct DesiredExport {
  pillar::agent::v1::Protocol protocol = pillar::agent::v1::PROTOCOL_UNSPECIFIED;
  ExportSpec spec;                 // port resolved (0 means the protocol default)
  std::vector<std::string> hosts;  // sorted, unique; empty when ACL is off
};

StatusOr<pillar::agent::v1::Protocol> ProtocolFromString(const std::string& p);
int64_t DefaultPort(pillar::agent::v1::Protocol p);

using NodeLookup = std::function<const NodeRecord*(const std::string& node_id)>;

// FAILED_PRECONDITION when there is no exportSpec (the caller reports
// ExportSpecMissing) or when a published node cannot be resolved to an
// identity: the ACL is then unknowable and nothing may be applied, since
// applying a partial set would drop that node's entry.
StatusOr<DesiredExport> ComputeDesired(const VolumeState& volume, const NodeLookup& nodes);

// Human-readable differences; empty when the actual export is exactly desired.
std::vector<std::string> Diff(const DesiredExport& want, const pillar::agent::v1::Export* actual);

pillar::agent::v1::ApplyExportRequest MakeApplyRequest(const VolumeState& volume,
                                                       const DesiredExport& want);

}  // namespace pillar::controller
