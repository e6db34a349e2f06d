// The agent's logic, free of protobuf: pools, exporters and fencing marks
// behind one object that the gRPC service translates to and from.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/backends/backend.h"
#include "agent/credentials/credential_store.h"
#include "agent/exporters/exporter.h"
#include "agent/fencing/fencing_marks.h"
#include "common/named_locks.h"
#include "common/status.h"

namespace pillar::agent {

struct FenceToken {
  std::string volume_uid;
  int64_t publication_generation = 0;
  bool operator==(const FenceToken&) const = default;
};

// ApplyExport's arguments (see AgentCore::ApplyExport).
struct ApplyExportRequest {
  std::string agent_volume_id;  // "<pool>/<volume>"
  Protocol protocol = Protocol::kNvmeofTcp;
  ExportParams params;
  FenceToken fence;
  std::vector<std::string> allowed_hosts;
  std::optional<Credentials> credentials;
};

struct PoolInfo {
  std::string name;
  std::string backend;
  PoolCapacity capacity;
  std::vector<VolumeMode> modes;
};

struct SnapshotInfo {
  std::string agent_snapshot_id;  // "<pool>/<snapshot>"
  std::string pool;
  std::string backend;
  BackendSnapshot snapshot;
  std::string SourceVolumeId() const { return pool + "/" + snapshot.source_volume; }
};

// CreateVolume's source, as agent.proto's VolumeSource has it.
struct VolumeSourceRequest {
  std::string agent_snapshot_id;  // exactly one of these two
  std::string agent_volume_id;
  std::string source_uid;
  bool detached = false;
};

// CreateVolume's arguments (see AgentCore::CreateVolume).
struct CreateVolumeRequest {
  std::string pool;
  std::string name;
  int64_t size_bytes = 0;
  VolumeMode mode = VolumeMode::kFilesystem;
  std::string volume_uid;
  std::map<std::string, std::string> params;
  bool import_existing = false;
  std::optional<VolumeRoot> root;
  std::optional<VolumeSourceRequest> source;
};

// CreateSnapshot's arguments: the source must carry source_volume_uid's
// mark; the snapshot gets snapshot_uid's.
struct CreateSnapshotRequest {
  std::string source_volume_id;  // "<pool>/<volume>"
  std::string source_volume_uid;
  std::string name;
  std::string snapshot_uid;
  bool detached = false;
};

struct VolumeInfo {
  std::string agent_volume_id;
  std::string pool;
  std::string backend;
  BackendVolume volume;
  std::string volume_uid;  // from the fencing mark; empty when unmarked
};

// What ApplyExport / GetExport answer: the export the kernel has and the
// fencing mark it was written under (the controller's api::ExportInfo is the
// endpoint recorded for consumers, a different thing).
struct ExportReport {
  Protocol protocol = Protocol::kNvmeofTcp;
  ActualExport actual;
  std::optional<FenceToken> fence;
};

// One item's outcome in ApplyExports: what ApplyExport would have answered.
struct ApplyExportOutcome {
  Status status;
  std::optional<ExportReport> report;  // set when status is OK
  std::vector<std::string> changes;    // each kernel change made, in order
};

struct AgentInfo {
  std::string node_name;
  std::string version;
  std::string boot_epoch;
  std::vector<PoolInfo> pools;
  std::vector<Protocol> protocols;
};

struct AgentCoreOptions {
  std::string node_name;
  // Loads a protocol's kernel target when its configfs tree is absent
  // (modprobe on a real node, the simulator's Load in demos); null: never.
  std::function<Status(Protocol)> load_target;
  std::string nqn_prefix = kDefaultNqnPrefix;
  std::string iqn_prefix = kDefaultIqnPrefix;
  // Where auth=chap credentials are kept across restarts; null: auth=chap is
  // refused (FAILED_PRECONDITION).
  CredentialStore* credentials = nullptr;
};

class AgentCore {
 public:
  AgentCore(AgentCoreOptions options, FencingMarks& marks);

  // Registration happens before serving; not thread-safe with serving.
  void AddPool(std::unique_ptr<Backend> backend);
  void AddExporter(std::unique_ptr<Exporter> exporter);

  AgentInfo Info();

  // Storage ownership (backends/backend.h): Create adopts an existing object
  // only when it is marked as volume_uid's; `import_existing` marks an
  // existing unmarked object instead of creating one (logged; a missing one
  // is NOT_FOUND). Expand and Delete act only on volume_uid's storage. An
  // object of a pillar older than the marks carries none: the agent's
  // fencing mark of the same uid vouches for it, and it is marked then.
  // `root` goes to a new filesystem volume's root directory (Backend::Create);
  // existing storage, imported or not, keeps its own.
  StatusOr<VolumeInfo> CreateVolume(const CreateVolumeRequest& req);
  StatusOr<VolumeInfo> ExpandVolume(const std::string& agent_volume_id, int64_t size_bytes,
                                    const std::string& volume_uid);
  Status DeleteVolume(const std::string& agent_volume_id, const std::string& volume_uid);
  StatusOr<std::vector<VolumeInfo>> ListVolumes(const std::string& pool);
  StatusOr<std::vector<PoolInfo>> Capacity(const std::string& pool);

