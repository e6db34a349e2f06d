// Who may call the agent: every RPC of the agent service (read from its
// descriptor, so an RPC added later is covered) called by each role's real
// certificate against pillar-agent-sim over real mutual TLS.
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "agent_process.h"
#include "common/daemon.h"

namespace pillar::testing {
namespace {

namespace v1 = pillar::agent::v1;
namespace fs = std::filesystem;

constexpr const char* kUid = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";
constexpr const char* kHostA =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555";
constexpr const char* kHostB =
    "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

// Every file and link under `dir` with its content or target: what a refused
// call must leave as it was.
std::string Tree(const std::string& dir) {
  std::string out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out += e.path().string();
    if (e.is_symlink()) {
      out += " -> " + fs::read_symlink(e.path()).string();
    } else if (e.is_regular_file()) {
      out += " = " + ReadWholeFile(e.path().string());
    }
    out += "\n";
  }
  return out;
}

std::vector<std::string> AgentMethods() {
  const auto* svc = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      v1::Agent::service_full_name());
  std::vector<std::string> out;
  for (int i = 0; i < svc->method_count(); ++i) {
    out.push_back("/" + svc->full_name() + "/" + svc->method(i)->name());
  }
  return out;
}

// Read-only by its name, decided here independently of the agent's table.
bool ReadOnly(const std::string& method) {
  std::string name = method.substr(method.rfind('/') + 1);
  return name.rfind("Get", 0) == 0 || name.rfind("List", 0) == 0;
}

class AgentAuthzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || !fs::exists("/dev/loop-control")) {
      GTEST_SKIP() << "needs root and loop devices";
    }
    agent_ = AgentProcess::StartWithCerts(tmp_.path());
    ASSERT_NE(agent_, nullptr) << ReadWholeFile(tmp_.Sub("agent.log"));
  }
  void TearDown() override {
    if (!agent_) return;
    // Undo what the controller did: the export, then the volume (its loop device).
    auto stub = agent_->Client("controller");
    grpc::ClientContext u;
    v1::UnexportVolumeRequest ureq;
    ureq.set_agent_volume_id("demo/pvc-1");
    ureq.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    v1::UnexportVolumeResponse uresp;
    (void)stub->UnexportVolume(&u, ureq, &uresp);
    grpc::ClientContext d;
    v1::DeleteVolumeRequest dreq;
    dreq.set_agent_volume_id("demo/pvc-1");
    v1::DeleteVolumeResponse dresp;
    (void)stub->DeleteVolume(&d, dreq, &dresp);
    agent_->Stop();
  }

  // Calls `method` with an empty request as the holder of certs/<cert>.
  grpc::Status Call(const std::string& cert, const std::string& method) const {
    TlsFiles files{tmp_.Sub("certs/" + cert + ".crt"), tmp_.Sub("certs/" + cert + ".key"),
                   tmp_.Sub("certs/ca.crt")};
    auto creds = MutualTlsChannelCredentials(files);
    if (!creds.ok()) return {grpc::StatusCode::INTERNAL, creds.status().ToString()};
    grpc::GenericStub stub(grpc::CreateChannel(agent_->address(), *creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice empty("");  // an empty message of any type
    grpc::ByteBuffer req(&empty, 1);
    grpc::ByteBuffer resp;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp,
                   [&done](const grpc::Status& s) { done.set_value(s); });
    return done.get_future().get();
  }

  // As the controller: a volume exported to host A.
  void Publish() {
    auto stub = agent_->Client("controller");
    grpc::ClientContext c;
    v1::CreateVolumeRequest creq;
    creq.set_pool("demo");
    creq.set_name("pvc-1");
    creq.set_size_bytes(64LL << 20);
    creq.set_mode(v1::VOLUME_MODE_BLOCK);
    creq.set_volume_uid(kUid);
    v1::CreateVolumeResponse cresp;
    ASSERT_TRUE(stub->CreateVolume(&c, creq, &cresp).ok());
    grpc::ClientContext a;
    v1::ApplyExportResponse aresp;
    auto s = stub->ApplyExport(&a, ExportTo(kHostA, 1), &aresp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  static v1::ApplyExportRequest ExportTo(const std::string& host, int64_t generation) {
    v1::ApplyExportRequest req;
    req.set_agent_volume_id("demo/pvc-1");
    req.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    req.mutable_spec()->set_bind_address("127.0.0.1");
    req.mutable_spec()->set_port(4420);
    req.mutable_spec()->set_acl_enabled(true);
    req.mutable_fence()->set_volume_uid(kUid);
    req.mutable_fence()->set_publication_generation(generation);
    req.add_allowed_hosts(host);
    return req;
  }

  std::string State() const { return Tree(tmp_.Sub("configfs")) + Tree(tmp_.Sub("pools")); }

  TempDir tmp_;
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(AgentAuthzTest, EveryRpcIsRefusedToNodeAgentAndRolelessCertificates) {
  Publish();
  const std::string before = State();
  auto methods = AgentMethods();
  ASSERT_GE(methods.size(), 10u);
  for (const char* cert : {"node-a", "node-b", "agent", "norole"}) {
    for (const auto& m : methods) {
      auto s = Call(cert, m);
      auto want = std::string(cert) == "norole" ? grpc::StatusCode::UNAUTHENTICATED
                                                : grpc::StatusCode::PERMISSION_DENIED;
      EXPECT_EQ(s.error_code(), want) << cert << " " << m << ": " << s.error_message();
    }
  }
  EXPECT_EQ(State(), before) << "a refused call changed the agent's state";

  // The attack itself: node-b rewriting the ACL to its own NQN with a real
  // request, and deleting the volume.
  auto node_b = agent_->Client("node-b");
  grpc::ClientContext a;
  v1::ApplyExportResponse aresp;
  EXPECT_EQ(node_b->ApplyExport(&a, ExportTo(kHostB, 2), &aresp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext b;
  v1::ApplyExportsRequest breq;
  *breq.add_exports() = ExportTo(kHostB, 2);
  v1::ApplyExportsResponse bresp;
  EXPECT_EQ(node_b->ApplyExports(&b, breq, &bresp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(bresp.results_size(), 0);
  grpc::ClientContext d;
  v1::DeleteVolumeRequest dreq;
  dreq.set_agent_volume_id("demo/pvc-1");
  v1::DeleteVolumeResponse dresp;
  EXPECT_EQ(node_b->DeleteVolume(&d, dreq, &dresp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(State(), before);
  EXPECT_NE(State().find(kHostA), std::string::npos);
  EXPECT_EQ(State().find(kHostB), std::string::npos);

  // Each refusal is logged with who asked.
  std::string log = ReadWholeFile(tmp_.Sub("agent.log"));
  EXPECT_NE(log.find("pillar-csi://node/node-b"), std::string::npos) << log;
  EXPECT_NE(log.find("/pillar.agent.v1.Agent/ApplyExport"), std::string::npos);
}

TEST_F(AgentAuthzTest, OperatorReadsOnlyAndControllerCallsEverything) {
  Publish();
  const std::string before = State();
  int reads = 0;
  for (const auto& m : AgentMethods()) {
    auto s = Call("operator", m);
    if (ReadOnly(m)) {
      ++reads;
      EXPECT_NE(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << m << ": " << s.error_message();
      EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << m;
    }
  }
  EXPECT_GE(reads, 5);
  EXPECT_EQ(State(), before);
  for (const auto& m : AgentMethods()) {
    auto s = Call("controller", m);
    // Empty requests are bad input, never refused for who sent them.
    EXPECT_NE(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << m << ": " << s.error_message();
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
  }
}

// Sockets opened to the agent's port and left silent (no TLS handshake) are
// closed after the handshake timeout, and the agent raises its open-file
// limit to the hard limit, so such sockets cannot take every descriptor (once
// they do, gRPC stops accepting altogether): the real binary, started with a
// soft limit of 64 that 80 silent sockets would exhaust.
TEST(AgentHardeningTest, SilentConnectionsAreDroppedAndTheControllerStillGetsIn) {
  TempDir tmp;
  ASSERT_TRUE(AgentProcess::MakeCerts(tmp.Sub("certs")));
  AgentProcess agent(tmp.path());
  agent.RunUnder({"/usr/bin/prlimit", "--nofile=64:4096", "--"});
  ASSERT_TRUE(agent.Start());
  std::vector<int> silent;
  for (int i = 0; i < 80; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(agent.port()));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      close(fd);
      continue;
    }
    silent.push_back(fd);
  }
  ASSERT_GT(silent.size(), 64u) << "the flood must exceed the soft limit it started with";
  std::this_thread::sleep_for(kHandshakeTimeout + std::chrono::seconds(2));
  auto stub = agent.Client("controller");
  ASSERT_NE(stub, nullptr);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::GetInfoResponse info;
  grpc::Status s = stub->GetInfo(&ctx, v1::GetInfoRequest(), &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // The agent closed the silent ones it had accepted.
  int closed = 0;
  for (int fd : silent) {
    char c;
    if (recv(fd, &c, 1, MSG_DONTWAIT) == 0) closed++;
    close(fd);
  }
  EXPECT_GT(closed, 0);
  agent.Stop();
}

}  // namespace
}  // namespace pillar::testing
