// Leader election and TokenReview decisions against a scripted API server
// (the real API server runs them in tests/k8s).
#include "kube/lease.h"

#include <gtest/gtest.h>

#include <map>

#include "kube/manual_clock.h"
#include "kube/token_review.h"

namespace pillar::kube {
namespace {

using nlohmann::json;

// Holds one Lease with a resourceVersion, as the API server would: POST
// refuses an existing name, PUT refuses a stale resourceVersion.
class FakeLeaseServer : public Rest {
 public:
  StatusOr<json> Call(const std::string& method, const std::string& path,
                      const std::optional<json>& body) override {
    calls++;
    if (down) return Unavailable("connection refused");
    if (method == "GET") {
      if (!lease) return NotFound("leases not found");
      return *lease;
    }
    if (method == "POST") {
      if (lease) return AlreadyExists("lease exists");
      lease = *body;
      (*lease)["metadata"]["resourceVersion"] = std::to_string(++rv);
      return *lease;
    }
    if (method == "PUT") {
      if (!lease) return NotFound("leases not found");
      if ((*body)["metadata"].value("resourceVersion", "") !=
          (*lease)["metadata"].value("resourceVersion", "")) {
        return Aborted("the object has been modified");
      }
      lease = *body;
      (*lease)["metadata"]["resourceVersion"] = std::to_string(++rv);
      return *lease;
    }
    return Unimplemented(method + " " + path);
  }
  std::string Holder() const { return lease ? (*lease)["spec"].value("holderIdentity", "") : ""; }

