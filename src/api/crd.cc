#include "api/crd.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "api/types.h"
#include "common/protocol.h"

namespace pillar::api {
namespace {

using nlohmann::json;

json Str() { return {{"type", "string"}}; }
json NonEmptyStr() { return {{"type", "string"}, {"minLength", 1}}; }
json Int64(int64_t minimum = 0) {
  return {{"type", "integer"}, {"format", "int64"}, {"minimum", minimum}};
}
json Bool() { return {{"type", "boolean"}}; }
json Port() { return {{"type", "integer"}, {"minimum", 0}, {"maximum", 65535}}; }
json Enum(const std::vector<std::string>& values) { return {{"type", "string"}, {"enum", values}}; }
json Obj(json properties, const std::vector<std::string>& required = {}) {
  json o = {{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) o["required"] = required;
  return o;
}

std::vector<std::string> ProtocolNames() {
  std::vector<std::string> out;
  out.reserve(kAllProtocols.size());
  for (Protocol p : kAllProtocols) out.emplace_back(ProtocolName(p));
  return out;
}

// The standard condition shape (type, status, reason, message,
// lastTransitionTime, observedGeneration), one entry per type.
json Conditions() {
  return {{"type", "array"},
          {"x-kubernetes-list-type", "map"},
          {"x-kubernetes-list-map-keys", {"type"}},
          {"items", Obj({{"type", NonEmptyStr()},
                         {"status", Enum({"True", "False", "Unknown"})},
                         {"reason", Str()},
                         {"message", Str()},
                         {"lastTransitionTime", Str()},
                         {"observedGeneration", Int64()}},
                        {"type", "status"})}};
}

json VolumeSchema() {
  json spec = Obj(
      {{"volumeID", NonEmptyStr()},
       {"agentRef", NonEmptyStr()},
       {"agentVolumeID", NonEmptyStr()},
       {"protocol", Enum(ProtocolNames())},
       {"capacityBytes", Int64()},
       {"accessType", Enum({"", "block", "mount"})},
       {"fsType", Str()},
       {"parameters", {{"type", "object"}, {"additionalProperties", Str()}}},
       {"contentSource",
        Obj({{"snapshotID", Str()}, {"volumeID", Str()}, {"uid", Str()}, {"detached", Bool()}})}},
      {"volumeID", "agentRef", "agentVolumeID", "protocol"});
  // status.exportSpec is the only source an export is rebuilt from: all three
  // fields are required, bindAddress non-empty, port a port number.
  json export_spec = Obj({{"bindAddress", NonEmptyStr()},
                          {"port", Port()},
                          {"aclEnabled", Bool()},
                          {"inCapsuleDataSize", Int64()},
                          {"auth", Enum({"", "none", "chap"})},
                          {"authDigest", Str()},
                          {"nfsRootSquash", Bool()}},
                         {"bindAddress", "port", "aclEnabled"});
  json export_info =
      Obj({{"targetID", Str()}, {"address", Str()}, {"port", Port()}, {"volumeRef", Str()}});
  json published = {
      {"type", "array"},
      {"items",
       Obj({{"nodeID", NonEmptyStr()}, {"revoking", Bool()}, {"readOnly", Bool()}}, {"nodeID"})}};
  json status = Obj({{"exportSpec", export_spec},
                     {"exportInfo", export_info},
                     {"publishedNodes", published},
                     {"publicationGeneration", Int64()},
                     {"deleting", Bool()},
                     {"conditions", Conditions()},
                     {"capacityBytes", Int64()},
                     {"backend", Str()}});
  return Obj({{"spec", spec}, {"status", status}}, {"spec"});
}

json SnapshotSchema() {
  json spec = Obj({{"snapshotID", NonEmptyStr()},
                   {"agentRef", NonEmptyStr()},
                   {"agentSnapshotID", NonEmptyStr()},
                   {"sourceVolumeID", NonEmptyStr()},
                   {"sourceVolumeUID", Str()},
                   {"volumeMode", Enum({"", "block", "filesystem"})},
                   {"parameters", {{"type", "object"}, {"additionalProperties", Str()}}}},
                  {"snapshotID", "agentRef", "agentSnapshotID", "sourceVolumeID"});
  json status = Obj({{"readyToUse", Bool()},
                     {"sizeBytes", Int64()},
                     {"creationTimeUnixNanos", Int64()},
                     {"usedBytes", Int64()},
                     {"backend", Str()},
                     {"detached", Bool()},
                     {"deleting", Bool()},
                     {"conditions", Conditions()}});
  return Obj({{"spec", spec}, {"status", status}}, {"spec"});
}

json AgentSchema() {
  json spec = Obj({{"address", NonEmptyStr()},
                   {"port", Port()},
                   {"tlsServerName", Str()},
                   {"nqnPrefix", Str()},
                   {"iqnPrefix", Str()}},
                  {"address", "port"});
  json status = Obj({{"conditions", Conditions()}, {"bootEpoch", Str()}});
  return Obj({{"spec", spec}, {"status", status}}, {"spec"});
}

json NodeSchema() {
  json spec = Obj({{"nodeID", NonEmptyStr()},
                   {"hostNQN", Str()},
                   {"initiatorIQN", Str()},
                   {"ipAddresses", {{"type", "array"}, {"items", Str()}}},
                   {"lastSeen", Str()}},
                  {"nodeID"});
  return Obj({{"spec", spec}, {"status", {{"type", "object"}}}}, {"spec"});
}

json Column(const char* name, const char* type, const std::string& path, const char* description) {
  return {{"name", name}, {"type", type}, {"jsonPath", path}, {"description", description}};
}

std::string ConditionPath(const char* type, const char* field) {
  return std::string(".status.conditions[?(@.type==\"") + type + "\")]." + field;
}

json Crd(const ResourceNames& names, json schema, json columns) {
  json version = {{"name", kVersion},
                  {"served", true},
                  {"storage", true},
                  {"subresources", {{"status", json::object()}}},
                  {"schema", {{"openAPIV3Schema", std::move(schema)}}}};
  columns.push_back(Column("Age", "date", ".metadata.creationTimestamp", "time since creation"));
  version["additionalPrinterColumns"] = std::move(columns);
  json crd_names = {{"kind", names.kind},
                    {"listKind", names.kind + "List"},
                    {"plural", names.plural},
                    {"singular", names.singular}};
  if (!names.short_names.empty()) crd_names["shortNames"] = names.short_names;
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", names.plural + "." + kGroup}}},
          {"spec",
           {{"group", kGroup},
            {"scope", "Cluster"},
            {"names", std::move(crd_names)},
            {"versions", json::array({std::move(version)})}}}};
}

void Emit(YAML::Emitter& out, const json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key << k << YAML::Value;
      Emit(out, v);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const auto& v : j) Emit(out, v);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    // Quote strings a YAML reader would take for another type ("True", "", "1").
    static const std::set<std::string> kTyped = {"true", "false", "True", "False", "yes",  "no",
                                                 "Yes",  "No",    "on",   "off",   "null", "~"};
    const auto& s = j.get_ref<const std::string&>();
    if (s.empty() || kTyped.count(s) > 0 ||
        s.find_first_not_of("0123456789.-+eE") == std::string::npos) {
      out << YAML::DoubleQuoted << s;
    } else {
      out << s;
    }
  } else if (j.is_boolean()) {
    out << j.get<bool>();
  } else if (j.is_number_integer()) {
    out << j.get<int64_t>();
  } else if (j.is_number()) {
    out << j.get<double>();
  } else {
    out << YAML::Null;
  }
}

}  // namespace

