// pillar's API, in one place: the kinds of the recorded intent
// (PillarVolumeState, PillarNode, PillarAgent), their conditions and reasons,
// and typed views of them. The JSON forms are in api/convert.h and the CRDs
// (API group pillar-csi.bhyoo.com, version v1alpha1) in api/crd.h; both are
// derived from the definitions here (docs/architecture.md, "Recorded intent").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "common/status.h"

namespace pillar::api {

constexpr const char* kGroup = "pillar-csi.bhyoo.com";
constexpr const char* kVersion = "v1alpha1";

constexpr const char* kKindVolume = "PillarVolumeState";
constexpr const char* kKindNode = "PillarNode";
constexpr const char* kKindAgent = "PillarAgent";
constexpr const char* kKindSnapshot = "PillarSnapshot";

constexpr const char* kCondExportReconciled = "ExportReconciled";
constexpr const char* kCondAgentConnected = "AgentConnected";
// Whether the agent confirmed the volume's backend storage (created, or
// imported on request). Until it is True nothing acts on the record: the
// reconciler exports nothing and a publish is refused, so a create the agent
// refused (a foreign object of the same name) can never lead to that object
// being exported, fenced or deleted.
constexpr const char* kCondProvisioned = "Provisioned";
constexpr const char* kReasonCreating = "Creating";
constexpr const char* kReasonCreated = "Created";

// A snapshot's one condition: True while the agent holds it and it can be
// restored (status.readyToUse mirrors it). Reasons: Creating (the agent has
// not confirmed it yet), Created, SnapshotMissing (the agent no longer has
// it), AgentUnavailable.
constexpr const char* kCondSnapshotReady = "Ready";
constexpr const char* kReasonSnapshotMissing = "SnapshotMissing";

// Reasons of ExportReconciled.
constexpr const char* kReasonReconciled = "Reconciled";
constexpr const char* kReasonExportSpecMissing = "ExportSpecMissing";
constexpr const char* kReasonAgentUnavailable = "AgentUnavailable";
constexpr const char* kReasonStaleGeneration = "StaleGeneration";
constexpr const char* kReasonReconcileFailed = "ReconcileFailed";

struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;
  int64_t observed_generation = 0;

  bool operator==(const Condition&) const = default;
};

// Sets or replaces the condition of `c.type`; lastTransitionTime changes only
// when the status does. Returns whether anything changed.
bool SetCondition(std::vector<Condition>& conditions, Condition c, const std::string& now);
const Condition* FindCondition(const std::vector<Condition>& conditions, const std::string& type);

struct ExportSpec {
  std::string bind_address;
  int64_t port = 0;
  bool acl_enabled = true;
  std::optional<int64_t> in_capsule_data_size;
  // In-band authentication: "none" (also when empty) or "chap"; with chap,
  // auth_digest is the CredentialsDigest of the volume's secret (never the
  // secret itself, which only the agent keeps).
  std::string auth;
  std::string auth_digest;
  // NFS: absent means root_squash (volumes recorded before the field existed
  // get the safe default); false only from nfsRootSquash: "false".
  std::optional<bool> nfs_root_squash;

  bool operator==(const ExportSpec&) const = default;
};

struct ExportInfo {
  std::string target_id;
  std::string address;
  int64_t port = 0;
  std::string volume_ref;

  bool operator==(const ExportInfo&) const = default;
};

struct PublishedNode {
  std::string node_id;
  bool revoking = false;
  // ControllerPublishVolume's readonly flag: a second publish to the same
  // node with another one is ALREADY_EXISTS (CSI), not a silent change.
  bool read_only = false;

  bool operator==(const PublishedNode&) const = default;
};

// Where a restored or cloned volume's data came from: a PillarSnapshot or a
// PillarVolumeState (exactly one of the two IDs), and that record's uid, the
// lifecycle the agent checks the source's ownership mark against.
struct ContentSource {
  std::string snapshot_id;
  std::string volume_id;
  std::string uid;
  // A copy sharing nothing with its source (StorageClass detached: "true").
  bool detached = false;

