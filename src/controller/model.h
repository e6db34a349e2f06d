// Typed views of the recorded intent (PillarVolumeState, PillarNode,
// PillarAgent) over the store's generic objects, with the JSON field names of
// the CRDs (API group pillar-csi.bhyoo.com).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pillar::controller {

constexpr const char* kKindVolume = "PillarVolumeState";
constexpr const char* kKindNode = "PillarNode";
constexpr const char* kKindAgent = "PillarAgent";

constexpr const char* kCondExportReconciled = "ExportReconciled";
constexpr const char* kCondAgentConnected = "AgentConnected";

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

  bool operator==(const PublishedNode&) const = default;
};

struct VolumeSpec {
  std::string volume_id;
  std::string agent_ref;
  std::string agent_volume_id;
  std::string protocol;  // "nvmeof-tcp", "iscsi", "nfs"
  std::string backend;   // "file", "lvm", "lvm-thin", "zfs"
  int64_t capacity_bytes = 0;
  std::string access_type;  // "block", "mount"
  std::string fs_type;
  nlohmann::json parameters = nlohmann::json::object();  // the create parameters, for idempotency

  bool operator==(const VolumeSpec&) const = default;
};

struct VolumeStatus {
  std::optional<ExportSpec> export_spec;
  std::optional<ExportInfo> export_info;
  std::vector<PublishedNode> published_nodes;
  int64_t publication_generation = 0;
  bool deleting = false;
  std::vector<Condition> conditions;
  // Not in DESIGN's list but needed by ControllerExpandVolume / pillarctl.
  int64_t capacity_bytes = 0;
};

struct Meta {
  std::string name;
  std::string uid;
  int64_t resource_version = 0;
  int64_t generation = 0;
  std::string creation_timestamp;
  std::optional<std::string> deletion_timestamp;
};

struct VolumeState {
  Meta meta;
  VolumeSpec spec;
  VolumeStatus status;
};

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
  std::vector<Condition> conditions;
  std::string boot_epoch;  // last seen
};

// JSON conversions (field names as in the CRDs). From* return INVALID_ARGUMENT
// naming the field when the stored JSON does not fit the schema.
nlohmann::json ToJson(const ExportSpec& s);
StatusOr<ExportSpec> ExportSpecFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const VolumeSpec& s);
nlohmann::json ToJson(const VolumeStatus& s);
StatusOr<VolumeSpec> VolumeSpecFromJson(const nlohmann::json& j);
StatusOr<VolumeStatus> VolumeStatusFromJson(const nlohmann::json& j);
nlohmann::json NodeSpecToJson(const NodeRecord& n);
StatusOr<NodeRecord> NodeFromJson(const Meta& meta, const nlohmann::json& spec);
nlohmann::json AgentSpecToJson(const AgentRecord& a);
nlohmann::json AgentStatusToJson(const AgentRecord& a);
StatusOr<AgentRecord> AgentFromJson(const Meta& meta, const nlohmann::json& spec,
                                    const nlohmann::json& status);
nlohmann::json ToJson(const std::vector<Condition>& conditions);
StatusOr<std::vector<Condition>> ConditionsFromJson(const nlohmann::json& j);

}  // namespace pillar::controller
