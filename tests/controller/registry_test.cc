// The node registry refuses a report for another node: the caller's
// ServiceAccount token, checked by TokenReview, names the node it runs on.
// Real gRPC over a unix socket, the real SQLite store, a scripted API server.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "api/convert.h"
#include "api/types.h"
#include "common/grpc_status.h"
#include "common/temp_dir.h"
#include "controller/registry_service.h"
#include "kube/manual_clock.h"
#include "store/sqlite/sqlite_store.h"

namespace pillar::controller {
namespace {

using nlohmann::json;
namespace rv1 = pillar::registry::v1;

// TokenReview as the API server answers it: token "node-a-token" belongs to
// the node plugin's ServiceAccount on node-a.
class FakeApiServer : public kube::Rest {
 public:
  StatusOr<json> Call(const std::string&, const std::string&,
                      const std::optional<json>& body) override {
    reviews++;
    std::string token = (*body)["spec"].value("token", "");
    if (token != "node-a-token") return json{{"status", {{"authenticated", false}}}};
    return json{{"status",
                 {{"authenticated", true},
                  {"audiences", {"pillar-csi.bhyoo.com"}},
                  {"user",
                   {{"username", "system:serviceaccount:pillar:pillar-node"},
                    {"extra", {{"authentication.kubernetes.io/node-name", {"node-a"}}}}}}}}};
  }
  int reviews = 0;
};

class RegistryAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::SqliteStore::Open({dir_.Sub("store.db")});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    service_ = std::make_unique<NodeRegistryService>(*store_, clock_, &authorizer_);
    grpc::ServerBuilder builder;
    std::string address = "unix://" + dir_.Sub("r.sock");
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = rv1::NodeRegistry::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  Status Register(const std::string& token, const std::string& node, const std::string& nqn) {
    rv1::RegisterNodeRequest req;
    req.mutable_identity()->set_node_id(node);
    req.mutable_identity()->set_host_nqn(nqn);
    rv1::RegisterNodeResponse resp;
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    return FromGrpc(stub_->RegisterNode(&ctx, req, &resp));
  }

  testing::TempDir dir_;
  SystemClock clock_;
  FakeApiServer api_;
  kube::TokenReviewer reviewer_{api_, "pillar-csi.bhyoo.com", "pillar:pillar-node"};
  TokenReviewAuthorizer authorizer_{reviewer_};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NodeRegistryService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<rv1::NodeRegistry::Stub> stub_;
};

const char* kNqnA = "nqn.2014-08.org.nvmexpress:uuid:0b1f7a3e-9c2d-4e5f-8a6b-1c2d3e4f5a6b";
const char* kNqnEvil = "nqn.2014-08.org.nvmexpress:uuid:eeeeeeee-9c2d-4e5f-8a6b-1c2d3e4f5a6b";

TEST_F(RegistryAuthTest, ForgedReportForAnotherNodeIsRefusedAndChangesNothing) {
  ASSERT_TRUE(Register("node-a-token", "node-a", kNqnA).ok());
  ASSERT_TRUE(Register("node-b-token-not-real", "node-b", kNqnEvil).code() ==
              Code::kUnauthenticated);

  // node-a's plugin (a valid token) claims node-b, then tries to rewrite
  // node-b... and node-a's record is untouched either way.
  auto before = store_->Get(api::kKindNode, "node-a");
  ASSERT_TRUE(before.ok());
  Status forged = Register("node-a-token", "node-b", kNqnEvil);
  EXPECT_EQ(forged.code(), Code::kPermissionDenied) << forged.ToString();
  EXPECT_NE(forged.message().find("node-b"), std::string::npos) << forged.message();
  EXPECT_EQ(store_->Get(api::kKindNode, "node-b").status().code(), Code::kNotFound)
      << "a refused report must not create the node";
  auto after = store_->Get(api::kKindNode, "node-a");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->resource_version, before->resource_version);
  EXPECT_EQ(after->spec.value("hostNQN", ""), kNqnA);

  EXPECT_EQ(Register("", "node-a", kNqnEvil).code(), Code::kUnauthenticated)
      << "no token, no report";
  EXPECT_EQ(store_->Get(api::kKindNode, "node-a")->spec.value("hostNQN", ""), kNqnA);
}

TEST_F(RegistryAuthTest, ANodeReadsOnlyItsOwnRecord) {
  ASSERT_TRUE(Register("node-a-token", "node-a", kNqnA).ok());
  auto get = [&](const std::string& node) {
    rv1::GetNodeRequest req;
    req.set_node_id(node);
    rv1::GetNodeResponse resp;
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer node-a-token");
    return FromGrpc(stub_->GetNode(&ctx, req, &resp));
  };
  EXPECT_TRUE(get("node-a").ok());
  EXPECT_EQ(get("node-b").code(), Code::kPermissionDenied);
}

