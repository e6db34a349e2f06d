// How the controller reaches storage-node agents, in pillar's own types: the
// reconciler, the CSI controller and pillarctl speak only this. The gRPC
// client (agent_client.h) converts to and from agent.proto at the edge
// (agent_proto.h); the reconciler's unit tests script an agent behind it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/credentials.h"
#include "common/protocol.h"
#include "common/status.h"

namespace pillar::controller {

// The agent API's messages, field for field. A value this controller does
// not know (a protocol or volume mode of a newer agent) is left out: an
// absent optional, a shorter list.
namespace agent_api {

enum class VolumeMode { kBlock, kFilesystem };

// Carried by every write that touches a volume's export; the agent refuses
// an older generation or another lifecycle with ABORTED.
struct Fence {
  std::string volume_uid;              // the PillarVolumeState metadata.uid
  int64_t publication_generation = 0;  // status.publicationGeneration

  bool operator==(const Fence&) const = default;
};

// An export's parameters as asked for (ApplyExport) or as the kernel has
// them (Export).
struct ExportSpec {
  std::string bind_address;
  int32_t port = 0;
  bool acl_enabled = false;
  int32_t in_capsule_data_size = 0;  // asked for: 0 leaves the port's value alone
  std::string auth;                  // "" / "none" or "chap"
  std::string auth_digest;           // "sha256:<hex>", never the credentials
  bool nfs_no_root_squash = false;

  bool operator==(const ExportSpec&) const = default;
};

struct Volume {
  std::string agent_volume_id;  // "<pool>/<volume>"
  std::string pool;
  std::string name;
  int64_t size_bytes = 0;
  std::optional<VolumeMode> mode;
  std::string backend;      // "file", "lvm", "lvm-thin", "zfs"
  std::string device_path;  // block mode, when exposed
  std::string export_path;  // filesystem mode
  std::string volume_uid;   // lifecycle of the fencing mark, if any
  std::string owner_uid;    // lifecycle of the ownership mark on the storage
  std::string pending;      // what a create or expand has yet to finish
  // "snapshot <pool>/<snapshot>", "volume <pool>/<volume>", or "" for a
  // volume made empty.
  std::string origin;

  bool operator==(const Volume&) const = default;
};

struct Pool {
  std::string name;
  std::string backend;
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
  std::vector<VolumeMode> modes;

  bool operator==(const Pool&) const = default;
};

struct Info {
  std::string node_name;
  std::string agent_version;
  // Changes when the agent restarts or its kernel target state was lost; the
  // controller re-applies on every change.
  std::string boot_epoch;
  std::vector<Pool> pools;
  std::vector<Protocol> protocols;

  bool operator==(const Info&) const = default;
};

// A filesystem volume's root directory, set once when it is made.
struct VolumeRoot {
  uint32_t mode = 0;  // permission bits, setgid and sticky included
  uint32_t uid = 0;
  uint32_t gid = 0;

  bool operator==(const VolumeRoot&) const = default;
};

// What a new volume starts as a copy of: a snapshot or another volume of the
// same pool, marked with source_uid.
struct VolumeSource {
  std::string agent_snapshot_id;  // one of these two is set
  std::string agent_volume_id;
  std::string source_uid;
  bool detached = false;  // a copy sharing nothing with the source

  bool operator==(const VolumeSource&) const = default;
};

struct CreateVolumeRequest {
  std::string pool;
  std::string name;
  int64_t size_bytes = 0;
  VolumeMode mode = VolumeMode::kBlock;
  std::string volume_uid;
  std::map<std::string, std::string> parameters;  // backend properties
  // Adopt unmarked existing storage of this name instead of creating.
  bool import_existing = false;
  std::optional<VolumeRoot> root;      // absent: as the backend makes it
  std::optional<VolumeSource> source;  // absent: an empty volume

  bool operator==(const CreateVolumeRequest&) const = default;
};

struct ExpandVolumeRequest {
  std::string agent_volume_id;
  int64_t size_bytes = 0;
  std::string volume_uid;  // storage not marked as its own is refused

  bool operator==(const ExpandVolumeRequest&) const = default;
};

struct DeleteVolumeRequest {
  std::string agent_volume_id;
  std::string volume_uid;  // a volume marked with another uid is refused

  bool operator==(const DeleteVolumeRequest&) const = default;
};

// What the kernel actually has for one volume.
struct Export {
  std::string agent_volume_id;
  std::optional<Protocol> protocol;
  std::string target_id;  // subsystem NQN, target IQN or exported path
  ExportSpec spec;
  std::vector<std::string> allowed_hosts;  // NQNs, IQNs or client IPs, sorted
  std::string backing;                     // device or directory being served
  bool enabled = false;
  std::optional<Fence> fence;  // the mark on disk, if any

  bool operator==(const Export&) const = default;
};

struct ApplyExportRequest {
  std::string agent_volume_id;
  Protocol protocol = Protocol::kNvmeofTcp;
  ExportSpec spec;
  Fence fence;
  // The complete ACL: entries not in it are removed, for this volume only.
  std::vector<std::string> allowed_hosts;
  // With spec.auth "chap": the credentials matching spec.auth_digest, when
  // the controller holds them; absent, the agent uses the copy it keeps.
  std::optional<Credentials> credentials;

