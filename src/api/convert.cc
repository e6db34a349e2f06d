#include "api/convert.h"

namespace pillar::api {
namespace {

using nlohmann::json;

// Small typed readers: a present field of the wrong type is an error naming
// the field; an absent optional field yields the default.
Status WantObject(const json& j, const std::string& field) {
  if (!j.is_object()) return InvalidArgument(field + " must be an object");
  return Status::Ok();
}

StatusOr<std::string> Str(const json& j, const char* key, const std::string& field,
                          bool required = false) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return InvalidArgument(field + "." + key + " is required");
    return std::string();
  }
  if (!it->is_string()) return InvalidArgument(field + "." + key + " must be a string");
  return it->get<std::string>();
}

StatusOr<int64_t> Int(const json& j, const char* key, const std::string& field,
                      bool required = false) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return InvalidArgument(field + "." + key + " is required");
    return int64_t{0};
  }
  if (!it->is_number_integer()) return InvalidArgument(field + "." + key + " must be an integer");
  return it->get<int64_t>();
}

StatusOr<bool> Bool(const json& j, const char* key, const std::string& field,
                    bool required = false) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return InvalidArgument(field + "." + key + " is required");
    return false;
  }
  if (!it->is_boolean()) return InvalidArgument(field + "." + key + " must be a boolean");
  return it->get<bool>();
}

}  // namespace

Meta MetaOf(const store::Object& o) {
  return {
      o.name, o.uid, o.resource_version, o.generation, o.creation_timestamp, o.deletion_timestamp};
}

StatusOr<VolumeState> LoadVolume(const store::Object& o) {
  VolumeState v;
  v.meta = MetaOf(o);
  ASSIGN_OR_RETURN(v.spec, VolumeSpecFromJson(o.spec));
  ASSIGN_OR_RETURN(v.status, VolumeStatusFromJson(o.status));
  return v;
}

StatusOr<SnapshotRecord> LoadSnapshot(const store::Object& o) {
  SnapshotRecord r;
  r.meta = MetaOf(o);
  ASSIGN_OR_RETURN(r.spec, SnapshotSpecFromJson(o.spec));
  ASSIGN_OR_RETURN(r.status, SnapshotStatusFromJson(o.status));
  return r;
}

StatusOr<NodeRecord> LoadNode(const store::Object& o) { return NodeFromJson(MetaOf(o), o.spec); }

StatusOr<AgentRecord> LoadAgent(const store::Object& o) {
  return AgentFromJson(MetaOf(o), o.spec, o.status);
}

json ToJson(const ExportInfo& e) {
  return {{"targetID", e.target_id},
          {"address", e.address},
          {"port", e.port},
          {"volumeRef", e.volume_ref}};
}

StatusOr<ExportInfo> ExportInfoFromJson(const json& j) {
  const std::string f = "status.exportInfo";
  RETURN_IF_ERROR(WantObject(j, f));
  ExportInfo e;
  ASSIGN_OR_RETURN(e.target_id, Str(j, "targetID", f));
  ASSIGN_OR_RETURN(e.address, Str(j, "address", f));
  ASSIGN_OR_RETURN(e.port, Int(j, "port", f));
  ASSIGN_OR_RETURN(e.volume_ref, Str(j, "volumeRef", f));
  return e;
}

bool SetCondition(std::vector<Condition>& conditions, Condition c, const std::string& now) {
  for (auto& existing : conditions) {
    if (existing.type != c.type) continue;
    c.last_transition_time = existing.status == c.status ? existing.last_transition_time : now;
    if (existing == c) return false;
    existing = std::move(c);
    return true;
  }
  c.last_transition_time = now;
  conditions.push_back(std::move(c));
  return true;
}

bool IsProvisioned(const VolumeStatus& status) {
  const Condition* c = FindCondition(status.conditions, kCondProvisioned);
  return c == nullptr || c->status == "True";
}

