// The Kubernetes backend's own rules that need no server: which names
// Kubernetes accepts, and what it makes of a malformed object from the API
// server (an error for that object, never a crash or a half-read object).
// Its behaviour against a real API server is tests/store/kube_store_live_test.cc.
#include "store/kube/kube_store.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace pillar::store {
namespace {

TEST(KubeStoreNames, Dns1123SubdomainsOnly) {
  for (const std::string& good : {std::string("pvc-0a1b"), std::string("a.b-c"), std::string("0"),
                                  std::string(253, 'x'), std::string("node-1.example.com")}) {
    EXPECT_TRUE(ValidateKubeName("name", good).ok()) << good;
  }
  for (const std::string& bad :
       {std::string(""), std::string("UPPER"), std::string("a..b"), std::string("-a"),
        std::string("a-"), std::string(".a"), std::string("a."), std::string("tank:vol"),
        std::string("a_b"), std::string(254, 'x'), std::string("ü")}) {
    Status s = ValidateKubeName("name", bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("name"), std::string::npos) << s.ToString();
  }
}

nlohmann::json Good() {
  return nlohmann::json::parse(R"({
    "apiVersion": "pillar-csi.bhyoo.com/v1alpha1", "kind": "PillarNode",
    "metadata": {"name": "node-a", "uid": "0b5c3a52-4a8e-4f59-9d2e-3f3a7cbe1a10",
                 "resourceVersion": "1234", "generation": 2,
                 "creationTimestamp": "2026-01-02T03:04:05Z",
                 "labels": {"zone": "z1"}, "annotations": {"a": "b"},
                 "managedFields": [{"manager": "kubectl"}], "finalizers": ["x/y"]},
    "spec": {"nodeID": "node-a"}, "status": {"lastSeen": "2026-01-02T03:04:05Z"}})");
}

TEST(KubeStoreFromJson, ReadsWhatTheStoreModelsAndIgnoresTheRest) {
  auto o = FromKubeJson("PillarNode", Good());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->kind, "PillarNode");
  EXPECT_EQ(o->name, "node-a");
  EXPECT_EQ(o->resource_version, "1234");
  EXPECT_EQ(o->generation, 2);
  EXPECT_EQ(o->labels.at("zone"), "z1");
  EXPECT_EQ(o->spec["nodeID"], "node-a");
  EXPECT_EQ(o->status["lastSeen"], "2026-01-02T03:04:05Z");
  EXPECT_FALSE(o->deletion_timestamp);

  // Kubernetes leaves out empty maps: no spec, status or labels is empty.
  nlohmann::json bare = Good();
  bare.erase("spec");
  bare.erase("status");
  bare["metadata"].erase("labels");
  auto b = FromKubeJson("PillarNode", bare);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->spec.empty());
  EXPECT_TRUE(b->status.empty());
  EXPECT_TRUE(b->labels.empty());
}

TEST(KubeStoreFromJson, MalformedObjectsAreInvalidArgumentNamingTheObject) {
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Case> cases = {
      {"no metadata", [](nlohmann::json& j) { j.erase("metadata"); }},
      {"metadata an array", [](nlohmann::json& j) { j["metadata"] = nlohmann::json::array(); }},
      {"no name", [](nlohmann::json& j) { j["metadata"].erase("name"); }},
      {"no uid", [](nlohmann::json& j) { j["metadata"].erase("uid"); }},
      {"no resourceVersion", [](nlohmann::json& j) { j["metadata"].erase("resourceVersion"); }},
      {"resourceVersion a number", [](nlohmann::json& j) { j["metadata"]["resourceVersion"] = 5; }},
      {"generation a string", [](nlohmann::json& j) { j["metadata"]["generation"] = "2"; }},
      {"spec a string", [](nlohmann::json& j) { j["spec"] = "x"; }},
      {"status an array", [](nlohmann::json& j) { j["status"] = nlohmann::json::array(); }},
      {"label a number", [](nlohmann::json& j) { j["metadata"]["labels"]["zone"] = 1; }},
  };
  for (const auto& c : cases) {
    nlohmann::json j = Good();
    c.edit(j);
    auto o = FromKubeJson("PillarNode", j);
    EXPECT_EQ(o.status().code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(o.status().message().find("PillarNode"), std::string::npos)
        << c.what << ": " << o.status().ToString();
  }
  EXPECT_EQ(FromKubeJson("PillarNode", nlohmann::json("x")).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace pillar::store