  bool operator==(const ApplyExportRequest&) const = default;
};

struct ApplyExportResult {
  Export actual;
  std::vector<std::string> changes;  // each kernel change made, in order

  bool operator==(const ApplyExportResult&) const = default;
};

// One item of ApplyExports: its own outcome, as ApplyExport's would be.
struct ApplyExportItem {
  Status status;
  ApplyExportResult result;  // when status is OK
};

struct Snapshot {
  std::string agent_snapshot_id;  // "<pool>/<snapshot>"
  std::string pool;
  std::string name;
  std::string source_volume_id;
  int64_t size_bytes = 0;  // the source's size when taken
  int64_t creation_time_unix_nanos = 0;
  std::string backend;
  std::string owner_uid;  // the PillarSnapshot's uid, from the mark
  bool ready_to_use = false;
  int64_t used_bytes = 0;
  bool detached = false;

  bool operator==(const Snapshot&) const = default;
};

struct CreateSnapshotRequest {
  std::string source_volume_id;
  std::string source_volume_uid;  // the source must carry this mark
  std::string name;               // in the source's pool
  std::string snapshot_uid;       // the mark the snapshot gets
  bool detached = false;

  bool operator==(const CreateSnapshotRequest&) const = default;
};

struct DeleteSnapshotRequest {
  std::string agent_snapshot_id;
  std::string snapshot_uid;  // a snapshot marked with another uid is refused

  bool operator==(const DeleteSnapshotRequest&) const = default;
};

struct UnexportVolumeRequest {
  std::string agent_volume_id;
  Protocol protocol = Protocol::kNvmeofTcp;
  Fence fence;

  bool operator==(const UnexportVolumeRequest&) const = default;
};

}  // namespace agent_api

// Every call maps transport failures to Status: ABORTED means a fencing
// refusal (the agent uses ABORTED for nothing else); UNAVAILABLE /
// DEADLINE_EXCEEDED mean the agent cannot be reached.
class AgentClient {
 public:
  virtual ~AgentClient() = default;
  virtual StatusOr<agent_api::Info> GetInfo() = 0;
  virtual StatusOr<agent_api::Volume> CreateVolume(const agent_api::CreateVolumeRequest& r) = 0;
  virtual StatusOr<agent_api::Volume> ExpandVolume(const agent_api::ExpandVolumeRequest& r) = 0;
  virtual Status DeleteVolume(const agent_api::DeleteVolumeRequest& r) = 0;
  // The pools named `pool`, or every pool when it is empty.
  virtual StatusOr<std::vector<agent_api::Pool>> GetCapacity(const std::string& pool) = 0;
  virtual StatusOr<agent_api::ApplyExportResult> ApplyExport(
      const agent_api::ApplyExportRequest& r) = 0;
  // Many exports in one call, one outcome per request in order (each fenced
  // and failing on its own); the call's own status is the transport's. This
  // default makes one ApplyExport per item, for clients without a batch.
  virtual StatusOr<std::vector<agent_api::ApplyExportItem>> ApplyExports(
      const std::vector<agent_api::ApplyExportRequest>& rs) {
    std::vector<agent_api::ApplyExportItem> out;
    for (const auto& r : rs) {
      auto one = ApplyExport(r);
      out.push_back(one.ok() ? agent_api::ApplyExportItem{Status::Ok(), std::move(*one)}
                             : agent_api::ApplyExportItem{one.status(), {}});
    }
    return out;
  }
  // NOT_FOUND when the volume has no export of `protocol`.
  virtual StatusOr<agent_api::Export> GetExport(const std::string& agent_volume_id,
                                                Protocol protocol) = 0;
  virtual StatusOr<std::vector<agent_api::Export>> ListExports() = 0;
  // The kernel changes made.
  virtual StatusOr<std::vector<std::string>> UnexportVolume(
      const agent_api::UnexportVolumeRequest& r) = 0;
  virtual StatusOr<agent_api::Snapshot> CreateSnapshot(
      const agent_api::CreateSnapshotRequest& r) = 0;
  // Succeeds at once, even while volumes made from the snapshot need its
  // data (the agent keeps and later reclaims it); a missing one is success.
  virtual Status DeleteSnapshot(const agent_api::DeleteSnapshotRequest& r) = 0;
  // The snapshots of `pool`, or of every pool when it is empty.
  virtual StatusOr<std::vector<agent_api::Snapshot>> ListSnapshots(const std::string& pool) = 0;
};

struct AgentEndpoint {
  std::string address;
  int64_t port = 0;
  std::string tls_server_name;

  bool operator==(const AgentEndpoint&) const = default;
};

// Resolves an agentRef to a client; implementations cache connections and
// rebuild them when the endpoint changes.
class AgentDirectory {
 public:
  virtual ~AgentDirectory() = default;
  virtual StatusOr<std::shared_ptr<AgentClient>> Client(const std::string& agent_ref,
                                                        const AgentEndpoint& endpoint) = 0;
};

}  // namespace pillar::controller
