#include "common/peer_identity.h"

#include <gtest/gtest.h>

namespace pillar {
namespace {

TEST(PeerIdentityTest, ParsesEachRole) {
  for (const char* role : {"controller", "agent", "node", "operator"}) {
    std::string uri = std::string("pillar-csi://") + role + "/node-a.example";
    auto id = ParseIdentityUri(uri);
    ASSERT_TRUE(id.ok()) << uri << ": " << id.status().ToString();
    EXPECT_EQ(RoleName(id->role), role);
    EXPECT_EQ(id->name, "node-a.example");
    EXPECT_EQ(id->Uri(), uri);
  }
}

TEST(PeerIdentityTest, RefusesWhatIsNotExactlyOneRoleAndOneName) {
  for (const char* uri :
       {"", "pillar-csi://", "pillar-csi://node", "pillar-csi://node/",
        "pillar-csi://admin/x",        // no such role
        "pillar-csi://Node/node-a",    // roles are lower case
        "pillar-csi://node/node-a/x",  // a path is not a name
        "pillar-csi://node/Node-A", "pillar-csi://node/-a", "pillar-csi://node/a b",
        "pillar-csi://node/a\n", "PILLAR-CSI://node/a", "spiffe://node/a",
        "https://pillar-csi://node/a", " pillar-csi://node/a"}) {
    auto id = ParseIdentityUri(uri);
    EXPECT_EQ(id.status().code(), Code::kInvalidArgument) << "\"" << uri << "\"";
  }
  std::string long_name = "pillar-csi://node/" + std::string(254, 'a');
  EXPECT_FALSE(ParseIdentityUri(long_name).ok());
}

TEST(PeerIdentityTest, ACertificateMustCarryExactlyOnePillarUri) {
  auto one = IdentityFromUris({"spiffe://cluster/ns/x", "pillar-csi://node/node-a"});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->role, Role::kNode);
  EXPECT_EQ(IdentityFromUris({}).status().code(), Code::kUnauthenticated);
  EXPECT_EQ(IdentityFromUris({"spiffe://x/y"}).status().code(), Code::kUnauthenticated);
  auto two = IdentityFromUris({"pillar-csi://node/node-a", "pillar-csi://controller/c"});
  EXPECT_EQ(two.status().code(), Code::kUnauthenticated);
  EXPECT_NE(two.status().message().find("want one"), std::string::npos);
  auto bad = IdentityFromUris({"pillar-csi://root/x"});
  EXPECT_EQ(bad.status().code(), Code::kUnauthenticated);
}

TEST(PeerIdentityTest, ANodeActsOnlyForItself) {
  EXPECT_TRUE(CheckActsForNode({Role::kNode, "node-a"}, "node-a").ok());
  auto other = CheckActsForNode({Role::kNode, "node-b"}, "node-a");
  EXPECT_EQ(other.code(), Code::kPermissionDenied);
  EXPECT_NE(other.message().find("pillar-csi://node/node-b"), std::string::npos);
  EXPECT_NE(other.message().find("node-a"), std::string::npos);
  EXPECT_FALSE(CheckActsForNode({Role::kController, "node-a"}, "node-a").ok());
  EXPECT_FALSE(CheckActsForNode({Role::kOperator, "node-a"}, "node-a").ok());
}

TEST(PeerIdentityTest, PolicyDeniesMethodsWithoutAnEntry) {
  RpcPolicy policy = AgentRpcPolicy();
  PeerIdentity controller{Role::kController, "c"};
  EXPECT_TRUE(policy.Admit("/pillar.agent.v1.Agent/ApplyExport", controller).ok());
  EXPECT_EQ(policy.Admit("/pillar.agent.v1.Agent/NewRpc", controller).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(policy.Admit("", controller).code(), Code::kPermissionDenied);
  PeerIdentity op{Role::kOperator, "admin"};
  EXPECT_TRUE(policy.Admit("/pillar.agent.v1.Agent/ListExports", op).ok());
  EXPECT_EQ(policy.Admit("/pillar.agent.v1.Agent/DeleteVolume", op).code(),
            Code::kPermissionDenied);
  StatusOr<PeerIdentity> nobody = Unauthenticated("no certificate");
  EXPECT_EQ(policy.Admit("/pillar.agent.v1.Agent/GetInfo", nobody).code(), Code::kUnauthenticated);
  RpcPolicy registry = RegistryRpcPolicy();
  EXPECT_TRUE(registry
                  .Admit("/pillar.registry.v1.NodeRegistry/RegisterNode",
                         PeerIdentity{Role::kNode, "node-a"})
                  .ok());
  EXPECT_EQ(registry.Admit("/pillar.registry.v1.NodeRegistry/RegisterNode", controller).code(),
            Code::kPermissionDenied);
}

// Issue 22, item 1: the server of a channel must be exactly who the client
// meant to reach.
TEST(PeerIdentityTest, ExpectedPeerIsTheRoleAndTheName) {
  ExpectedPeer storage1{Role::kAgent, "storage-1"};
  EXPECT_TRUE(CheckExpectedPeer(storage1, PeerIdentity{Role::kAgent, "storage-1"}).ok());
  Status other_agent = CheckExpectedPeer(storage1, PeerIdentity{Role::kAgent, "storage-2"});
  EXPECT_EQ(other_agent.code(), Code::kPermissionDenied);
  EXPECT_NE(other_agent.message().find("peer presents pillar-csi://agent/storage-2 where "
                                       "pillar-csi://agent/storage-1 was expected"),
            std::string::npos)
      << other_agent.message();
  EXPECT_EQ(CheckExpectedPeer(storage1, PeerIdentity{Role::kNode, "storage-1"}).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(CheckExpectedPeer(storage1, PeerIdentity{Role::kOperator, "storage-1"}).code(),
            Code::kPermissionDenied);
  StatusOr<PeerIdentity> none = Unauthenticated("certificate carries no pillar-csi URI SAN");
  EXPECT_EQ(CheckExpectedPeer(storage1, none).code(), Code::kUnauthenticated);
  // A role without a name: any controller, but only a controller.
  ExpectedPeer any_controller{Role::kController, std::nullopt};
  EXPECT_TRUE(CheckExpectedPeer(any_controller, PeerIdentity{Role::kController, "c-1"}).ok());
  EXPECT_EQ(CheckExpectedPeer(any_controller, PeerIdentity{Role::kAgent, "c-1"}).code(),
            Code::kPermissionDenied);
}

}  // namespace
}  // namespace pillar
