// `pillarctl certs` issues certificates the real binaries accept, and a
// certificate rotated on disk is used by the next connection without a
// restart: pillarctl, pillar-agent-sim and pillar-controller over real mutual
// TLS on real sockets.
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
namespace v1 = pillar::agent::v1;
namespace rv1 = pillar::registry::v1;

class CertsTest : public ::testing::Test {
 protected:
  // pillarctl ARGS...; its exit code.
  int Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {PILLARCTL_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = exec_.Run({argv});
    if (!r.ok()) return -1;
    last_ = r->out + r->err;
    return r->exit_code;
  }

  void Issue(const std::string& role, const std::string& name, const std::string& ca,
             const std::string& out, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"certs", "issue", "--role",     role,    "--name",
                                     name,    "--ca",  tmp_.Sub(ca), "--out", tmp_.Sub(out)};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_EQ(Ctl(args), 0) << last_;
  }

  // Copies DIR/tls.crt, tls.key, ca.crt to certs/<as>.crt, .key and certs/ca.crt
  // (the names AgentProcess and ControllerProcess use), each by an atomic rename.
  void Install(const std::string& dir, const std::string& as, bool with_ca) {
    fs::create_directories(tmp_.Sub("certs"));
    std::vector<std::pair<std::string, std::string>> files = {{"tls.crt", as + ".crt"},
                                                              {"tls.key", as + ".key"}};
    if (with_ca) files.emplace_back("ca.crt", "ca.crt");
    for (const auto& [from, to] : files) {
      std::string tmp = tmp_.Sub("certs/." + to + ".new");
      fs::copy_file(tmp_.Sub(dir + "/" + from), tmp, fs::copy_options::overwrite_existing);
      fs::rename(tmp, tmp_.Sub("certs/" + to));
    }
  }

  // GetInfo over a new connection presenting DIR's certificate.
  grpc::Status GetInfo(const std::string& dir, int port) {
    TlsFiles files{tmp_.Sub(dir + "/tls.crt"), tmp_.Sub(dir + "/tls.key"),
                   tmp_.Sub(dir + "/ca.crt")};
    auto creds = MutualTlsChannelCredentials(files);
    if (!creds.ok()) return {grpc::StatusCode::INTERNAL, creds.status().ToString()};
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto stub = v1::Agent::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), *creds, args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetInfoResponse resp;
    return stub->GetInfo(&ctx, {}, &resp);
  }

  TempDir tmp_;
  SystemExec exec_;
  std::string last_;
};

TEST_F(CertsTest, IssuedCertificatesCarryTheirRoleAndAreRefusedToOverwrite) {
  ASSERT_EQ(Ctl({"certs", "ca", "--out", tmp_.Sub("ca")}), 0) << last_;
  EXPECT_EQ(fs::status(tmp_.Sub("ca/ca.key")).permissions() & fs::perms::others_read,
            fs::perms::none);
  Issue("node", "node-a", "ca", "node-a");
  auto text = exec_.Run(
      {{"openssl", "x509", "-in", tmp_.Sub("node-a/tls.crt"), "-noout", "-ext", "subjectAltName"}});
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->out.find("URI:pillar-csi://node/node-a"), std::string::npos) << text->out;
  auto verify = exec_.Run(
      {{"openssl", "verify", "-CAfile", tmp_.Sub("ca/ca.crt"), tmp_.Sub("node-a/tls.crt")}});
  ASSERT_TRUE(verify.ok());
  EXPECT_EQ(verify->exit_code, 0) << verify->out << verify->err;

  std::string before = ReadWholeFile(tmp_.Sub("ca/ca.key"));
  EXPECT_NE(Ctl({"certs", "ca", "--out", tmp_.Sub("ca")}), 0);
  EXPECT_NE(last_.find("ALREADY_EXISTS"), std::string::npos) << last_;
  EXPECT_EQ(ReadWholeFile(tmp_.Sub("ca/ca.key")), before);
  EXPECT_NE(Ctl({"certs", "issue", "--role", "node", "--name", "node-a", "--ca", tmp_.Sub("ca"),
                 "--out", tmp_.Sub("node-a")}),
            0);
  EXPECT_NE(Ctl({"certs", "issue", "--role", "root", "--name", "x", "--ca", tmp_.Sub("ca"), "--out",
                 tmp_.Sub("x")}),
            0);
  EXPECT_NE(Ctl({"certs", "issue", "--role", "node", "--name", "Node_A", "--ca", tmp_.Sub("ca"),
                 "--out", tmp_.Sub("y")}),
            0);
  EXPECT_NE(last_.find("identity URI name"), std::string::npos) << last_;
  EXPECT_FALSE(fs::exists(tmp_.Sub("y/tls.key")));
}