  std::optional<json> lease;
  int rv = 0;
  int calls = 0;
  bool down = false;
};

using testing::ManualClock;

LeaseOptions Options(const std::string& identity) {
  LeaseOptions o;
  o.namespace_name = "pillar";
  o.identity = identity;
  o.lease_duration = std::chrono::seconds(15);
  o.renew_deadline = std::chrono::seconds(10);
  return o;
}

TEST(LeaseElectorTest, ReleaseHandsTheLeaseOverAtOnceAndOnlyByItsHolder) {
  FakeLeaseServer server;
  ManualClock clock_a, clock_b;
  LeaseElector a(server, clock_a, Options("controller-a"));
  LeaseElector b(server, clock_b, Options("controller-b"));
  ASSERT_TRUE(a.TryAcquireOrRenew());
  EXPECT_FALSE(b.TryAcquireOrRenew());
  EXPECT_TRUE(b.Release().ok()) << "not the holder: nothing to give up";
  EXPECT_EQ(server.Holder(), "controller-a");

  ASSERT_TRUE(a.Release().ok());
  EXPECT_FALSE(a.IsLeader());
  EXPECT_EQ(server.Holder(), "");
  EXPECT_TRUE(b.TryAcquireOrRenew()) << "a released lease is taken without waiting";
  EXPECT_EQ(server.Holder(), "controller-b");
}

TEST(LeaseElectorTest, OneLeaderAtATimeAndTakeoverOnlyAfterAFullSilentDuration) {
  FakeLeaseServer server;
  ManualClock clock_a, clock_b;
  LeaseElector a(server, clock_a, Options("controller-a"));
  LeaseElector b(server, clock_b, Options("controller-b"));
  EXPECT_TRUE(a.TryAcquireOrRenew()) << "no lease: the first candidate creates it";
  EXPECT_FALSE(b.TryAcquireOrRenew());
  EXPECT_EQ(server.Holder(), "controller-a");
  EXPECT_EQ(b.ObservedHolder(), "controller-a");
  EXPECT_EQ(server.lease->at("spec").value("leaseDurationSeconds", 0), 15);

  // a renews every few seconds: b never takes over, however long it waits.
  for (int i = 0; i < 20; ++i) {
    clock_a.SleepFor(std::chrono::seconds(2));
    clock_b.SleepFor(std::chrono::seconds(2));
    ASSERT_TRUE(a.TryAcquireOrRenew()) << i;
    ASSERT_FALSE(b.TryAcquireOrRenew()) << i;
  }
  // a dies. b waits one whole lease duration of silence, measured by b.
  clock_b.SleepFor(std::chrono::seconds(14));
  EXPECT_FALSE(b.TryAcquireOrRenew()) << "14 s of silence is not 15";
  clock_b.SleepFor(std::chrono::seconds(2));
  EXPECT_TRUE(b.TryAcquireOrRenew());
  EXPECT_EQ(server.Holder(), "controller-b");
  EXPECT_EQ(server.lease->at("spec").value("leaseTransitions", 0), 1);

  // a comes back: it sees b's lease and does not lead.
  clock_a.SleepFor(std::chrono::seconds(1));
  EXPECT_FALSE(a.TryAcquireOrRenew());
  EXPECT_FALSE(a.IsLeader());
}

TEST(LeaseElectorTest, ConcurrentTakeoverHasOneWinner) {
  FakeLeaseServer server;
  ManualClock clock;
  LeaseElector a(server, clock, Options("controller-a"));
  LeaseElector b(server, clock, Options("controller-b"));
  LeaseElector c(server, clock, Options("controller-c"));
  ASSERT_TRUE(c.TryAcquireOrRenew());
  EXPECT_FALSE(a.TryAcquireOrRenew());
  EXPECT_FALSE(b.TryAcquireOrRenew());
  clock.SleepFor(std::chrono::seconds(16));  // c is silent for a whole duration
  // Both saw the same resourceVersion; only the first PUT can win.
  bool first = a.TryAcquireOrRenew();
  bool second = b.TryAcquireOrRenew();
  EXPECT_TRUE(first);
  EXPECT_FALSE(second) << "the second PUT carries a stale resourceVersion";
  EXPECT_EQ(server.Holder(), "controller-a");
}

TEST(LeaseElectorTest, LeaderStopsLeadingAfterTheRenewDeadline) {
  FakeLeaseServer server;
  ManualClock clock;
  LeaseElector a(server, clock, Options("controller-a"));
  ASSERT_TRUE(a.TryAcquireOrRenew());
  server.down = true;
  clock.SleepFor(std::chrono::seconds(5));
  EXPECT_TRUE(a.TryAcquireOrRenew()) << "within the renew deadline it still leads";
  clock.SleepFor(std::chrono::seconds(6));
  EXPECT_FALSE(a.TryAcquireOrRenew()) << "past the renew deadline it must stop";
  EXPECT_FALSE(a.IsLeader());
}

class FakeTokenReviews : public Rest {
 public:
  StatusOr<json> Call(const std::string& method, const std::string& path,
                      const std::optional<json>& body) override {
    if (method != "POST" || path != "/apis/authentication.k8s.io/v1/tokenreviews") {
      return Unimplemented(path);
    }
    last = *body;
    auto it = tokens.find((*body)["spec"].value("token", ""));
    if (it == tokens.end()) return json{{"status", {{"authenticated", false}, {"error", "bad"}}}};
    return it->second;
  }
  static json Review(const std::string& user, const std::string& node, const std::string& aud) {
    json extra = json::object();
    if (!node.empty()) extra["authentication.kubernetes.io/node-name"] = {node};
    return {{"status",
             {{"authenticated", true},
              {"audiences", {aud}},
              {"user", {{"username", user}, {"extra", extra}}}}}};
  }
  std::map<std::string, json> tokens;
  json last;
};

TEST(TokenReviewerTest, OnlyTheNodePluginSpeaksAndOnlyForItsOwnNode) {
  FakeTokenReviews api;
  const std::string sa = "system:serviceaccount:pillar:pillar-node";
  api.tokens["good"] = FakeTokenReviews::Review(sa, "node-a", "pillar-csi.bhyoo.com");
  api.tokens["other-sa"] = FakeTokenReviews::Review("system:serviceaccount:default:app", "node-a",
                                                    "pillar-csi.bhyoo.com");
  api.tokens["no-node"] = FakeTokenReviews::Review(sa, "", "pillar-csi.bhyoo.com");
  api.tokens["other-aud"] = FakeTokenReviews::Review(sa, "node-a", "https://kubernetes.default");
  TokenReviewer reviewer(api, "pillar-csi.bhyoo.com", "pillar:pillar-node");

  auto who = reviewer.Review("good");
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->node_name, "node-a");
  EXPECT_EQ(api.last["spec"]["audiences"][0], "pillar-csi.bhyoo.com");
  EXPECT_TRUE(CheckNodeClaim(*who, "node-a").ok());
  Status forged = CheckNodeClaim(*who, "node-b");
  EXPECT_EQ(forged.code(), Code::kPermissionDenied);
  EXPECT_NE(forged.message().find("node-b"), std::string::npos);

  EXPECT_EQ(reviewer.Review("forged").status().code(), Code::kUnauthenticated);
  EXPECT_EQ(reviewer.Review("").status().code(), Code::kUnauthenticated);
  EXPECT_EQ(reviewer.Review("other-aud").status().code(), Code::kUnauthenticated);
  EXPECT_EQ(reviewer.Review("other-sa").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(reviewer.Review("no-node").status().code(), Code::kPermissionDenied);
}

}  // namespace
}  // namespace pillar::kube