TEST_F(RegistryAuthTest, MalformedNodeIdIsInvalidBeforeAnyTokenReview) {
  int before = api_.reviews;
  EXPECT_EQ(Register("node-a-token", "Bad/Node", kNqnA).code(), Code::kInvalidArgument);
  EXPECT_EQ(api_.reviews, before);
}

// Identities belong to one node each, and change at a bounded rate: the
// registry itself (no authorizer), over the real SQLite store.
class RegistryIdentityClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = store::SqliteStore::Open({dir_.Sub("store.db")});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    service_ = std::make_unique<NodeRegistryService>(*store_, clock_);
  }
  static rv1::NodeIdentity Id(const std::string& node, const std::string& nqn,
                              std::vector<std::string> ips) {
    rv1::NodeIdentity id;
    id.set_node_id(node);
    id.set_host_nqn(nqn);
    for (auto& ip : ips) id.add_ip_addresses(ip);
    return id;
  }
  Status Report(const rv1::NodeIdentity& id) {
    rv1::RegisterNodeRequest req;
    *req.mutable_identity() = id;
    rv1::RegisterNodeResponse resp;
    return FromGrpc(service_->RegisterNode(nullptr, &req, &resp));
  }
  api::NodeRecord Node(const std::string& name) {
    auto obj = store_->Get(api::kKindNode, name);
    EXPECT_TRUE(obj.ok());
    auto rec = obj.ok() ? api::LoadNode(*obj) : StatusOr<api::NodeRecord>(obj.status());
    return rec.ok() ? *rec : api::NodeRecord();
  }

  testing::TempDir dir_;
  kube::testing::ManualClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<NodeRegistryService> service_;
};

TEST_F(RegistryIdentityClaimTest, ALiveNodesNqnOrAddressCannotBeClaimedByAnother) {
  ASSERT_TRUE(Report(Id("node-a", kNqnA, {"10.0.0.11"})).ok());
  Status s = Report(Id("node-b", kNqnA, {"10.0.0.12"}));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("identity.host_nqn"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("node-a"), std::string::npos) << s.message();
  s = Report(Id("node-b", kNqnEvil, {"10.0.0.12", "10.0.0.11"}));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("10.0.0.11"), std::string::npos) << s.message();
  EXPECT_EQ(store_->Get(api::kKindNode, "node-b").status().code(), Code::kNotFound)
      << "a refused claim writes nothing";
  // A node that changes to an identity of its own is fine.
  ASSERT_TRUE(Report(Id("node-b", kNqnEvil, {"10.0.0.12"})).ok());
  EXPECT_EQ(Node("node-a").ip_addresses, std::vector<std::string>{"10.0.0.11"});
}

TEST_F(RegistryIdentityClaimTest, AStaleNodeGivesUpWhatAnotherClaimsSoNoExportAdmitsBoth) {
  ASSERT_TRUE(Report(Id("node-a", kNqnA, {"10.0.0.11", "10.0.0.21"})).ok());
  clock_.elapsed += kNodeStaleAfter + std::chrono::minutes(1);  // node-a went away
  ASSERT_TRUE(Report(Id("node-b", kNqnEvil, {"10.0.0.11"})).ok());
  EXPECT_EQ(Node("node-a").ip_addresses, std::vector<std::string>{"10.0.0.21"});
  EXPECT_EQ(Node("node-a").host_nqn, kNqnA) << "only what was claimed is given up";
  EXPECT_EQ(Node("node-b").ip_addresses, std::vector<std::string>{"10.0.0.11"});
}

TEST_F(RegistryIdentityClaimTest, IdentityChangesAreBoundedPerNodeAndRoomComesBack) {
  for (int i = 0; i < kMaxIdentityChanges; ++i) {
    ASSERT_TRUE(Report(Id("node-a", kNqnA, {"10.0.1." + std::to_string(i + 1)})).ok()) << i;
  }
  Status s = Report(Id("node-a", kNqnA, {"10.0.2.1"}));
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_NE(s.message().find("node-a"), std::string::npos) << s.message();
  EXPECT_EQ(Node("node-a").ip_addresses,
            std::vector<std::string>{"10.0.1." + std::to_string(kMaxIdentityChanges)});
  // The same identity again is no change: never refused.
  EXPECT_TRUE(Report(Id("node-a", kNqnA, {"10.0.1." + std::to_string(kMaxIdentityChanges)})).ok());
  // Another node has its own budget.
  EXPECT_TRUE(Report(Id("node-b", kNqnEvil, {"10.0.3.1"})).ok());
  clock_.elapsed += kIdentityChangeWindow;
  EXPECT_TRUE(Report(Id("node-a", kNqnA, {"10.0.2.1"})).ok());
  EXPECT_EQ(Node("node-a").ip_addresses, std::vector<std::string>{"10.0.2.1"});
}

}  // namespace
}  // namespace pillar::controller