const std::vector<ResourceNames>& AllResources() {
  static const std::vector<ResourceNames> kResources = {
      {kKindVolume, "pillarvolumestates", "pillarvolumestate", {"pvst"}},
      {kKindAgent, "pillaragents", "pillaragent", {}},
      {kKindNode, "pillarnodes", "pillarnode", {}},
      {kKindSnapshot, "pillarsnapshots", "pillarsnapshot", {"psnap"}},
  };
  return kResources;
}

const ResourceNames* FindResource(const std::string& kind) {
  for (const auto& r : AllResources()) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

std::vector<json> CustomResourceDefinitions() {
  std::vector<json> out;
  out.push_back(Crd(*FindResource(kKindVolume), VolumeSchema(),
                    {Column("Agent", "string", ".spec.agentRef", "the storage node's agent"),
                     Column("Protocol", "string", ".spec.protocol", "nvmeof-tcp, iscsi or nfs"),
                     Column("Published", "string", ".status.publishedNodes[*].nodeID",
                            "nodes the volume is published to"),
                     Column("Reconciled", "string", ConditionPath(kCondExportReconciled, "status"),
                            "the kernel export matches the recorded intent"),
                     Column("Reason", "string", ConditionPath(kCondExportReconciled, "reason"),
                            "why ExportReconciled is what it is")}));
  out.push_back(Crd(*FindResource(kKindAgent), AgentSchema(),
                    {Column("Address", "string", ".spec.address", "gRPC address"),
                     Column("Port", "integer", ".spec.port", "gRPC port"),
                     Column("Connected", "string", ConditionPath(kCondAgentConnected, "status"),
                            "the controller reaches the agent")}));
  out.push_back(Crd(*FindResource(kKindNode), NodeSchema(),
                    {Column("NQN", "string", ".spec.hostNQN", "NVMe host NQN"),
                     Column("IQN", "string", ".spec.initiatorIQN", "iSCSI initiator IQN"),
                     Column("Addresses", "string", ".spec.ipAddresses", "IP addresses"),
                     Column("LastSeen", "string", ".spec.lastSeen", "last report")}));
  out.push_back(
      Crd(*FindResource(kKindSnapshot), SnapshotSchema(),
          {Column("Source", "string", ".spec.sourceVolumeID", "the volume it was taken of"),
           Column("Agent", "string", ".spec.agentRef", "the storage node's agent"),
           Column("Ready", "boolean", ".status.readyToUse", "can be restored"),
           Column("Size", "integer", ".status.sizeBytes", "the source's size when taken"),
           Column("Reason", "string", ConditionPath(kCondSnapshotReady, "reason"),
                  "why Ready is what it is")}));
  return out;
}

std::string CrdYaml(const json& crd) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  Emit(out, crd);
  return std::string("# Generated by `pillarctl crds` from src/api; do not edit.\n") + out.c_str() +
         "\n";
}

}  // namespace pillar::api
