// The API package: JSON conversions name the field they refuse, every field
// the conversions write is declared by the CRD schema (the API server would
// silently prune an undeclared one), the schemas refuse what the design
// forbids, and deploy/crds/ is exactly what the one definition generates.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "api/convert.h"
#include "api/crd.h"

namespace pillar::api {
namespace {

using nlohmann::json;

// A small checker for the subset of OpenAPI v3 the CRDs use; returns the
// first violation as "path: why", or "" when `value` fits.
std::string Check(const json& schema, const json& value, const std::string& path) {
  const std::string type = schema.value("type", "");
  if (type == "object") {
    if (!value.is_object()) return path + ": not an object";
    for (const auto& r : schema.value("required", json::array())) {
      if (!value.contains(r.get<std::string>()))
        return path + "." + r.get<std::string>() + ": required";
    }
    for (const auto& [k, v] : value.items()) {
      if (schema.contains("properties") && schema["properties"].contains(k)) {
        auto e = Check(schema["properties"][k], v, path + "." + k);
        if (!e.empty()) return e;
      } else if (schema.contains("additionalProperties")) {
        auto e = Check(schema["additionalProperties"], v, path + "." + k);
        if (!e.empty()) return e;
      } else {
        return path + "." + k + ": not declared in the schema (would be pruned)";
      }
    }
  } else if (type == "array") {
    if (!value.is_array()) return path + ": not an array";
    for (size_t i = 0; i < value.size(); ++i) {
      auto e = Check(schema["items"], value[i], path + "[" + std::to_string(i) + "]");
      if (!e.empty()) return e;
    }
  } else if (type == "string") {
    if (!value.is_string()) return path + ": not a string";
    const auto& s = value.get_ref<const std::string&>();
    if (schema.contains("minLength") && s.size() < schema["minLength"].get<size_t>()) {
      return path + ": shorter than minLength";
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const auto& e : schema["enum"]) found = found || e == value;
      if (!found) return path + ": not in enum";
    }
  } else if (type == "integer") {
    if (!value.is_number_integer()) return path + ": not an integer";
    if (schema.contains("minimum") && value.get<int64_t>() < schema["minimum"].get<int64_t>()) {
      return path + ": below minimum";
    }
    if (schema.contains("maximum") && value.get<int64_t>() > schema["maximum"].get<int64_t>()) {
      return path + ": above maximum";
    }
  } else if (type == "boolean") {
    if (!value.is_boolean()) return path + ": not a boolean";
  }
  return "";
}

const json& SchemaOf(const std::string& kind) {
  static const auto crds = CustomResourceDefinitions();
  for (const auto& crd : crds) {
    if (crd["spec"]["names"]["kind"] == kind) {
      return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    }
  }
  static const json none;
  ADD_FAILURE() << "no CRD for " << kind;
  return none;
}

VolumeState FullVolume() {
  VolumeState v;
  v.spec = {"pvc-1", "storage-1", "tank/pvc-1", Protocol::kIscsi,
            1 << 30, "mount",     "xfs",        json{{"pool", "tank"}}};
  v.status.backend = "zfs";
  v.status.export_spec = ExportSpec{"10.0.0.5", 3260, true, 8192};
  v.status.export_info =
      ExportInfo{"iqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1", "10.0.0.5", 3260, "tank/pvc-1"};
  v.status.published_nodes = {{"node-a", false}, {"node-b", true}};
  v.status.publication_generation = 4;
  v.status.deleting = false;
  v.status.conditions = {
      {kCondExportReconciled, "True", kReasonReconciled, "ok", "2026-12-03T08:00:00Z", 1}};
  v.status.capacity_bytes = 1 << 30;
  return v;
}

TEST(ApiConvertTest, VolumeRoundTripsThroughJson) {
  VolumeState v = FullVolume();
  auto spec = VolumeSpecFromJson(ToJson(v.spec));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(*spec, v.spec);
  auto status = VolumeStatusFromJson(ToJson(v.status));
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->export_spec, v.status.export_spec);
  EXPECT_EQ(status->export_info, v.status.export_info);
  EXPECT_EQ(status->published_nodes, v.status.published_nodes);
  EXPECT_EQ(status->publication_generation, 4);
  EXPECT_EQ(status->conditions, v.status.conditions);
  EXPECT_EQ(ToJson(v.spec)["protocol"], "iscsi") << "the protocol is stored by its one name";
}