TEST_F(CertsTest, RealBinariesAcceptThemAndARotatedCertificateIsUsedWithoutRestart) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  for (const char* ca : {"ca1", "ca2"}) {
    ASSERT_EQ(Ctl({"certs", "ca", "--out", tmp_.Sub(ca), "--cn", ca}), 0) << last_;
  }
  const std::vector<std::string> local = {"--ip", "127.0.0.1", "--dns", "localhost"};
  Issue("agent", "storage-1", "ca1", "agent1", local);
  Issue("agent", "storage-1", "ca2", "agent2", local);
  Issue("controller", "pillar-controller", "ca1", "controller1", local);
  Issue("controller", "pillar-controller", "ca2", "controller2", local);
  Issue("node", "node-a", "ca1", "node-a");
  Issue("operator", "admin", "ca1", "operator");

  Install("agent1", "agent", true);
  Install("controller1", "controller", false);
  AgentProcess agent(tmp_.path());
  ASSERT_TRUE(agent.Start({"--tls-reload-interval=1"})) << ReadWholeFile(tmp_.Sub("agent.log"));

  // The agent admits pillarctl's controller and operator certificates, refuses its node one.
  auto s = GetInfo("controller1", agent.port());
  EXPECT_TRUE(s.ok()) << s.error_message() << ReadWholeFile(tmp_.Sub("agent.log"));
  EXPECT_TRUE(GetInfo("operator", agent.port()).ok());
  EXPECT_EQ(GetInfo("node-a", agent.port()).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_FALSE(GetInfo("controller2", agent.port()).ok()) << "another CA's client";

  // The controller calls the agent and serves the registry with them.
  ControllerProcess controller(tmp_.path());
  controller.UseRegistryTls();
  ASSERT_TRUE(controller.Start(agent.port())) << ReadWholeFile(tmp_.Sub("controller.log"));
  auto st = store::SqliteStore::Open({controller.store_path()});
  ASSERT_TRUE(st.ok());
  EXPECT_GE(WaitForMs(
                [&] {
                  auto a = (*st)->Get("PillarAgent", "storage-1");
                  return a.ok() && a->status.dump().find("\"Connected\"") != std::string::npos;
                },
                std::chrono::seconds(60)),
            0)
      << ReadWholeFile(tmp_.Sub("controller.log"));
  {
    TlsFiles files{tmp_.Sub("node-a/tls.crt"), tmp_.Sub("node-a/tls.key"),
                   tmp_.Sub("node-a/ca.crt")};
    auto creds = MutualTlsChannelCredentials(files);
    ASSERT_TRUE(creds.ok());
    auto reg = rv1::NodeRegistry::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(controller.registry_port()), *creds));
    grpc::ClientContext ctx;
    rv1::RegisterNodeRequest req;
    req.mutable_identity()->set_node_id("node-a");
    req.mutable_identity()->add_ip_addresses("10.99.0.11");
    rv1::RegisterNodeResponse resp;
    auto r = reg->RegisterNode(&ctx, req, &resp);
    EXPECT_TRUE(r.ok()) << r.error_message();
  }
  controller.Stop();

  // Rotation to a new CA: the agent's certificate, key and CA bundle are
  // replaced on disk; new connections use them, the old CA's clients are out.
  Install("agent2", "agent", true);
  int64_t ms = WaitForMs([&] { return GetInfo("controller2", agent.port()).ok(); },
                         std::chrono::seconds(60));
  ASSERT_GE(ms, 0) << ReadWholeFile(tmp_.Sub("agent.log"));
  std::printf("figure: rotated certificate in use after %.1f s\n", static_cast<double>(ms) / 1000);
  EXPECT_FALSE(GetInfo("controller1", agent.port()).ok());
  agent.Stop();
}