  bool operator==(const ContentSource&) const = default;
};

struct VolumeSpec {
  std::string volume_id;
  std::string agent_ref;
  std::string agent_volume_id;
  Protocol protocol = Protocol::kNvmeofTcp;
  int64_t capacity_bytes = 0;
  std::string access_type;  // "block", "mount"
  std::string fs_type;
  nlohmann::json parameters = nlohmann::json::object();  // the create parameters, for idempotency
  std::optional<ContentSource> content_source;           // absent: made empty

  bool operator==(const VolumeSpec&) const = default;
};

struct VolumeStatus {
  std::optional<ExportSpec> export_spec;
  std::optional<ExportInfo> export_info;
  std::vector<PublishedNode> published_nodes;
  int64_t publication_generation = 0;
  bool deleting = false;
  std::vector<Condition> conditions;
  // Not in the design's list but needed by ControllerExpandVolume / pillarctl.
  int64_t capacity_bytes = 0;
  // The backend kind the agent made the volume with ("file", "lvm",
  // "lvm-thin", "zfs"), as its create answered; "" until then.
  std::string backend;
};

// True when the agent confirmed the volume's storage (condition Provisioned
// True). Records older than the condition carry none and count as
// provisioned: before it, a record existed only for a create under way or
// done (see docs/security.md for the one case that does not hold).
bool IsProvisioned(const VolumeStatus& status);

struct Meta {
  std::string name;
  std::string uid;
  std::string resource_version;  // opaque, as in Kubernetes
  int64_t generation = 0;
  std::string creation_timestamp;
  std::optional<std::string> deletion_timestamp;
};

struct VolumeState {
  Meta meta;
  VolumeSpec spec;
  VolumeStatus status;
};

// A snapshot's recorded intent (kind PillarSnapshot, named by its CSI
// snapshot ID).
struct SnapshotSpec {
  std::string snapshot_id;
  std::string agent_ref;
  std::string agent_snapshot_id;                         // "<pool>/<snapshot>" on the agent
  std::string source_volume_id;                          // the PillarVolumeState it was taken of
  std::string source_volume_uid;                         // ... and that record's uid
  std::string volume_mode;                               // the source's: "block" or "filesystem"
  nlohmann::json parameters = nlohmann::json::object();  // the create parameters, for idempotency

  bool operator==(const SnapshotSpec&) const = default;
};

struct SnapshotStatus {
  bool ready_to_use = false;
  int64_t size_bytes = 0;  // the source's size when taken: the least a restore takes
  int64_t creation_time_unix_nanos = 0;
  int64_t used_bytes = 0;  // what it holds on the pool, when the agent knows
  std::string backend;
  bool detached = false;
  bool deleting = false;
  std::vector<Condition> conditions;

  bool operator==(const SnapshotStatus&) const = default;
};

struct SnapshotRecord {
  Meta meta;
  SnapshotSpec spec;
  SnapshotStatus status;
};

// True unless the snapshot's create is still unconfirmed by the agent
// (condition Ready False with reason Creating).
bool SnapshotConfirmed(const SnapshotStatus& status);

struct NodeRecord {
  Meta meta;
  std::string node_id;
  std::string host_nqn;
  std::string initiator_iqn;
  std::vector<std::string> ip_addresses;
  std::string last_seen;
};

struct AgentRecord {
  Meta meta;
  std::string address;
  int64_t port = 0;
  std::string tls_server_name;  // expected name in the agent's certificate
  // The agent's target name prefixes (pillar-agent --nqn-prefix/--iqn-prefix)
  // when not the defaults: the controller derives each volume's target name
  // from them and refuses an agent that reports another.
  std::string nqn_prefix;
  std::string iqn_prefix;
  std::vector<Condition> conditions;
  std::string boot_epoch;  // last seen
};

}  // namespace pillar::api