TEST(ApiConvertTest, MalformedRecordsNameTheField) {
  auto expect = [](const Status& s, const std::string& field) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  };
  json spec = ToJson(FullVolume().spec);
  spec["protocol"] = "fc";
  expect(VolumeSpecFromJson(spec).status(), "spec.protocol");
  spec.erase("protocol");
  expect(VolumeSpecFromJson(spec).status(), "spec.protocol");
  json es = {{"bindAddress", ""}, {"port", 4420}, {"aclEnabled", true}};
  expect(ExportSpecFromJson(es).status(), "status.exportSpec.bindAddress");
  es = {{"bindAddress", "10.0.0.5"}, {"port", 70000}, {"aclEnabled", true}};
  expect(ExportSpecFromJson(es).status(), "status.exportSpec.port");
  es = {{"bindAddress", "10.0.0.5"}, {"port", 4420}};
  expect(ExportSpecFromJson(es).status(), "status.exportSpec.aclEnabled");
  es = {{"bindAddress", "10.0.0.5"}, {"port", 4420}, {"aclEnabled", "yes"}};
  expect(ExportSpecFromJson(es).status(), "status.exportSpec.aclEnabled");
  json status = ToJson(FullVolume().status);
  status["publishedNodes"][1] = {{"revoking", true}};
  expect(VolumeStatusFromJson(status).status(), "status.publishedNodes[1].nodeID");
  status = ToJson(FullVolume().status);
  status["conditions"][0]["status"] = 1;
  expect(VolumeStatusFromJson(status).status(), "status.conditions[0].status");
  expect(ExportInfoFromJson(json{{"port", "x"}}).status(), "status.exportInfo.port");
}

TEST(ApiConvertTest, LoadersUseTheStoreMetadata) {
  store::Object o;
  o.kind = kKindVolume;
  o.name = "pvc-1";
  o.uid = "u-1";
  o.generation = 3;
  o.spec = ToJson(FullVolume().spec);
  o.status = ToJson(FullVolume().status);
  auto v = LoadVolume(o);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->meta.name, "pvc-1");
  EXPECT_EQ(v->meta.uid, "u-1");
  EXPECT_EQ(v->meta.generation, 3);
  o.spec = {{"nodeID", "node-a"}, {"hostNQN", "nqn.2014-08.org.nvmexpress:uuid:1"}};
  auto n = LoadNode(o);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->node_id, "node-a");
  o.spec = {{"address", "10.0.0.5"}};
  EXPECT_EQ(LoadAgent(o).status().code(), Code::kInvalidArgument) << "port is required";
}

TEST(CrdSchemaTest, EveryFieldTheConversionsWriteIsDeclared) {
  VolumeState v = FullVolume();
  json vol = {{"spec", ToJson(v.spec)}, {"status", ToJson(v.status)}};
  EXPECT_EQ(Check(SchemaOf(kKindVolume), vol, ""), "");
  NodeRecord n;
  n.node_id = "node-a";
  n.host_nqn = "nqn.2014-08.org.nvmexpress:uuid:1";
  n.initiator_iqn = "iqn.2004-10.com.example:node-a";
  n.ip_addresses = {"10.0.0.7", "fd00::7"};
  n.last_seen = "2026-12-03T08:00:00Z";
  EXPECT_EQ(Check(SchemaOf(kKindNode), json{{"spec", NodeSpecToJson(n)}}, ""), "");
  AgentRecord a;
  a.address = "10.0.0.5";
  a.port = 9500;
  a.tls_server_name = "storage-1";
  a.boot_epoch = "e-1";
  a.conditions = {{kCondAgentConnected, "True", "Connected", "", "2026-12-03T08:00:00Z", 1}};
  EXPECT_EQ(Check(SchemaOf(kKindAgent),
                  json{{"spec", AgentSpecToJson(a)}, {"status", AgentStatusToJson(a)}}, ""),
            "");
}

