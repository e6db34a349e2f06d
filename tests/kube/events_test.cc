// Events and CRD installation against a scripted API server (the real one
// runs them in tests/k8s/suites).
#include "kube/events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "kube/manual_clock.h"
#include "store/kube/crd_install.h"

namespace pillar::kube {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class RecordingServer : public Rest {
 public:
  StatusOr<json> Call(const std::string& method, const std::string& path,
                      const std::optional<json>& body) override {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(method + " " + path);
    if (refuse) return PermissionDenied("events is forbidden");
    if (body) bodies.push_back(*body);
    return json::object();
  }
  std::mutex mu;
  std::vector<std::string> calls;
  std::vector<json> bodies;
  bool refuse = false;
};

using testing::ManualClock;

ObjectRef Volume(const std::string& name) {
  return {"pillar-csi.bhyoo.com/v1alpha1", "PillarVolumeState", name, "uid-" + name, "42"};
}

TEST(KubeEventSinkTest, PostsACoreEventAboutTheObject) {
  RecordingServer server;
  ManualClock clock;
  EventSinkOptions o;
  o.namespace_name = "pillar";
  o.host = "controller-0";
  KubeEventSink sink(server, clock, o);
  sink.Record(Volume("pvc-1"), true, "AgentUnavailable", "agent storage-1: connection refused");
  sink.Flush();
  ASSERT_EQ(server.calls.size(), 1u);
  EXPECT_EQ(server.calls[0], "POST /api/v1/namespaces/pillar/events");
  const json& e = server.bodies[0];
  EXPECT_EQ(e["kind"], "Event");
  EXPECT_EQ(e["metadata"]["namespace"], "pillar");
  EXPECT_THAT(e["metadata"]["name"].get<std::string>(), ::testing::StartsWith("pvc-1."));
  EXPECT_EQ(e["involvedObject"]["kind"], "PillarVolumeState");
  EXPECT_EQ(e["involvedObject"]["name"], "pvc-1");
  EXPECT_EQ(e["involvedObject"]["uid"], "uid-pvc-1");
  EXPECT_EQ(e["involvedObject"]["apiVersion"], "pillar-csi.bhyoo.com/v1alpha1");
  EXPECT_FALSE(e["involvedObject"].contains("namespace")) << "a cluster-scoped object";
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["reason"], "AgentUnavailable");
  EXPECT_EQ(e["message"], "agent storage-1: connection refused");
  EXPECT_EQ(e["source"]["host"], "controller-0");
  EXPECT_EQ(sink.posted(), 1u);
}

TEST(KubeEventSinkTest, RateLimitedPerObjectWithABurstThatRefills) {
  RecordingServer server;
  ManualClock clock;
  EventSinkOptions o;
  o.burst = 3;
  o.refill = std::chrono::seconds(30);
  KubeEventSink sink(server, clock, o);
  for (int i = 0; i < 10; ++i) sink.Record(Volume("pvc-flap"), i % 2 == 1, "R", "m");
  sink.Record(Volume("pvc-other"), false, "Reconciled", "ok");  // its own bucket
  sink.Flush();
  EXPECT_EQ(sink.posted(), 4u) << "3 of the flapping volume, 1 of the other";
  EXPECT_EQ(sink.dropped(), 7u);
  clock.elapsed += std::chrono::seconds(31);  // one token back
  sink.Record(Volume("pvc-flap"), false, "Reconciled", "ok");
  sink.Record(Volume("pvc-flap"), false, "Reconciled", "ok");
  sink.Flush();
  EXPECT_EQ(sink.posted(), 5u);
  EXPECT_EQ(sink.dropped(), 8u);
}

TEST(KubeEventSinkTest, ARefusedEventIsCountedAndNothingElseHappens) {
  RecordingServer server;
  server.refuse = true;
  ManualClock clock;
  KubeEventSink sink(server, clock, {});
  sink.Record(Volume("pvc-1"), false, "Reconciled", "ok");
  sink.Flush();
  EXPECT_EQ(sink.failed(), 1u);
  EXPECT_EQ(sink.posted(), 0u);
}

TEST(KubeEventSinkTest, WhatIsQueuedIsPostedBeforeTheSinkGoes) {
  RecordingServer server;
  ManualClock clock;
  {
    KubeEventSink sink(server, clock, {});
    for (int i = 0; i < 3; ++i) sink.Record(Volume("pvc-" + std::to_string(i)), false, "R", "m");
  }
  EXPECT_EQ(server.calls.size(), 3u);
}

// The API server's CRD collection: GET answers what was created, Established
// once `establish_after` more GETs of it have been asked.
class CrdServer : public Rest {
 public:
  StatusOr<json> Call(const std::string& method, const std::string& path,
                      const std::optional<json>& body) override {
    calls.push_back(method + " " + path);
    const std::string base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    if (forbid) return PermissionDenied("customresourcedefinitions is forbidden");
    if (method == "POST" && path == base) {
      std::string name = (*body)["metadata"]["name"];
      if (crds.count(name) != 0) return AlreadyExists(name);
      crds[name] = *body;
      return *body;
    }
    if (method == "GET" && path.rfind(base + "/", 0) == 0) {
      std::string name = path.substr(base.size() + 1);
      auto it = crds.find(name);
      if (it == crds.end()) return NotFound(name);
      json crd = it->second;
      if (gets[name]++ >= establish_after) {
        crd["status"]["conditions"] = {{{"type", "Established"}, {"status", "True"}}};
      }
      return crd;
    }
    return Unimplemented(method + " " + path);
  }
  std::map<std::string, json> crds;
  std::map<std::string, int> gets;
  std::vector<std::string> calls;
  int establish_after = 0;
  bool forbid = false;
};

TEST(EnsureCrdsTest, CreatesWhatIsAbsentLeavesWhatIsThereAndWaitsForEstablished) {
  CrdServer server;
  server.establish_after = 3;
  // One is there already (a chart's), with content of its own: left alone.
  server.crds["pillarnodes.pillar-csi.bhyoo.com"] = {{"metadata", {{"name", "mine"}}}};
  auto r = store::EnsureCrds(server, std::chrono::seconds(10), std::chrono::milliseconds(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->created.size(), 3u);
  EXPECT_THAT(r->present, ::testing::ElementsAre("pillarnodes.pillar-csi.bhyoo.com"));
  EXPECT_EQ(server.crds["pillarnodes.pillar-csi.bhyoo.com"]["metadata"]["name"], "mine");
  EXPECT_EQ(server.crds.at("pillarvolumestates.pillar-csi.bhyoo.com")["spec"]["group"],
            "pillar-csi.bhyoo.com");
  for (const auto& [name, n] : server.gets) EXPECT_GT(n, 3) << name << " polled until Established";
}

TEST(EnsureCrdsTest, NeverEstablishedIsUnavailableAndForbiddenSaysSo) {
  CrdServer server;
  server.establish_after = 1 << 30;
  auto r = store::EnsureCrds(server, std::chrono::milliseconds(50), std::chrono::milliseconds(5));
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("not Established"));

  CrdServer forbidden;
  forbidden.forbid = true;
  auto f = store::EnsureCrds(forbidden, std::chrono::seconds(1));
  EXPECT_EQ(f.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(f.status().message(), HasSubstr("CustomResourceDefinition"));
}

}  // namespace
}  // namespace pillar::kube
