// Issue 11's attack, end to end: a consumer node holding a certificate from
// the shared CA reports itself as another node. The real controller serves
// the registry over mutual TLS, the real agent exports a volume to node-a,
// and node-b's certificate tries to take node-a's place, by a direct call and
// by running the real pillar-node with --node-id node-a.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/service/agent_process.h"
#include "common/exec.h"
#include "common/grpc_tls.h"
#include "controller/controller_process.h"
#include "store/sqlite/sqlite_store.h"

namespace pillar::testing {
namespace {

namespace fs = std::filesystem;
namespace rv1 = pillar::registry::v1;
using csi::v1::VolumeCapability;

constexpr const char* kNqnA =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555";
constexpr const char* kNqnB =
    "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

// True when `pred` held within `timeout`.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::seconds timeout) {
  return WaitForMs(pred, timeout) >= 0;
}

class RegistryIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || !fs::exists("/dev/loop-control")) {
      GTEST_SKIP() << "needs root and loop devices";
    }
    agent_ = AgentProcess::StartWithCerts(tmp_.path());
    ASSERT_NE(agent_, nullptr) << ReadWholeFile(tmp_.Sub("agent.log"));
    controller_ = std::make_unique<ControllerProcess>(tmp_.path());
    controller_->UseRegistryTls();
    ASSERT_TRUE(controller_->Start(agent_->port())) << ReadWholeFile(tmp_.Sub("controller.log"));
  }

  void TearDown() override {
    if (!agent_) return;
    StopNode();
    controller_->Stop();
    agent_->Stop();
    SystemExec exec;
    auto r = exec.Run({{"losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"}});
    if (!r.ok()) return;
    std::istringstream ls(r->out);
    for (std::string l; std::getline(ls, l);) {
      if (l.find(tmp_.path()) != std::string::npos) {
        (void)exec.Run({{"losetup", "-d", l.substr(0, l.find(' '))}});
      }
    }
  }

  // The registry as the holder of certs/<cert>.
  std::unique_ptr<rv1::NodeRegistry::Stub> Registry(const std::string& cert) const {
    TlsFiles files{tmp_.Sub("certs/" + cert + ".crt"), tmp_.Sub("certs/" + cert + ".key"),
                   tmp_.Sub("certs/ca.crt")};
    auto creds = MutualTlsChannelCredentials(files);
    EXPECT_TRUE(creds.ok()) << creds.status().ToString();
    return rv1::NodeRegistry::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(controller_->registry_port()), *creds));
  }

  grpc::Status Register(const std::string& cert, const std::string& node_id, const std::string& nqn,
                        int addresses = 1) {
    rv1::RegisterNodeRequest req;
    req.mutable_identity()->set_node_id(node_id);
    req.mutable_identity()->set_host_nqn(nqn);
    // Addresses of this node's own (one address belongs to one node):
    // node-a 10.97.*, node-b 10.98.*, ...
    const std::string net = "10." + std::to_string(90 + node_id.back() % 10) + ".";
    for (int i = 0; i < addresses; ++i) {
      req.mutable_identity()->add_ip_addresses(net + std::to_string(i / 250) + "." +
                                               std::to_string(i % 250 + 1));
    }
    grpc::ClientContext ctx;
    rv1::RegisterNodeResponse resp;
    return Registry(cert)->RegisterNode(&ctx, req, &resp);
  }

  grpc::Status GetNode(const std::string& cert, const std::string& node_id,
                       rv1::GetNodeResponse* out = nullptr) {
    rv1::GetNodeRequest req;
    req.set_node_id(node_id);
    grpc::ClientContext ctx;
    rv1::GetNodeResponse resp;
    auto s = Registry(cert)->GetNode(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }

  // A block volume exported over NVMe-oF/TCP, published to node-a.
  void PublishToNodeA() {
    auto csi = controller_->Csi();
    VolumeCapability cap;
    cap.mutable_block();
    cap.mutable_access_mode()->set_mode(VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    grpc::ClientContext c;
    csi::v1::CreateVolumeRequest creq;
    creq.set_name("vol-1");
    creq.mutable_capacity_range()->set_required_bytes(16LL << 20);
    *creq.add_volume_capabilities() = cap;
    auto& p = *creq.mutable_parameters();
    p["agent"] = "storage-1";
    p["pool"] = "demo";
    p["protocol"] = "nvmeof-tcp";
    p["bindAddress"] = "127.0.0.1";
    csi::v1::CreateVolumeResponse cresp;
    auto s = csi->CreateVolume(&c, creq, &cresp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    grpc::ClientContext pc;
    csi::v1::ControllerPublishVolumeRequest preq;
    preq.set_volume_id("vol-1");
    preq.set_node_id("node-a");
    *preq.mutable_volume_capability() = cap;
    csi::v1::ControllerPublishVolumeResponse presp;
    s = csi->ControllerPublishVolume(&pc, preq, &presp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // The NQNs in the volume's nvmet allowed_hosts.
  std::set<std::string> AllowedHosts() const {
    std::set<std::string> out;
    std::string dir =
        tmp_.Sub("configfs/nvmet/subsystems/nqn.2026-12.com.bhyoo.pillar-csi:demo:2fvol-1") +
        "/allowed_hosts";
    if (!fs::exists(dir)) return out;
    for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename());
    return out;
  }

  // The real node plugin, reporting as `node_id` with certs/<cert>.
  // Empty `cert`: --registry-insecure; `csi` replaces the unix socket.
  void StartNode(const std::string& node_id, const std::string& cert, const std::string& nqn,
                 const std::string& csi = "") {
    std::ofstream(tmp_.Sub("hostnqn")) << nqn << "\n";
    std::vector<std::string> args = {
        PILLAR_NODE_BIN,
        "--csi-endpoint=" + (csi.empty() ? "unix://" + tmp_.Sub("node.sock") : csi),
        "--node-id=" + node_id,
        "--registry-address=127.0.0.1:" + std::to_string(controller_->registry_port())};
    if (cert.empty()) {
      args.emplace_back("--registry-insecure");
    } else {
      args.insert(args.end(), {"--registry-tls-cert=" + tmp_.Sub("certs/" + cert + ".crt"),
                               "--registry-tls-key=" + tmp_.Sub("certs/" + cert + ".key"),
                               "--registry-tls-ca=" + tmp_.Sub("certs/ca.crt")});
    }
    args.insert(args.end(),
                {"--host-nqn-file=" + tmp_.Sub("hostnqn"),
                 "--iscsi-initiator-file=" + tmp_.Sub("initiatorname"), "--node-address=10.99.0.12",
                 "--state-dir=" + tmp_.Sub("node"), "--identity-interval=500ms"});
    node_.Start(std::move(args), tmp_.Sub("node.log"));
  }
  void StopNode() { node_.Stop(); }

  TempDir tmp_;
  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<ControllerProcess> controller_;
  ChildProcess node_;
};

TEST_F(RegistryIdentityTest, ANodeCannotRegisterAsAnotherNodeAndTheAclIsUnchanged) {
  auto s = Register("node-a", "node-a", kNqnA);
  ASSERT_TRUE(s.ok()) << s.error_message() << ReadWholeFile(tmp_.Sub("controller.log"));
  PublishToNodeA();
  ASSERT_TRUE(WaitFor([&] { return AllowedHosts() == std::set<std::string>{kNqnA}; },
                      std::chrono::seconds(60)))
      << ReadWholeFile(tmp_.Sub("controller.log"));
  rv1::GetNodeResponse before;
  ASSERT_TRUE(GetNode("controller", "node-a", &before).ok());

  // A direct report for node-a with node-b's certificate.
  s = Register("node-b", "node-a", kNqnB);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("pillar-csi://node/node-b"), std::string::npos);

  // The real node plugin started as node-a with node-b's certificate.
  StartNode("node-a", "node-b", kNqnB);
  ASSERT_TRUE(WaitFor(
      [&] {
        std::string log = ReadWholeFile(tmp_.Sub("node.log"));
        return log.find("identity report failed") != std::string::npos &&
               log.find("pillar-csi://node/node-b") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << ReadWholeFile(tmp_.Sub("node.log"));
  // Several reports and two resyncs later, node-a's record and the ACL stand.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_EQ(AllowedHosts(), std::set<std::string>{kNqnA});
  rv1::GetNodeResponse after;
  ASSERT_TRUE(GetNode("controller", "node-a", &after).ok());
  EXPECT_EQ(after.identity().host_nqn(), kNqnA);
  EXPECT_EQ(after.identity().SerializeAsString(), before.identity().SerializeAsString());
  std::string log = ReadWholeFile(tmp_.Sub("controller.log"));
  EXPECT_NE(log.find("node registry: refused"), std::string::npos);
  EXPECT_NE(log.find("pillar-csi://node/node-b"), std::string::npos) << log;
  StopNode();

  // The real node plugin with its own certificate is admitted.
  StartNode("node-b", "node-b", kNqnB);
  EXPECT_TRUE(
      WaitFor([&] { return GetNode("controller", "node-b").ok(); }, std::chrono::seconds(60)))
      << ReadWholeFile(tmp_.Sub("node.log"));
}

TEST_F(RegistryIdentityTest, WhoMayReadAndWhatAReportMayHold) {
  ASSERT_TRUE(Register("node-a", "node-a", kNqnA).ok());
  ASSERT_TRUE(Register("node-b", "node-b", kNqnB).ok());
  EXPECT_TRUE(GetNode("node-a", "node-a").ok());
  EXPECT_EQ(GetNode("node-b", "node-a").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(GetNode("controller", "node-a").ok());
  EXPECT_TRUE(GetNode("operator", "node-b").ok());
  EXPECT_EQ(GetNode("norole", "node-a").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetNode("agent", "node-a").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Only a node reports, and only for itself.
  for (const char* cert : {"controller", "operator", "agent"}) {
    EXPECT_EQ(Register(cert, "node-a", kNqnB).error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << cert;
  }
  // The address list is capped, and the refusal names the field.
  EXPECT_TRUE(Register("node-a", "node-a", kNqnA, 64).ok());
  auto s = Register("node-a", "node-a", kNqnA, 65);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("identity.ip_addresses"), std::string::npos);
  rv1::GetNodeResponse got;
  ASSERT_TRUE(GetNode("controller", "node-a", &got).ok());
  EXPECT_EQ(got.identity().ip_addresses_size(), 64);
}

TEST_F(RegistryIdentityTest, InsecureSettingsAreLoudAndAPlaintextReportIsRefused) {
  // The controller's registry is TLS-only: a plaintext report never lands.
  StartNode("node-a", "", kNqnA, "127.0.0.1:0");
  ASSERT_TRUE(WaitFor(
      [&] {
        std::string log = ReadWholeFile(tmp_.Sub("node.log"));
        return log.find("identity report failed") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << ReadWholeFile(tmp_.Sub("node.log"));
  std::string log = ReadWholeFile(tmp_.Sub("node.log"));
  EXPECT_NE(log.find("INSECURE: the CSI endpoint 127.0.0.1:0 is not a unix socket"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("INSECURE: identities are reported to the registry without TLS"),
            std::string::npos);
  EXPECT_EQ(GetNode("controller", "node-a").error_code(), grpc::StatusCode::NOT_FOUND);
  StopNode();
  // The agent, with --insecure.
  AgentProcess plain(tmp_.Sub("plain"));
  fs::create_directories(tmp_.Sub("plain/certs"));
  for (const char* f : {"agent.crt", "agent.key", "ca.crt"}) {
    fs::copy_file(tmp_.Sub(std::string("certs/") + f), tmp_.Sub(std::string("plain/certs/") + f));
  }
  ASSERT_TRUE(plain.Start({"--insecure"})) << ReadWholeFile(tmp_.Sub("plain/agent.log"));
  plain.Stop();
  EXPECT_NE(
      ReadWholeFile(tmp_.Sub("plain/agent.log")).find("INSECURE: the agent API on 127.0.0.1:"),
      std::string::npos)
      << ReadWholeFile(tmp_.Sub("plain/agent.log"));
}

}  // namespace
}  // namespace pillar::testing