TEST(CrdSchemaTest, RefusesWhatTheDesignForbids) {
  json vol = {{"spec", ToJson(FullVolume().spec)}, {"status", ToJson(FullVolume().status)}};
  auto with = [&](const std::string& field, const json& value) {
    json v = vol;
    if (value.is_null()) {
      v["status"]["exportSpec"].erase(field);
    } else {
      v["status"]["exportSpec"][field] = value;
    }
    return Check(SchemaOf(kKindVolume), v, "");
  };
  EXPECT_NE(with("bindAddress", ""), "");
  EXPECT_NE(with("bindAddress", json()), "");
  EXPECT_NE(with("port", 65536), "");
  EXPECT_NE(with("port", -1), "");
  EXPECT_NE(with("port", json()), "");
  EXPECT_NE(with("aclEnabled", "true"), "");
  EXPECT_NE(with("aclEnabled", json()), "");
  EXPECT_EQ(with("port", 0), "") << "0 means the protocol's default port";
  json bad = vol;
  bad["spec"]["protocol"] = "fc";
  EXPECT_NE(Check(SchemaOf(kKindVolume), bad, ""), "");
  bad = vol;
  bad["status"]["conditions"][0]["status"] = "Maybe";
  EXPECT_NE(Check(SchemaOf(kKindVolume), bad, ""), "");
}

TEST(CrdSchemaTest, NamesAndPrinterColumns) {
  const ResourceNames* pvst = FindResource(kKindVolume);
  ASSERT_NE(pvst, nullptr);
  EXPECT_EQ(pvst->plural, "pillarvolumestates");
  EXPECT_EQ(pvst->short_names, std::vector<std::string>{"pvst"});
  EXPECT_EQ(FindResource("Pod"), nullptr);
  for (const auto& crd : CustomResourceDefinitions()) {
    EXPECT_EQ(crd["spec"]["group"], "pillar-csi.bhyoo.com");
    EXPECT_EQ(crd["spec"]["scope"], "Cluster");
    EXPECT_EQ(crd["spec"]["versions"][0]["name"], "v1alpha1");
    EXPECT_TRUE(crd["spec"]["versions"][0]["subresources"].contains("status"));
  }
  std::string columns = SchemaOf(kKindVolume).dump();
  auto crd = CustomResourceDefinitions()[0];
  std::string printed = crd["spec"]["versions"][0]["additionalPrinterColumns"].dump();
  for (const char* c : {"Agent", "Protocol", "Published", "Reconciled", "Reason", "Age"}) {
    EXPECT_NE(printed.find(c), std::string::npos) << c;
  }
}

TEST(CrdSchemaTest, RepositoryYamlIsWhatTheDefinitionGenerates) {
  for (const auto& crd : CustomResourceDefinitions()) {
    std::string file = std::string(PILLAR_SOURCE_DIR) + "/deploy/crds/" +
                       crd["metadata"]["name"].get<std::string>() + ".yaml";
    std::ifstream in(file);
    ASSERT_TRUE(in.good()) << file << " is missing: run scripts/gen-crds.sh";
    std::stringstream kept;
    kept << in.rdbuf();
    EXPECT_EQ(kept.str(), CrdYaml(crd)) << file << " is stale: run scripts/gen-crds.sh";
  }
}

}  // namespace
}  // namespace pillar::api

namespace pillar::api {
namespace {

TEST(StoredStatusTest, OneFieldWrittenEveryOtherKept) {
  nlohmann::json status = {{"futureField", {{"x", 1}}}, {"deleting", true}};
  ExportInfo info;
  info.target_id = "nqn.2024-01.com.example:v";
  info.address = "10.0.0.1";
  info.port = 4420;
  EXPECT_TRUE(SetStoredExportInfo(status, info));
  EXPECT_FALSE(SetStoredExportInfo(status, info));  // the same again: no change
  SetStoredConditions(status, {{kCondExportReconciled, "True", "Reconciled", "ok", "", 0}});
  SetStoredExportSpec(status, ExportSpec{"10.0.0.1", 4420, true, std::nullopt});
  EXPECT_EQ(status["futureField"], (nlohmann::json{{"x", 1}}));
  EXPECT_EQ(status["deleting"], true);
  ASSERT_EQ(StoredConditions(status).size(), 1u);
  EXPECT_EQ(StoredConditions(status)[0].reason, "Reconciled");
  auto back = ExportInfoFromJson(status["exportInfo"]);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->address, "10.0.0.1");
  auto spec = ExportSpecFromJson(status["exportSpec"]);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->port, 4420);
}

TEST(StoredStatusTest, BadOrAbsentStatusIsTakenAsEmpty) {
  EXPECT_TRUE(StoredConditions(nlohmann::json()).empty());
  EXPECT_TRUE(StoredConditions(nlohmann::json{{"conditions", "not a list"}}).empty());
  nlohmann::json status = "not an object";
  SetStoredConditions(status, {});
  EXPECT_TRUE(status.is_object());
}

}  // namespace
}  // namespace pillar::api