// The controller dials agents by IP and checks the name their certificate
// must carry (PillarAgent spec.tlsServerName): the override is honoured.
TEST_F(CertsTest, TheServerNameOverrideIsChecked) {
  ASSERT_TRUE(AgentProcess::MakeCerts(tmp_.Sub("certs")));
  AgentProcess agent(tmp_.path());
  ASSERT_TRUE(agent.Start()) << ReadWholeFile(tmp_.Sub("agent.log"));
  auto call = [&](const std::string& name) {
    TlsFiles files{tmp_.Sub("certs/controller.crt"), tmp_.Sub("certs/controller.key"),
                   tmp_.Sub("certs/ca.crt")};
    auto creds = MutualTlsChannelCredentials(files);
    EXPECT_TRUE(creds.ok());
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    if (!name.empty()) args.SetSslTargetNameOverride(name);
    auto stub = v1::Agent::NewStub(grpc::CreateCustomChannel(agent.address(), *creds, args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetInfoResponse info;
    return stub->GetInfo(&ctx, {}, &info);
  };
  EXPECT_TRUE(call("").ok());           // 127.0.0.1 is among the agent's SANs
  EXPECT_TRUE(call("localhost").ok());  // so is localhost
  EXPECT_FALSE(call("storage-9.example").ok());
  agent.Stop();
}

// A handshake by `openssl s_client` limited to `version` (-tls1_2 or
// -tls1_3) with the controller's certificate; the negotiated line.
std::string Handshake(const std::string& certs, int port, const std::string& version) {
  std::string cmd =
      "echo | timeout 10 openssl s_client -connect 127.0.0.1:" + std::to_string(port) + " " +
      version + " -cert " + certs + "/controller.crt -key " + certs + "/controller.key -CAfile " +
      certs + "/ca.crt 2>&1 | grep -E '^New, '";
  SystemExec exec;
  auto r = exec.Run({{"bash", "-c", cmd}});
  return r.ok() ? r->out : "";
}

TEST_F(CertsTest, OnlyTls13OnEitherSide) {
  // This process as a client, as every daemon and pillarctl set it.
  ASSERT_TRUE(RequireTls13().ok());
  ASSERT_TRUE(AgentProcess::MakeCerts(tmp_.Sub("certs")));
  AgentProcess agent(tmp_.path());
  ASSERT_TRUE(agent.Start()) << ReadWholeFile(tmp_.Sub("agent.log"));
  // The agent as a server.
  EXPECT_NE(Handshake(tmp_.Sub("certs"), agent.port(), "-tls1_3").find("New, TLSv1.3"),
            std::string::npos);
  std::string old = Handshake(tmp_.Sub("certs"), agent.port(), "-tls1_2");
  EXPECT_NE(old.find("Cipher is (NONE)"), std::string::npos) << old;
  // This process's client against it.
  {
    auto stub = agent.Client("controller");
    grpc::ClientContext ctx;
    v1::GetInfoResponse info;
    auto s = stub->GetInfo(&ctx, {}, &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  agent.Stop();

  // Against a server that speaks TLS 1.2 only.
  int port = 20000 + static_cast<int>(getpid() % 20000);
  std::string log = tmp_.Sub("s_server.log");
  pid_t server = fork();
  if (server == 0) {
    FILE* f = freopen(log.c_str(), "w", stdout);
    (void)f;
    dup2(STDOUT_FILENO, STDERR_FILENO);
    std::string accept = "127.0.0.1:" + std::to_string(port);
    std::string cert = tmp_.Sub("certs/agent.crt"), key = tmp_.Sub("certs/agent.key");
    execlp("openssl", "openssl", "s_server", "-www", "-accept", accept.c_str(), "-tls1_2", "-cert",
           cert.c_str(), "-key", key.c_str(), "-naccept", "1", nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  TlsFiles files{tmp_.Sub("certs/controller.crt"), tmp_.Sub("certs/controller.key"),
                 tmp_.Sub("certs/ca.crt")};
  auto creds = MutualTlsChannelCredentials(files);
  ASSERT_TRUE(creds.ok());
  auto stub = v1::Agent::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port), *creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetInfoResponse resp;
  EXPECT_FALSE(stub->GetInfo(&ctx, {}, &resp).ok());
  // s_server writes its verdict after the client has seen the alert: give it
  // up to 10 s before stopping it, so a slow machine does not lose the line.
  std::string out;
  for (int i = 0; i < 100; ++i) {
    out = ReadWholeFile(log);
    if (out.find("unsupported protocol") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(server, SIGTERM);
  int status = 0;
  waitpid(server, &status, 0);
  out = ReadWholeFile(log);
  // What the server saw: a client offering TLS 1.3 alone.
  EXPECT_NE(out.find("unsupported protocol"), std::string::npos) << out;
}

}  // namespace
}  // namespace pillar::testing
