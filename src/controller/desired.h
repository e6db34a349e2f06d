// The reconciler's desired state for one volume, derived only from the
// recorded intent: status.exportSpec plus the identities of the non-revoking
// published nodes, resolved through the current PillarNode records.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/credentials.h"
#include "common/protocol.h"
#include "controller/agent_api.h"

namespace pillar::controller {

struct DesiredExport {
  Protocol protocol = Protocol::kNvmeofTcp;
  api::ExportSpec spec;            // port resolved (0 means the protocol default)
  std::vector<std::string> hosts;  // sorted, unique; empty when ACL is off
};

using NodeLookup = std::function<const api::NodeRecord*(const std::string& node_id)>;

// FAILED_PRECONDITION when there is no exportSpec (the caller reports
// ExportSpecMissing) or when a published node cannot be resolved to an
// identity: the ACL is then unknowable and nothing may be applied, since
// applying a partial set would drop that node's entry.
StatusOr<DesiredExport> ComputeDesired(const api::VolumeState& volume, const NodeLookup& nodes);

// Human-readable differences; empty when the actual export is exactly desired.
std::vector<std::string> Diff(const DesiredExport& want, const agent_api::Export* actual);

// True when the agent's fencing mark is not this lifecycle's current
// publication generation (no export, another uid, an older generation): the
// export is re-applied even when it looks right, so the mark catches up.
bool FenceBehind(const api::VolumeState& volume, const agent_api::Export* actual);

// The target a volume's consumers are told to use, derived by the controller
// from the recorded intent, never taken from the agent: for NVMe-oF and iSCSI
// the name pillar gives the volume's subsystem / target (TargetName of the
// agent's prefix, from its PillarAgent, and the agent volume id), which the
// agent's report must equal; for NFS the export path, which only the agent's
// pool layout knows, so its report is taken only when it is a plain absolute
// path. FAILED_PRECONDITION naming both when the report is not that.
StatusOr<std::string> TargetIdFor(const api::VolumeState& volume, const api::AgentRecord& agent,
                                  const std::string& reported);

// The ExportReconciled reason for a failed agent call: ABORTED is a fencing
// refusal (StaleGeneration), UNAVAILABLE / DEADLINE_EXCEEDED an unreachable
// agent (AgentUnavailable), anything else ReconcileFailed.
const char* ReasonForAgentError(const Status& s);

// Whether an agent's DeleteVolume answer leaves nothing of a volume's
// lifecycle on the agent, so its record may go: NOT_FOUND (nothing was
// made), or, for a create the agent never confirmed (Provisioned=False),
// FAILED_PRECONDITION / ABORTED (what holds the name is not this
// lifecycle's, not pillar's or another record's, and the agent left it
// alone). Anything else means storage of this lifecycle may remain.
bool NothingOfThisLifecycleLeft(const Status& deleted, bool provisioned);

// The ApplyExport that converges the volume's export to `want`, fenced by its
// uid and publication generation; `credentials`, when given, travel in the
// request's secret field.
agent_api::ApplyExportRequest MakeApplyRequest(const api::VolumeState& volume,
                                               const DesiredExport& want,
                                               const Credentials* credentials = nullptr);

}  // namespace pillar::controller