  // Snapshots (backends/backend.h).
  StatusOr<SnapshotInfo> CreateSnapshot(const CreateSnapshotRequest& req);
  Status DeleteSnapshot(const std::string& agent_snapshot_id, const std::string& snapshot_uid);
  StatusOr<std::vector<SnapshotInfo>> ListSnapshots(const std::string& pool);

  // Converges the kernel export of one volume to exactly (params, hosts),
  // fenced by `fence`. Never creates, formats or deletes backend storage.
  // With params.auth == kAuthChap, `credentials` must match params.auth_digest;
  // without them the copy kept by the CredentialStore is used if it matches.
  // What it changed is appended to `changes` (may be null).
  StatusOr<ExportReport> ApplyExport(const ApplyExportRequest& req,
                                     std::vector<std::string>* changes);
  // ApplyExport for many volumes (a rebuild, one controller pass): each item
  // validated and fenced on its own; one refused or failed item stops none of
  // the others. The batch holds every volume's lock while it applies, and
  // each exporter converges its volumes at once (NFS: one exportfs run for
  // the batch). A volume named twice answers INVALID_ARGUMENT the second
  // time. One outcome per item.
  std::vector<ApplyExportOutcome> ApplyExports(const std::vector<ApplyExportRequest>& reqs);
  StatusOr<ExportReport> GetExport(const std::string& agent_volume_id, Protocol protocol);
  StatusOr<std::vector<ExportReport>> ListExports();
  Status UnexportVolume(const std::string& agent_volume_id, Protocol protocol,
                        const FenceToken& fence, std::vector<std::string>* changes);

  // Re-applies every `protocol` export this process applied and was not
  // since withdrawn (UnexportVolume), each with the fence it was applied
  // with: a generation fenced since is refused like any stale writer. For a
  // kernel event (knfsd's export table rewritten) that the controller's
  // resync would only notice later. Returns how many volumes it changed.
  int RepairExports(Protocol protocol);

  // Compares every exporter's state token with the last one seen and starts
  // a new epoch when any changed (module reload, nfsd restart). Cheap; run
  // periodically and on every Info().
  void CheckTargetState();
  std::string BootEpoch();

 private:
  struct Split {
    std::string pool;
    std::string name;
  };
  StatusOr<Split> SplitId(const std::string& agent_volume_id);
  // INVALID_ARGUMENT naming the field for a malformed source or one in
  // another pool than `pool`.
  StatusOr<VolumeSource> ResolveSource(const std::string& pool, const VolumeSourceRequest& source);
  StatusOr<Backend*> FindPool(const std::string& pool);
  StatusOr<Exporter*> FindExporter(Protocol protocol);
  Status EnsureTargetLoaded(Exporter& exporter);
  StatusOr<ExportReport> Describe(Protocol protocol, ActualExport actual);
  // An ApplyExport request's checks that need no lock: ids, fence, params,
  // hosts, credentials, pool and exporter. The credentials to use.
  StatusOr<Credentials> CheckApplyRequest(const ApplyExportRequest& req);
  // What the kernel has for a volume just applied.
  StatusOr<ExportReport> ReadBack(const std::string& agent_volume_id, Protocol protocol);
  // One export to converge, checked by CheckApplyRequest, its lock held.
  struct LockedApply {
    std::string agent_volume_id;
    Protocol protocol = Protocol::kNvmeofTcp;
    ExportParams params;
    FenceToken fence;
    std::vector<std::string> hosts;
    Credentials creds;
    std::vector<std::string>* changes = nullptr;  // null: not reported
    Status status;                                // the outcome
  };
  // The per-volume checks and steps before the exporter (fence, ownership,
  // mode, marks, credentials kept, Expose): what the exporter is to write.
  StatusOr<KernelExport> PrepareExportLocked(const LockedApply& item);
  // Applies each item (ApplyExport, ApplyExports and RepairExports alike):
  // its own checks, then one Exporter::ApplyMany per protocol; each applied
  // one is logged and remembered for RepairExports. Sets every status.
  void ApplyManyLocked(std::vector<LockedApply>& items);
  Status ValidateHosts(Protocol protocol, const std::vector<std::string>& hosts);
  // The credentials an auth=chap export is to use (see ApplyExport); checks
  // only, writes nothing.
  StatusOr<Credentials> ResolveCredentials(const std::string& agent_volume_id, Protocol protocol,
                                           const ExportParams& params,
                                           const std::optional<Credentials>& given);

  AgentCoreOptions options_;
  FencingMarks& marks_;
  std::map<std::string, std::unique_ptr<Backend>> pools_;
  std::map<Protocol, std::unique_ptr<Exporter>> exporters_;

  NamedLocks volume_locks_;  // one operation per agent volume id at a time

  // What ApplyExport last applied per volume since this process started.
  struct AppliedExport {
    Protocol protocol;
    ExportParams params;
    FenceToken fence;
    std::vector<std::string> hosts;
    bool operator==(const AppliedExport&) const = default;
  };
  std::mutex applied_mu_;
  std::map<std::string, AppliedExport> applied_;

  std::mutex epoch_mu_;
  std::string instance_id_;
  uint64_t epoch_counter_ = 0;
  std::map<Protocol, std::string> last_tokens_;
};

}  // namespace pillar::agent
