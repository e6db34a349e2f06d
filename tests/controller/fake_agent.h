// A scripted storage-node agent for the controller's unit tests: it keeps
// exports, backend volumes and fencing marks in memory, fences ApplyExport
// the way the real agent does (an older generation or another lifecycle's uid
// is ABORTED), and lets a test inject failures, rewrite answers, hold calls
// and count them. Not linked into any product binary.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "controller/agent_api.h"

namespace pillar::controller::testing {

enum class AgentCall {
  kGetInfo,
  kCreateVolume,
  kExpandVolume,
  kDeleteVolume,
  kGetCapacity,
  kApplyExport,
  kApplyExports,
  kGetExport,
  kListExports,
  kUnexportVolume,
  kCreateSnapshot,
  kDeleteSnapshot,
  kListSnapshots,
};

class FakeAgent : public AgentClient {
 public:
  FakeAgent() = default;

  StatusOr<agent_api::Info> GetInfo() override;
  StatusOr<agent_api::Volume> CreateVolume(const agent_api::CreateVolumeRequest& r) override;
  StatusOr<agent_api::Volume> ExpandVolume(const agent_api::ExpandVolumeRequest& r) override;
  Status DeleteVolume(const agent_api::DeleteVolumeRequest& r) override;
  StatusOr<std::vector<agent_api::Pool>> GetCapacity(const std::string& pool) override;
  StatusOr<agent_api::ApplyExportResult> ApplyExport(
      const agent_api::ApplyExportRequest& r) override;
  // One call for the whole batch (counted as kApplyExports, each item
  // recorded in Applies()); a volume named twice is INVALID_ARGUMENT for
  // the whole call, as the real agent answers.
  StatusOr<std::vector<agent_api::ApplyExportItem>> ApplyExports(
      const std::vector<agent_api::ApplyExportRequest>& rs) override;
  StatusOr<agent_api::Export> GetExport(const std::string& agent_volume_id,
                                        Protocol protocol) override;
  StatusOr<std::vector<agent_api::Export>> ListExports() override;
  StatusOr<std::vector<std::string>> UnexportVolume(
      const agent_api::UnexportVolumeRequest& r) override;
  StatusOr<agent_api::Snapshot> CreateSnapshot(const agent_api::CreateSnapshotRequest& r) override;
  Status DeleteSnapshot(const agent_api::DeleteSnapshotRequest& r) override;
  StatusOr<std::vector<agent_api::Snapshot>> ListSnapshots(const std::string& pool) override;

  // --- Scripting -----------------------------------------------------------

  // Every later call of `call` fails with `s` (until ClearFailure).
  void FailWith(AgentCall call, Status s);
  void ClearFailure(AgentCall call);
  // Runs first in every call, outside the agent's lock: a test can write to
  // the store here (a concurrent writer) or count.
  void OnCall(std::function<void(AgentCall)> hook);
  // Edits what a successful ApplyExport leaves in place (and reports): an
  // agent whose apply did not take, e.g. an ACL entry the kernel kept.
  void RewriteApply(std::function<void(agent_api::Export&)> rewrite);
  // While held, every call waits (counted as in flight) until Release().
  void Hold();
  void Release();

  // --- State ---------------------------------------------------------------

  // Puts an export in place as if the kernel had it; its fence becomes the
  // volume's mark on disk.
  void SetExport(const agent_api::Export& e);
  std::optional<agent_api::Export> ExportOf(const std::string& agent_volume_id, Protocol p);
  // The kernel target state is lost (module reload, reboot); marks survive.
  void WipeExports();
  void SetBootEpoch(const std::string& epoch);
  void AddPool(const std::string& name, int64_t total_bytes, int64_t available_bytes);
  void AddVolume(const std::string& agent_volume_id, int64_t size_bytes);
  std::optional<agent_api::Volume> VolumeOf(const std::string& agent_volume_id);
  std::optional<agent_api::Snapshot> SnapshotOf(const std::string& agent_snapshot_id);
  // The snapshot is gone from the storage (deleted by hand).
  void DropSnapshot(const std::string& agent_snapshot_id);
  // The fencing mark of a volume: (uid, generation).
  std::optional<agent_api::Fence> MarkOf(const std::string& agent_volume_id);

  // --- Observation ---------------------------------------------------------

  int Calls(AgentCall call);
  int TotalCalls();
  int InFlight();
  int MaxInFlight();
  std::vector<agent_api::ApplyExportRequest> Applies();
  // The size of each ApplyExports call, in order.
  std::vector<size_t> Batches();
  std::vector<agent_api::CreateVolumeRequest> Creates();

 private:
  // Counts the call, runs the hook and waits while held (in flight meanwhile);
  // returns the scripted failure, if any.
  Status Enter(AgentCall call);
  static std::string Key(const std::string& agent_volume_id, Protocol p);
  // ABORTED when (uid, generation) is older than the mark or of another lifecycle.
  Status CheckFenceLocked(const std::string& agent_volume_id, const agent_api::Fence& fence);
  StatusOr<agent_api::ApplyExportResult> ApplyLocked(const agent_api::ApplyExportRequest& r);

  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::map<AgentCall, int> calls_;
  std::map<AgentCall, Status> failures_;
  std::function<void(AgentCall)> hook_;
  std::function<void(agent_api::Export&)> rewrite_apply_;
  std::vector<agent_api::ApplyExportRequest> applies_;
  std::vector<size_t> batches_;
  std::vector<agent_api::CreateVolumeRequest> creates_;

  std::string boot_epoch_ = "epoch-1";
  std::map<std::string, agent_api::Export> exports_;      // Key() -> export
  std::map<std::string, agent_api::Fence> marks_;         // agent volume id -> mark
  std::map<std::string, agent_api::Volume> volumes_;      // agent volume id -> volume
  std::map<std::string, agent_api::Snapshot> snapshots_;  // agent snapshot id -> snapshot
  int64_t clock_nanos_ = 1'700'000'000'000'000'000;
  std::vector<agent_api::Pool> pools_;
};

// Resolves agentRefs to FakeAgents; an unknown agent is UNAVAILABLE (nothing
// answers at its address).
class FakeAgentDirectory : public AgentDirectory {
 public:
  std::shared_ptr<FakeAgent> Add(const std::string& agent_ref);
  StatusOr<std::shared_ptr<AgentClient>> Client(const std::string& agent_ref,
                                                const AgentEndpoint& endpoint) override;
  int ClientCalls();
  std::optional<AgentEndpoint> LastEndpoint(const std::string& agent_ref);

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<FakeAgent>> agents_;
  std::map<std::string, AgentEndpoint> endpoints_;
  int client_calls_ = 0;
};

}  // namespace pillar::controller::testing