const Condition* FindCondition(const std::vector<Condition>& conditions, const std::string& type) {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

json ToJson(const ExportSpec& s) {
  json j = {{"bindAddress", s.bind_address}, {"port", s.port}, {"aclEnabled", s.acl_enabled}};
  if (s.in_capsule_data_size) j["inCapsuleDataSize"] = *s.in_capsule_data_size;
  if (!s.auth.empty()) j["auth"] = s.auth;
  if (!s.auth_digest.empty()) j["authDigest"] = s.auth_digest;
  if (s.nfs_root_squash) j["nfsRootSquash"] = *s.nfs_root_squash;
  return j;
}

StatusOr<ExportSpec> ExportSpecFromJson(const json& j) {
  const std::string f = "status.exportSpec";
  RETURN_IF_ERROR(WantObject(j, f));
  ExportSpec s;
  ASSIGN_OR_RETURN(s.bind_address, Str(j, "bindAddress", f, true));
  if (s.bind_address.empty()) return InvalidArgument(f + ".bindAddress must be non-empty");
  ASSIGN_OR_RETURN(s.port, Int(j, "port", f, true));
  if (s.port < 0 || s.port > 65535) return InvalidArgument(f + ".port must be 0-65535");
  ASSIGN_OR_RETURN(s.acl_enabled, Bool(j, "aclEnabled", f, true));
  if (j.contains("inCapsuleDataSize") && !j["inCapsuleDataSize"].is_null()) {
    ASSIGN_OR_RETURN(int64_t ics, Int(j, "inCapsuleDataSize", f));
    if (ics < 0) return InvalidArgument(f + ".inCapsuleDataSize must be >= 0");
    s.in_capsule_data_size = ics;
  }
  if (j.contains("auth") && !j["auth"].is_null()) {
    ASSIGN_OR_RETURN(s.auth, Str(j, "auth", f));
    if (!s.auth.empty() && s.auth != "none" && s.auth != "chap") {
      return InvalidArgument(f + ".auth must be none or chap");
    }
  }
  if (j.contains("authDigest") && !j["authDigest"].is_null()) {
    ASSIGN_OR_RETURN(s.auth_digest, Str(j, "authDigest", f));
  }
  if (s.auth == "chap" && s.auth_digest.empty()) {
    return InvalidArgument(f + ".authDigest is required with auth chap");
  }
  if (j.contains("nfsRootSquash") && !j["nfsRootSquash"].is_null()) {
    ASSIGN_OR_RETURN(bool squash, Bool(j, "nfsRootSquash", f));
    s.nfs_root_squash = squash;
  }
  return s;
}

bool SnapshotConfirmed(const SnapshotStatus& status) {
  const Condition* c = FindCondition(status.conditions, kCondSnapshotReady);
  return c == nullptr || c->status == "True" || c->reason != kReasonCreating;
}

json ToJson(const VolumeSpec& s) {
  json j = {{"volumeID", s.volume_id},
            {"agentRef", s.agent_ref},
            {"agentVolumeID", s.agent_volume_id},
            {"protocol", ProtocolName(s.protocol)},
            {"capacityBytes", s.capacity_bytes},
            {"accessType", s.access_type},
            {"fsType", s.fs_type},
            {"parameters", s.parameters}};
  if (s.content_source) {
    json src = {{"uid", s.content_source->uid}};
    if (!s.content_source->snapshot_id.empty()) src["snapshotID"] = s.content_source->snapshot_id;
    if (!s.content_source->volume_id.empty()) src["volumeID"] = s.content_source->volume_id;
    if (s.content_source->detached) src["detached"] = true;
    j["contentSource"] = std::move(src);
  }
  return j;
}

StatusOr<VolumeSpec> VolumeSpecFromJson(const json& j) {
  const std::string f = "spec";
  RETURN_IF_ERROR(WantObject(j, f));
  VolumeSpec s;
  ASSIGN_OR_RETURN(s.volume_id, Str(j, "volumeID", f, true));
  ASSIGN_OR_RETURN(s.agent_ref, Str(j, "agentRef", f, true));
  ASSIGN_OR_RETURN(s.agent_volume_id, Str(j, "agentVolumeID", f, true));
  ASSIGN_OR_RETURN(std::string protocol, Str(j, "protocol", f, true));
  ASSIGN_OR_RETURN(s.protocol, ParseProtocol("spec.protocol", protocol));
  ASSIGN_OR_RETURN(s.capacity_bytes, Int(j, "capacityBytes", f));
  ASSIGN_OR_RETURN(s.access_type, Str(j, "accessType", f));
  ASSIGN_OR_RETURN(s.fs_type, Str(j, "fsType", f));
  if (j.contains("parameters") && j["parameters"].is_object()) s.parameters = j["parameters"];
  if (j.contains("contentSource") && !j["contentSource"].is_null()) {
    const json& cs = j["contentSource"];
    const std::string cf = "spec.contentSource";
    RETURN_IF_ERROR(WantObject(cs, cf));
    ContentSource src;
    ASSIGN_OR_RETURN(src.snapshot_id, Str(cs, "snapshotID", cf));
    ASSIGN_OR_RETURN(src.volume_id, Str(cs, "volumeID", cf));
    ASSIGN_OR_RETURN(src.uid, Str(cs, "uid", cf));
    ASSIGN_OR_RETURN(src.detached, Bool(cs, "detached", cf));
    if (src.snapshot_id.empty() == src.volume_id.empty()) {
      return InvalidArgument(cf + " must name exactly one of snapshotID and volumeID");
    }
    s.content_source = std::move(src);
  }
  return s;
}

json ToJson(const SnapshotSpec& s) {
  return {{"snapshotID", s.snapshot_id},
          {"agentRef", s.agent_ref},
          {"agentSnapshotID", s.agent_snapshot_id},
          {"sourceVolumeID", s.source_volume_id},
          {"sourceVolumeUID", s.source_volume_uid},
          {"volumeMode", s.volume_mode},
          {"parameters", s.parameters}};
}

StatusOr<SnapshotSpec> SnapshotSpecFromJson(const json& j) {
  const std::string f = "spec";
  RETURN_IF_ERROR(WantObject(j, f));
  SnapshotSpec s;
  ASSIGN_OR_RETURN(s.snapshot_id, Str(j, "snapshotID", f, true));
  ASSIGN_OR_RETURN(s.agent_ref, Str(j, "agentRef", f, true));
  ASSIGN_OR_RETURN(s.agent_snapshot_id, Str(j, "agentSnapshotID", f, true));
  ASSIGN_OR_RETURN(s.source_volume_id, Str(j, "sourceVolumeID", f, true));
  ASSIGN_OR_RETURN(s.source_volume_uid, Str(j, "sourceVolumeUID", f));
  ASSIGN_OR_RETURN(s.volume_mode, Str(j, "volumeMode", f));
  if (!s.volume_mode.empty() && s.volume_mode != "block" && s.volume_mode != "filesystem") {
    return InvalidArgument("spec.volumeMode must be block or filesystem");
  }
  if (j.contains("parameters") && j["parameters"].is_object()) s.parameters = j["parameters"];
  return s;
}

json ToJson(const SnapshotStatus& s) {
  json j = {{"readyToUse", s.ready_to_use},
            {"sizeBytes", s.size_bytes},
            {"creationTimeUnixNanos", s.creation_time_unix_nanos},
            {"usedBytes", s.used_bytes},
            {"deleting", s.deleting},
            {"conditions", ToJson(s.conditions)}};
  if (!s.backend.empty()) j["backend"] = s.backend;
  if (s.detached) j["detached"] = true;
  return j;
}

StatusOr<SnapshotStatus> SnapshotStatusFromJson(const json& j) {
  SnapshotStatus s;
  if (j.is_null()) return s;
  RETURN_IF_ERROR(WantObject(j, "status"));
  ASSIGN_OR_RETURN(s.ready_to_use, Bool(j, "readyToUse", "status"));
  ASSIGN_OR_RETURN(s.size_bytes, Int(j, "sizeBytes", "status"));
  ASSIGN_OR_RETURN(s.creation_time_unix_nanos, Int(j, "creationTimeUnixNanos", "status"));
  ASSIGN_OR_RETURN(s.used_bytes, Int(j, "usedBytes", "status"));
  ASSIGN_OR_RETURN(s.backend, Str(j, "backend", "status"));
  ASSIGN_OR_RETURN(s.detached, Bool(j, "detached", "status"));
  ASSIGN_OR_RETURN(s.deleting, Bool(j, "deleting", "status"));
  if (j.contains("conditions")) {
    ASSIGN_OR_RETURN(s.conditions, ConditionsFromJson(j["conditions"]));
  }
  return s;
}

json ToJson(const std::vector<Condition>& conditions) {
  json arr = json::array();
  for (const auto& c : conditions) {
    arr.push_back({{"type", c.type},
                   {"status", c.status},
                   {"reason", c.reason},
                   {"message", c.message},
                   {"lastTransitionTime", c.last_transition_time},
                   {"observedGeneration", c.observed_generation}});
  }
  return arr;
}

StatusOr<std::vector<Condition>> ConditionsFromJson(const json& j) {
  std::vector<Condition> out;
  if (j.is_null()) return out;
  if (!j.is_array()) return InvalidArgument("status.conditions must be an array");
  for (size_t i = 0; i < j.size(); ++i) {
    std::string f = "status.conditions[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(WantObject(j[i], f));
    Condition c;
    ASSIGN_OR_RETURN(c.type, Str(j[i], "type", f, true));
    ASSIGN_OR_RETURN(c.status, Str(j[i], "status", f, true));
    ASSIGN_OR_RETURN(c.reason, Str(j[i], "reason", f));
    ASSIGN_OR_RETURN(c.message, Str(j[i], "message", f));
    ASSIGN_OR_RETURN(c.last_transition_time, Str(j[i], "lastTransitionTime", f));
    ASSIGN_OR_RETURN(c.observed_generation, Int(j[i], "observedGeneration", f));
    out.push_back(std::move(c));
  }
  return out;
}

json ToJson(const VolumeStatus& s) {
  json j = json::object();
  if (s.export_spec) j["exportSpec"] = ToJson(*s.export_spec);
  if (s.export_info) j["exportInfo"] = ToJson(*s.export_info);
  json nodes = json::array();
  for (const auto& n : s.published_nodes) {
    json node = {{"nodeID", n.node_id}, {"revoking", n.revoking}};
    if (n.read_only) node["readOnly"] = true;
    nodes.push_back(std::move(node));
  }
  j["publishedNodes"] = nodes;
  j["publicationGeneration"] = s.publication_generation;
  j["deleting"] = s.deleting;
  j["conditions"] = ToJson(s.conditions);
  j["capacityBytes"] = s.capacity_bytes;
  if (!s.backend.empty()) j["backend"] = s.backend;
  return j;
}

StatusOr<VolumeStatus> VolumeStatusFromJson(const json& j) {
  VolumeStatus s;
  if (j.is_null()) return s;
  RETURN_IF_ERROR(WantObject(j, "status"));
  if (j.contains("exportSpec") && !j["exportSpec"].is_null()) {
    ASSIGN_OR_RETURN(s.export_spec, ExportSpecFromJson(j["exportSpec"]));
  }
  if (j.contains("exportInfo") && !j["exportInfo"].is_null()) {
    ASSIGN_OR_RETURN(s.export_info, ExportInfoFromJson(j["exportInfo"]));
  }
  if (j.contains("publishedNodes") && !j["publishedNodes"].is_null()) {
    const json& arr = j["publishedNodes"];
    if (!arr.is_array()) return InvalidArgument("status.publishedNodes must be an array");
    for (size_t i = 0; i < arr.size(); ++i) {
      std::string f = "status.publishedNodes[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(WantObject(arr[i], f));
      PublishedNode n;
      ASSIGN_OR_RETURN(n.node_id, Str(arr[i], "nodeID", f, true));
      ASSIGN_OR_RETURN(n.revoking, Bool(arr[i], "revoking", f));
      ASSIGN_OR_RETURN(n.read_only, Bool(arr[i], "readOnly", f));
      s.published_nodes.push_back(std::move(n));
    }
  }
  ASSIGN_OR_RETURN(s.publication_generation, Int(j, "publicationGeneration", "status"));
  ASSIGN_OR_RETURN(s.deleting, Bool(j, "deleting", "status"));
  if (j.contains("conditions")) {
    ASSIGN_OR_RETURN(s.conditions, ConditionsFromJson(j["conditions"]));
  }
  ASSIGN_OR_RETURN(s.capacity_bytes, Int(j, "capacityBytes", "status"));
  ASSIGN_OR_RETURN(s.backend, Str(j, "backend", "status"));
  return s;
}

json NodeSpecToJson(const NodeRecord& n) {
  return {{"nodeID", n.node_id},
          {"hostNQN", n.host_nqn},
          {"initiatorIQN", n.initiator_iqn},
          {"ipAddresses", n.ip_addresses},
          {"lastSeen", n.last_seen}};
}

StatusOr<NodeRecord> NodeFromJson(const Meta& meta, const json& spec) {
  RETURN_IF_ERROR(WantObject(spec, "spec"));
  NodeRecord n;
  n.meta = meta;
  ASSIGN_OR_RETURN(n.node_id, Str(spec, "nodeID", "spec", true));
  ASSIGN_OR_RETURN(n.host_nqn, Str(spec, "hostNQN", "spec"));
  ASSIGN_OR_RETURN(n.initiator_iqn, Str(spec, "initiatorIQN", "spec"));
  ASSIGN_OR_RETURN(n.last_seen, Str(spec, "lastSeen", "spec"));
  if (spec.contains("ipAddresses") && !spec["ipAddresses"].is_null()) {
    if (!spec["ipAddresses"].is_array())
      return InvalidArgument("spec.ipAddresses must be an array");
    for (const auto& ip : spec["ipAddresses"]) {
      if (!ip.is_string()) return InvalidArgument("spec.ipAddresses entries must be strings");
      n.ip_addresses.push_back(ip.get<std::string>());
    }
  }
  return n;
}

json AgentSpecToJson(const AgentRecord& a) {
  json j = {{"address", a.address}, {"port", a.port}, {"tlsServerName", a.tls_server_name}};
  if (!a.nqn_prefix.empty()) j["nqnPrefix"] = a.nqn_prefix;
  if (!a.iqn_prefix.empty()) j["iqnPrefix"] = a.iqn_prefix;
  return j;
}

json AgentStatusToJson(const AgentRecord& a) {
  return {{"conditions", ToJson(a.conditions)}, {"bootEpoch", a.boot_epoch}};
}

StatusOr<AgentRecord> AgentFromJson(const Meta& meta, const json& spec, const json& status) {
  RETURN_IF_ERROR(WantObject(spec, "spec"));
  AgentRecord a;
  a.meta = meta;
  ASSIGN_OR_RETURN(a.address, Str(spec, "address", "spec", true));
  ASSIGN_OR_RETURN(a.port, Int(spec, "port", "spec", true));
  ASSIGN_OR_RETURN(a.tls_server_name, Str(spec, "tlsServerName", "spec"));
  ASSIGN_OR_RETURN(a.nqn_prefix, Str(spec, "nqnPrefix", "spec"));
  ASSIGN_OR_RETURN(a.iqn_prefix, Str(spec, "iqnPrefix", "spec"));
  if (status.is_object()) {
    if (status.contains("conditions")) {
      ASSIGN_OR_RETURN(a.conditions, ConditionsFromJson(status["conditions"]));
    }
    ASSIGN_OR_RETURN(a.boot_epoch, Str(status, "bootEpoch", "status"));
  }
  return a;
}

namespace {
nlohmann::json& AsObject(nlohmann::json& status) {
  if (!status.is_object()) status = nlohmann::json::object();
  return status;
}
}  // namespace

nlohmann::json MergeStatus(const nlohmann::json& stored, const nlohmann::json& modeled) {
  nlohmann::json next = stored.is_object() ? stored : nlohmann::json::object();
  for (const auto& [k, v] : modeled.items()) next[k] = v;
  return next;
}

std::vector<Condition> StoredConditions(const nlohmann::json& status) {
  if (!status.is_object() || !status.contains("conditions")) return {};
  auto parsed = ConditionsFromJson(status["conditions"]);
  return parsed.ok() ? std::move(parsed).value() : std::vector<Condition>{};
}

void SetStoredConditions(nlohmann::json& status, const std::vector<Condition>& conditions) {
  AsObject(status)["conditions"] = ToJson(conditions);
}

bool SetStoredExportInfo(nlohmann::json& status, const ExportInfo& info) {
  nlohmann::json want = ToJson(info);
  nlohmann::json& s = AsObject(status);
  if (s.value("exportInfo", nlohmann::json()) == want) return false;
  s["exportInfo"] = std::move(want);
  return true;
}

void SetStoredExportSpec(nlohmann::json& status, const ExportSpec& spec) {
  AsObject(status)["exportSpec"] = ToJson(spec);
}

}  // namespace pillar::api
