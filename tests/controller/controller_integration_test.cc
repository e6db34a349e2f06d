// The seed stories, end to end on this host: the real controller binary over
// its CSI socket and registry, the real agent binary over mutual TLS (file
// pool with real loop devices; nvmet/LIO on the configfs simulator; NFS
// through the real exportfs table), and the real SQLite store.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "agent/service/agent_process.h"
#include "common/exec.h"
#include "common/scrape.h"
#include "controller/controller_process.h"
#include "store/sqlite/sqlite_store.h"

namespace pillar::testing {
namespace {

namespace fs = std::filesystem;
using csi::v1::VolumeCapability;

constexpr const char* kNqnA =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555";
constexpr const char* kNqnB =
    "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
constexpr const char* kNqnA2 =
    "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-4333-8444-555555555555";
// Client addresses only ever appear in export rules; nothing connects to them.
constexpr const char* kIpA = "10.99.0.11";
constexpr const char* kIpA2 = "10.99.0.21";
constexpr const char* kIpB = "10.99.0.12";

// Every wait below is for a condition, with a ceiling far above the time it
// normally takes (kCeiling), so a slow or loaded machine is never a failure;
// the time it took is printed as a figure instead.
constexpr std::chrono::seconds kCeiling{60};

// "figure: <what> in 1.7 s": a measured time, for the record (not a limit).
void Figure(const std::string& what, int64_t ms) {
  std::printf("figure: %s in %.1f s\n", what.c_str(), static_cast<double>(ms) / 1000.0);
  std::fflush(stdout);
}

std::string ExportfsTable() {
  SystemExec exec;
  auto r = exec.Run({{"exportfs", "-v"}});
  return r.ok() ? r->out : "";
}

class ControllerIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || !fs::exists("/dev/loop-control")) {
      GTEST_SKIP() << "needs root and loop devices";
    }
    ASSERT_TRUE(AgentProcess::MakeCerts(tmp_.Sub("certs")));
    // knfsd itself cannot run here (no nfsd module); exportfs keeps the real
    // export table, and this stands in for /proc/fs/nfsd of a running server.
    fs::create_directories(tmp_.Sub("nfsd"));
    std::ofstream(tmp_.Sub("nfsd/threads")) << "8\n";
    agent_ = std::make_unique<AgentProcess>(tmp_.path());
    ASSERT_TRUE(agent_->Start()) << ReadWholeFile(tmp_.Sub("agent.log"));
    controller_ = std::make_unique<ControllerProcess>(tmp_.path());
    ASSERT_TRUE(controller_->Start(agent_->port())) << ReadWholeFile(tmp_.Sub("controller.log"));
    csi_ = controller_->Csi();
    registry_ = controller_->Registry();
    auto st = store::SqliteStore::Open({controller_->store_path()});
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    store_ = std::move(st).value();
    // The controller marks the agent connected within one epoch poll.
    ASSERT_GE(WaitForMs(
                  [&] {
                    auto a = store_->Get("PillarAgent", "storage-1");
                    return a.ok() && a->status.dump().find("\"Connected\"") != std::string::npos;
                  },
                  kCeiling),
              0);
  }

  void TearDown() override {
    if (!agent_) return;
    controller_->Stop();
    agent_->Stop();
    SystemExec exec;
    // Leave no export rule and no loop device behind. exportfs -v prints
    // "path client(opts)", or the path alone with clients on the next lines.
    std::istringstream lines(ExportfsTable());
    std::string path;
    for (std::string l; std::getline(lines, l);) {
      std::istringstream words(l);
      std::vector<std::string> w;
      for (std::string t; words >> t;) w.push_back(t);
      if (w.empty()) continue;
      std::string client;
      if (w[0][0] == '/') {
        path = w[0];
        if (w.size() > 1) client = w[1];
      } else {
        client = w[0];
      }
      if (client.empty() || path.rfind(tmp_.path(), 0) != 0) continue;
      std::string host = client.substr(0, client.find('('));
      if (host == "<world>") host = "*";
      (void)exec.Run({{"exportfs", "-u", host + ":" + path}});
    }
    auto r = exec.Run({{"losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"}});
    if (r.ok()) {
      std::istringstream ls(r->out);
      for (std::string l; std::getline(ls, l);) {
        if (l.find(tmp_.path()) == std::string::npos) continue;
        (void)exec.Run({{"losetup", "-d", l.substr(0, l.find(' '))}});
      }
    }
  }

  void RegisterNode(const std::string& id, const std::string& nqn, const std::string& ip) {
    grpc::ClientContext ctx;
    pillar::registry::v1::RegisterNodeRequest req;
    req.mutable_identity()->set_node_id(id);
    req.mutable_identity()->set_host_nqn(nqn);
    req.mutable_identity()->add_ip_addresses(ip);
    pillar::registry::v1::RegisterNodeResponse resp;
    auto s = registry_->RegisterNode(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  static VolumeCapability Cap(bool block, VolumeCapability::AccessMode::Mode mode) {
    VolumeCapability cap;
    if (block) {
      cap.mutable_block();
    } else {
      cap.mutable_mount()->set_fs_type("");
    }
    cap.mutable_access_mode()->set_mode(mode);
    return cap;
  }

  grpc::Status Create(const std::string& name, const std::string& protocol,
                      csi::v1::CreateVolumeResponse* out = nullptr,
                      const std::map<std::string, std::string>& extra = {}) {
    grpc::ClientContext ctx;
    csi::v1::CreateVolumeRequest req;
    req.set_name(name);
    req.mutable_capacity_range()->set_required_bytes(16LL << 20);
    bool nfs = protocol == "nfs";
    *req.add_volume_capabilities() =
        Cap(!nfs, nfs ? VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER
                      : VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    auto& p = *req.mutable_parameters();
    p["agent"] = "storage-1";
    p["pool"] = "demo";
    p["protocol"] = protocol;
    p["bindAddress"] = "127.0.0.1";
    for (const auto& [k, v] : extra) p[k] = v;
    csi::v1::CreateVolumeResponse resp;
    auto s = csi_->CreateVolume(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }

  grpc::Status Publish(const std::string& vol, const std::string& node, bool nfs = false,
                       csi::v1::ControllerPublishVolumeResponse* out = nullptr) {
    grpc::ClientContext ctx;
    csi::v1::ControllerPublishVolumeRequest req;
    req.set_volume_id(vol);
    req.set_node_id(node);
    *req.mutable_volume_capability() =
        Cap(!nfs, nfs ? VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER
                      : VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    csi::v1::ControllerPublishVolumeResponse resp;
    auto s = csi_->ControllerPublishVolume(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }

  grpc::Status Unpublish(const std::string& vol, const std::string& node) {
    grpc::ClientContext ctx;
    csi::v1::ControllerUnpublishVolumeRequest req;
    req.set_volume_id(vol);
    req.set_node_id(node);
    csi::v1::ControllerUnpublishVolumeResponse resp;
    return csi_->ControllerUnpublishVolume(&ctx, req, &resp);
  }

  grpc::Status Delete(const std::string& vol) {
    grpc::ClientContext ctx;
    csi::v1::DeleteVolumeRequest req;
    req.set_volume_id(vol);
    csi::v1::DeleteVolumeResponse resp;
    return csi_->DeleteVolume(&ctx, req, &resp);
  }

  // "True/Reconciled" etc. for the volume's ExportReconciled condition.
  std::string Condition(const std::string& vol) {
    auto o = store_->Get("PillarVolumeState", vol);
    if (!o.ok()) return "absent";
    for (const auto& c : o->status.value("conditions", nlohmann::json::array())) {
      if (c.value("type", "") == "ExportReconciled") {
        return c.value("status", "") + "/" + c.value("reason", "");
      }
    }
    return "none";
  }

  std::string Subsys(const std::string& vol) const {
    return tmp_.Sub("configfs/nvmet/subsystems/nqn.2026-12.com.bhyoo.pillar-csi:demo:2f") + vol;
  }

  TempDir tmp_;
  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<ControllerProcess> controller_;
  std::unique_ptr<csi::v1::Controller::Stub> csi_;
  std::unique_ptr<pillar::registry::v1::NodeRegistry::Stub> registry_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(ControllerIntegrationTest, CsiLifecycleAndErrorCodes) {
  RegisterNode("node-a", kNqnA, kIpA);
  RegisterNode("node-b", kNqnB, kIpB);
  {
    auto identity = controller_->Identity();
    grpc::ClientContext ctx;
    csi::v1::GetPluginInfoResponse info;
    ASSERT_TRUE(identity->GetPluginInfo(&ctx, {}, &info).ok());
    EXPECT_EQ(info.name(), "pillar-csi.bhyoo.com");
  }
  // Bad input: the code and the field.
  auto s = Create("", "nvmeof-tcp");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("name"), std::string::npos);
  s = Create("vol-x", "nvmeof-tcp", nullptr, {{"acl", "maybe"}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("parameters.acl"), std::string::npos);
  s = Create("vol-x", "smb");
  EXPECT_NE(s.error_message().find("parameters.protocol"), std::string::npos);
  s = Create("vol-x", "nvmeof-tcp", nullptr, {{"agent", "nowhere"}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(store_->Get("PillarVolumeState", "vol-x").ok()) << "nothing half-applied";

  csi::v1::CreateVolumeResponse created;
  s = Create("vol-1", "nvmeof-tcp", &created);
  ASSERT_TRUE(s.ok()) << s.error_message() << ReadWholeFile(tmp_.Sub("controller.log"));
  EXPECT_EQ(created.volume().volume_id(), "vol-1");
  EXPECT_EQ(created.volume().volume_context().at("targetID"),
            "nqn.2026-12.com.bhyoo.pillar-csi:demo:2fvol-1");
  EXPECT_EQ(created.volume().volume_context().at("port"), "4420");
  EXPECT_GE(created.volume().capacity_bytes(), 16LL << 20);
  EXPECT_EQ(Condition("vol-1"), "True/Reconciled");
  // The export exists and admits nobody until a publish.
  EXPECT_EQ(ReadWholeFile(Subsys("vol-1") + "/attr_allow_any_host"), "0\n");
  EXPECT_TRUE(fs::is_empty(Subsys("vol-1") + "/allowed_hosts"));

  csi::v1::CreateVolumeResponse again;
  ASSERT_TRUE(Create("vol-1", "nvmeof-tcp", &again).ok());
  EXPECT_EQ(again.volume().volume_id(), "vol-1");
  EXPECT_EQ(Create("vol-1", "nvmeof-tcp", nullptr, {{"acl", "false"}}).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  EXPECT_EQ(Publish("vol-1", "node-z").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Publish("vol-nope", "node-a").error_code(), grpc::StatusCode::NOT_FOUND);
  csi::v1::ControllerPublishVolumeResponse pub;
  s = Publish("vol-1", "node-a", false, &pub);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(pub.publish_context().at("address"), "127.0.0.1");
  EXPECT_TRUE(fs::is_symlink(Subsys("vol-1") + "/allowed_hosts/" + kNqnA));
  ASSERT_TRUE(Publish("vol-1", "node-a").ok()) << "publish is idempotent";
  EXPECT_EQ(Publish("vol-1", "node-b").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_FALSE(fs::exists(Subsys("vol-1") + "/allowed_hosts/" + kNqnB));
  EXPECT_EQ(Delete("vol-1").error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  ASSERT_TRUE(Unpublish("vol-1", "node-a").ok());
  EXPECT_FALSE(fs::exists(Subsys("vol-1") + "/allowed_hosts/" + kNqnA));
  ASSERT_TRUE(Unpublish("vol-1", "node-a").ok()) << "unpublish is idempotent";
  auto obj = store_->Get("PillarVolumeState", "vol-1");
  ASSERT_TRUE(obj.ok());
  EXPECT_TRUE(obj->status["publishedNodes"].empty());
  EXPECT_EQ(obj->status["publicationGeneration"], 3) << "publish +1, revoking +1, drop +1";

  ASSERT_TRUE(Delete("vol-1").ok());
  EXPECT_FALSE(fs::exists(Subsys("vol-1")));
  EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/vol-1.img")));
  EXPECT_EQ(store_->Get("PillarVolumeState", "vol-1").status().code(), Code::kNotFound);
  ASSERT_TRUE(Delete("vol-1").ok()) << "delete is idempotent";
}

TEST_F(ControllerIntegrationTest, AgentStateWipedIsRebuiltWithoutRestartingAnything) {
  RegisterNode("node-a", kNqnA, kIpA);
  ASSERT_TRUE(Create("vol-1", "nvmeof-tcp").ok());
  ASSERT_TRUE(Publish("vol-1", "node-a").ok());
  ASSERT_TRUE(fs::is_symlink(Subsys("vol-1") + "/allowed_hosts/" + kNqnA));

  // A storage-node reboot: the agent goes away and the kernel state with it.
  agent_->Stop();
  fs::remove_all(tmp_.Sub("configfs"));
  int64_t down =
      WaitForMs([&] { return Condition("vol-1") == "False/AgentUnavailable"; }, kCeiling);
  EXPECT_GE(down, 0) << Condition("vol-1");
  if (down >= 0) Figure("agent stopped -> AgentUnavailable", down);
  ASSERT_TRUE(agent_->Start());
  int64_t ms = WaitForMs(
      [&] {
        return Condition("vol-1") == "True/Reconciled" &&
               fs::is_symlink(Subsys("vol-1") + "/allowed_hosts/" + kNqnA);
      },
      kCeiling);
  ASSERT_GE(ms, 0) << Condition("vol-1") << ReadWholeFile(tmp_.Sub("controller.log"));
  Figure("agent restart with wiped target state -> Reconciled", ms);
  EXPECT_EQ(ReadWholeFile(Subsys("vol-1") + "/attr_allow_any_host"), "0\n");
}

TEST_F(ControllerIntegrationTest, RuleDeletedOutOfBandIsRestoredWithinOneResync) {
  RegisterNode("node-a", kNqnA, kIpA);
  ASSERT_TRUE(Create("vol-1", "nvmeof-tcp").ok());
  ASSERT_TRUE(Publish("vol-1", "node-a").ok());
  std::string link = Subsys("vol-1") + "/allowed_hosts/" + kNqnA;
  ASSERT_TRUE(fs::remove(link)) << link;
  // Only the periodic resync (2 s, up to 20 % jitter) notices this: nothing
  // changed in the store. One interval is at most 2.4 s plus a pass; the test
  // waits for the repair itself and reports how long it took.
  int64_t ms = WaitForMs([&] { return fs::is_symlink(link); }, kCeiling);
  ASSERT_GE(ms, 0) << ReadWholeFile(tmp_.Sub("controller.log"));
  Figure("out-of-band ACL deletion repaired by the resync", ms);
  // An entry added out of band is removed: the ACL never widens.
  fs::create_directories(tmp_.Sub("configfs/nvmet/hosts/") + kNqnB);
  fs::create_symlink("../../../hosts/" + std::string(kNqnB),
                     Subsys("vol-1") + "/allowed_hosts/" + kNqnB);
  ms =
      WaitForMs([&] { return !fs::exists(Subsys("vol-1") + "/allowed_hosts/" + kNqnB); }, kCeiling);
  EXPECT_GE(ms, 0);
  if (ms >= 0) Figure("out-of-band ACL entry removed by the resync", ms);
  EXPECT_TRUE(fs::is_symlink(link));
}

// Issue 25: the controller's and the agent's /metrics, scraped from the real
// daemons, move with what happens: a wiped ACL entry is one out-of-band
// repair, a stopped agent flips agents connected, its restart is an epoch
// repair, and the agent counts the configfs changes it made.
TEST_F(ControllerIntegrationTest, MetricsMoveWithARepairAndAnAgentRestart) {
  const int cport = FreeTcpPort();
  const int aport = FreeTcpPort();
  ASSERT_GT(cport, 0);
  ASSERT_GT(aport, 0);
  controller_->Stop();
  agent_->Stop();
  ASSERT_TRUE(agent_->Start({"--metrics-address=127.0.0.1:" + std::to_string(aport)}))
      << ReadWholeFile(tmp_.Sub("agent.log"));
  ASSERT_TRUE(
      controller_->Start(agent_->port(), {"--metrics-address=127.0.0.1:" + std::to_string(cport)}))
      << ReadWholeFile(tmp_.Sub("controller.log"));
  csi_ = controller_->Csi();
  registry_ = controller_->Registry();
  auto controller = [&] { return ScrapeMetrics(cport).value_or(""); };
  auto agent = [&] { return ScrapeMetrics(aport).value_or(""); };
  auto value = [](const std::string& text, const std::string& name,
                  const std::map<std::string, std::string>& labels = {}) {
    return Sample(text, name, labels).value_or(0);
  };
  const std::map<std::string, std::string> kOutOfBand{{"cause", "out_of_band_edit"}};
  const std::map<std::string, std::string> kReconciled{{"status", "True"},
                                                       {"reason", "Reconciled"}};

  ASSERT_TRUE(
      WaitForMs([&] { return value(controller(), "pillar_controller_agents_connected") == 1; },
                kCeiling) >= 0)
      << controller();
  std::string c = controller();
  EXPECT_EQ(value(c, "pillar_controller_leader"), 1) << c;
  EXPECT_EQ(value(c, "pillar_controller_agents"), 1);

  RegisterNode("node-a", kNqnA, kIpA);
  ASSERT_TRUE(Create("vol-1", "nvmeof-tcp").ok());
  ASSERT_TRUE(Publish("vol-1", "node-a").ok());
  ASSERT_GE(
      WaitForMs([&] { return value(controller(), "pillar_controller_volumes", kReconciled) == 1; },
                kCeiling),
      0)
      << controller();
  const double repairs = value(controller(), "pillar_controller_repairs_total", kOutOfBand);
  std::string a = agent();
  EXPECT_EQ(value(a, "pillar_agent_exports", {{"protocol", "nvmeof-tcp"}}), 1) << a;
  EXPECT_GT(value(a, "pillar_agent_pool_size_bytes", {{"pool", "demo"}}), 0);
  EXPECT_GT(value(a, "pillar_agent_pool_provisioned_bytes", {{"pool", "demo"}}), 0);
  EXPECT_GT(value(a, "pillar_agent_rpc_duration_seconds_count",
                  {{"method", "/pillar.agent.v1.Agent/GetInfo"}, {"grpc_status_code", "OK"}}),
            0);
  EXPECT_GT(value(c, "pillar_controller_agent_calls_total", {{"rpc", "GetInfo"}, {"code", "OK"}}),
            0);
  const double symlinks = value(a, "pillar_agent_target_operations_total",
                                {{"kind", "configfs_symlink"}, {"result", "ok"}});
  EXPECT_GE(symlinks, 1) << a;

  // One ACL entry wiped out of band: exactly one repair, by that cause.
  std::string link = Subsys("vol-1") + "/allowed_hosts/" + kNqnA;
  ASSERT_TRUE(fs::remove(link)) << link;
  ASSERT_GE(WaitForMs(
                [&] {
                  return value(controller(), "pillar_controller_repairs_total", kOutOfBand) ==
                         repairs + 1;
                },
                kCeiling),
            0)
      << controller() << ReadWholeFile(tmp_.Sub("controller.log"));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_GT(value(agent(), "pillar_agent_target_operations_total",
                  {{"kind", "configfs_symlink"}, {"result", "ok"}}),
            symlinks);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a resync more: nothing else counted
  c = controller();
  EXPECT_EQ(value(c, "pillar_controller_repairs_total", kOutOfBand), repairs + 1) << c;
  EXPECT_GT(value(c, "pillar_controller_reconcile_duration_seconds_count"), 0);
  EXPECT_GT(value(c, "pillar_controller_resync_duration_seconds_count"), 0);

  // The agent stops: agents connected drops to 0; its return (a new boot
  // epoch, its target state wiped) is repaired as an epoch change.
  const double epochs = value(c, "pillar_controller_repairs_total", {{"cause", "epoch_change"}});
  agent_->Stop();
  fs::remove_all(tmp_.Sub("configfs/nvmet/subsystems"));
  fs::create_directories(tmp_.Sub("configfs/nvmet/subsystems"));
  ASSERT_GE(
      WaitForMs([&] { return value(controller(), "pillar_controller_agents_connected") == 0; },
                kCeiling),
      0)
      << controller();
  EXPECT_EQ(value(controller(), "pillar_controller_agents"), 1);
  ASSERT_TRUE(agent_->Start({"--metrics-address=127.0.0.1:" + std::to_string(aport)}))
      << ReadWholeFile(tmp_.Sub("agent.log"));
  ASSERT_GE(
      WaitForMs([&] { return value(controller(), "pillar_controller_agents_connected") == 1; },
                kCeiling),
      0);
  ASSERT_GE(WaitForMs(
                [&] {
                  return value(controller(), "pillar_controller_repairs_total",
                               {{"cause", "epoch_change"}}) == epochs + 1 &&
                         fs::is_symlink(link);
                },
                kCeiling),
            0)
      << controller() << ReadWholeFile(tmp_.Sub("controller.log"));
}

// Issue 25: the real node plugin's /metrics times each CSI call by method
// and code (the sidecars' convention) and counts sessions by protocol.
TEST(NodeMetricsTest, CsiCallsAreTimedByMethodAndCode) {
  TempDir tmp;
  const int port = FreeTcpPort();
  ASSERT_GT(port, 0);
  std::ofstream(tmp.Sub("hostnqn")) << kNqnA << "\n";
  ChildProcess node;
  node.Start(
      {PILLAR_NODE_BIN, "--csi-endpoint=unix://" + tmp.Sub("node.sock"), "--node-id=node-m",
       "--host-nqn-file=" + tmp.Sub("hostnqn"),
       "--iscsi-initiator-file=" + tmp.Sub("initiatorname"), "--node-address=10.99.0.12",
       "--state-dir=" + tmp.Sub("node"), "--metrics-address=127.0.0.1:" + std::to_string(port)},
      tmp.Sub("node.log"));
  ASSERT_GE(WaitForMs([&] { return ScrapeMetrics(port).has_value(); }, kCeiling), 0)
      << ReadWholeFile(tmp.Sub("node.log"));
  auto stub = csi::v1::Node::NewStub(
      grpc::CreateChannel("unix:" + tmp.Sub("node.sock"), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    csi::v1::NodeGetInfoResponse resp;
    ASSERT_TRUE(stub->NodeGetInfo(&ctx, {}, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    csi::v1::NodeStageVolumeResponse resp;
    EXPECT_EQ(stub->NodeStageVolume(&ctx, {}, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  std::string text = ScrapeMetrics(port).value_or("");
  node.Stop();
  EXPECT_EQ(Sample(text, "pillar_node_csi_operations_seconds_count",
                   {{"method_name", "/csi.v1.Node/NodeGetInfo"}, {"grpc_status_code", "OK"}}),
            2)
      << text;
  EXPECT_EQ(Sample(text, "pillar_node_csi_operations_seconds_count",
                   {{"method_name", "/csi.v1.Node/NodeStageVolume"},
                    {"grpc_status_code", "InvalidArgument"}}),
            1);
  EXPECT_EQ(Sample(text, "pillar_node_sessions", {{"protocol", "nvmeof-tcp"}}), 0);
  EXPECT_EQ(Sample(text, "pillar_node_sessions", {{"protocol", "nfs"}}), 0);
}

TEST_F(ControllerIntegrationTest, NodeIdentityChangeRepairsEveryVolumePublishedToIt) {
  RegisterNode("node-a", kNqnA, kIpA);
  RegisterNode("node-b", kNqnB, kIpB);
  for (const char* v : {"nfs-1", "nfs-2"}) {
    auto s = Create(v, "nfs");
    ASSERT_TRUE(s.ok()) << s.error_message() << ReadWholeFile(tmp_.Sub("agent.log"));
    ASSERT_TRUE(Publish(v, "node-a", true).ok());
    ASSERT_TRUE(Publish(v, "node-b", true).ok());
  }
  ASSERT_TRUE(Create("nvme-1", "nvmeof-tcp").ok());
  ASSERT_TRUE(Publish("nvme-1", "node-a").ok());
  std::string path1 = tmp_.Sub("pools/demo/nfs-1"), path2 = tmp_.Sub("pools/demo/nfs-2");
  auto has = [&](const std::string& path, const std::string& ip) {
    std::string t = ExportfsTable();
    std::istringstream lines(t);
    std::string current;
    for (std::string l; std::getline(lines, l);) {
      std::istringstream w(l);
      std::string first;
      w >> first;
      if (!first.empty() && first[0] == '/') current = first;
      if (current == path && l.find(ip + "(") != std::string::npos) return true;
    }
    return false;
  };
  ASSERT_TRUE(has(path1, kIpA) && has(path1, kIpB) && has(path2, kIpA)) << ExportfsTable();

  // node-a is re-IP'd (new DHCP lease) and gets a new host NQN; it
  // re-registers; its publications are untouched.
  RegisterNode("node-a", kNqnA2, kIpA2);
  int64_t ms = WaitForMs(
      [&] {
        return has(path1, kIpA2) && has(path2, kIpA2) && !has(path1, kIpA) && !has(path2, kIpA) &&
               fs::is_symlink(Subsys("nvme-1") + "/allowed_hosts/" + kNqnA2) &&
               !fs::exists(Subsys("nvme-1") + "/allowed_hosts/" + kNqnA);
      },
      kCeiling);
  ASSERT_GE(ms, 0) << ExportfsTable() << ReadWholeFile(tmp_.Sub("controller.log"));
  Figure("node identity change -> 3 volumes repaired", ms);
  EXPECT_TRUE(has(path1, kIpB) && has(path2, kIpB)) << "node-b untouched";

  // Another node's unpublish leaves the re-IP'd node's rule alone.
  ASSERT_TRUE(Unpublish("nfs-1", "node-b").ok());
  EXPECT_FALSE(has(path1, kIpB));
  EXPECT_TRUE(has(path1, kIpA2)) << ExportfsTable();
  EXPECT_TRUE(has(path2, kIpB) && has(path2, kIpA2));
  EXPECT_EQ(Condition("nfs-1"), "True/Reconciled");
}

TEST_F(ControllerIntegrationTest, VolumeWithoutExportSpecIsNeverGuessedThenRepairedByPillarctl) {
  RegisterNode("node-a", kNqnA, kIpA);
  ASSERT_TRUE(Create("legacy-1", "nvmeof-tcp").ok());
  ASSERT_TRUE(Publish("legacy-1", "node-a").ok());
  // Data on the volume, to prove it survives.
  std::string image = tmp_.Sub("pools/demo/legacy-1.img");
  {
    std::fstream f(image, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    f << "pillar-seed-001-data";
  }
  // A volume from before exportSpec was recorded.
  for (int i = 0; i < 5; ++i) {
    auto o = store_->Get("PillarVolumeState", "legacy-1");
    ASSERT_TRUE(o.ok());
    o->status.erase("exportSpec");
    if (store_->UpdateStatus(*o).ok()) break;
  }
  // Target state lost; the agent comes back empty.
  agent_->Stop();
  fs::remove_all(tmp_.Sub("configfs"));
  ASSERT_TRUE(agent_->Start());
  ASSERT_GE(WaitForMs([&] { return Condition("legacy-1") == "False/ExportSpecMissing"; }, kCeiling),
            0)
      << Condition("legacy-1");
  // Untouched: several resyncs later, no export was guessed. (A hold, not a
  // limit: a slow machine only makes it check fewer resyncs.)
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_FALSE(fs::exists(Subsys("legacy-1")));
  EXPECT_EQ(Condition("legacy-1"), "False/ExportSpecMissing");
  auto before = store_->Get("PillarVolumeState", "legacy-1");
  ASSERT_TRUE(before.ok());

  SystemExec exec;
  std::string ctl = PILLARCTL_BIN;
  std::string store_flag = "--store=" + controller_->store_path();
  // Every value must be given explicitly.
  auto missing = exec.Run({{ctl, store_flag, "repair", "export-spec", "legacy-1", "--port=4420",
                            "--bind-address=127.0.0.1"}});
  ASSERT_TRUE(missing.ok());
  EXPECT_NE(missing->exit_code, 0);
  auto bad = exec.Run({{ctl, store_flag, "repair", "export-spec", "legacy-1", "--port=4420",
                        "--bind-address=127.0.0.1", "--acl-enabled=yes"}});
  ASSERT_TRUE(bad.ok());
  EXPECT_NE(bad->exit_code, 0);
  EXPECT_NE(bad->err.find("--acl-enabled"), std::string::npos) << bad->err;
  // A stale snapshot pin is refused and writes nothing.
  auto stale =
      exec.Run({{ctl, store_flag, "repair", "export-spec", "legacy-1", "--port=4420",
                 "--bind-address=127.0.0.1", "--acl-enabled=true", "--expect-resource-version=1"}});
  ASSERT_TRUE(stale.ok());
  EXPECT_NE(stale->exit_code, 0);
  EXPECT_EQ(store_->Get("PillarVolumeState", "legacy-1")->resource_version,
            before->resource_version);

  auto repaired =
      exec.Run({{ctl, store_flag, "repair", "export-spec", "legacy-1", "--bind-address=127.0.0.1",
                 "--port=4420", "--acl-enabled=true", "--expect-uid=" + before->uid,
                 "--backup-dir=" + tmp_.Sub("backup"), "--timeout=120"},
                "",
                std::chrono::seconds(180)});
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(repaired->exit_code, 0) << repaired->out << repaired->err;
  EXPECT_NE(repaired->out.find("ExportReconciled=True reason=Reconciled"), std::string::npos);
  EXPECT_TRUE(fs::exists(tmp_.Sub("backup/pvst-backup.json")));
  EXPECT_TRUE(fs::is_symlink(Subsys("legacy-1") + "/allowed_hosts/" + kNqnA));
  auto after = store_->Get("PillarVolumeState", "legacy-1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->status["publishedNodes"], before->status["publishedNodes"]);
  EXPECT_EQ(after->status["exportSpec"]["aclEnabled"], true);
  std::string data = ReadWholeFile(image);
  EXPECT_EQ(data.substr(4096, 20), "pillar-seed-001-data");
  // A second repair is refused: the record exists now.
  auto twice = exec.Run({{ctl, store_flag, "repair", "export-spec", "legacy-1",
                          "--bind-address=127.0.0.1", "--port=4420", "--acl-enabled=false"}});
  ASSERT_TRUE(twice.ok());
  EXPECT_NE(twice->exit_code, 0);
  EXPECT_EQ(store_->Get("PillarVolumeState", "legacy-1")->status["exportSpec"]["aclEnabled"], true);
}

// An iSCSI CHAP volume's create: the key travels to the agent with it.
grpc::Status CreateChap(csi::v1::Controller::Stub& csi, const std::string& name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  csi::v1::CreateVolumeRequest req;
  req.set_name(name);
  req.mutable_capacity_range()->set_required_bytes(16LL << 20);
  auto* cap = req.add_volume_capabilities();
  cap->mutable_block();
  cap->mutable_access_mode()->set_mode(VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  auto& p = *req.mutable_parameters();
  p["agent"] = "storage-1";
  p["pool"] = "demo";
  p["protocol"] = "iscsi";
  p["bindAddress"] = "127.0.0.1";
  p["auth"] = "chap";
  (*req.mutable_secrets())["chapUsername"] = "tenant-a";
  (*req.mutable_secrets())["chapPassword"] = "tenant-a-secret-1";
  csi::v1::CreateVolumeResponse resp;
  return csi.CreateVolume(&ctx, req, &resp);
}

// Every regular file under `dir` (recursively), as paths relative to it.
std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  }
  return out;
}

// Issue 22, item 1: each agent connection is bound to that agent's identity.
// storage-1's address answered by another agent's certificate, or by a node's
// certificate carrying storage-1's name and host, fails the handshake: the
// agent is unreachable as far as the controller is concerned, and the CHAP key
// of a create never reaches the impostor.
TEST_F(ControllerIntegrationTest, AnAgentIsKnownByItsOwnIdentityAndNoImpostorGetsAKey) {
  auto agent_state = [&](const std::string& reason) {
    auto a = store_->Get("PillarAgent", "storage-1");
    return a.ok() && a->status.dump().find("\"" + reason + "\"") != std::string::npos;
  };
  for (const std::string impostor : {"agent-2", "node-named-storage-1"}) {
    SCOPED_TRACE(impostor);
    agent_->Stop();
    agent_->UseCert(impostor);
    ASSERT_TRUE(agent_->Start()) << ReadWholeFile(tmp_.Sub("agent.log"));
    // The controller says why, once it has tried: the identity presented and
    // the one expected.
    const std::string presented =
        impostor == "agent-2" ? "pillar-csi://agent/storage-2" : "pillar-csi://node/storage-1";
    const std::string refusal =
        "peer presents " + presented + " where pillar-csi://agent/storage-1 was expected";
    ASSERT_GE(WaitForMs(
                  [&] {
                    return ReadWholeFile(tmp_.Sub("controller.log")).find(refusal) !=
                           std::string::npos;
                  },
                  kCeiling),
              0);
    ASSERT_GE(WaitForMs([&] { return agent_state("Unreachable"); }, kCeiling), 0);
    grpc::Status s = CreateChap(*csi_, "chap-" + impostor);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(FilesUnder(tmp_.Sub("state/credentials")), std::vector<std::string>{});
    EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/chap-" + impostor + ".img")));
  }
  // The real storage-1 again: connected, and its key arrives.
  agent_->Stop();
  agent_->UseCert("agent");
  ASSERT_TRUE(agent_->Start()) << ReadWholeFile(tmp_.Sub("agent.log"));
  ASSERT_GE(WaitForMs([&] { return agent_state("Connected"); }, kCeiling), 0);
  grpc::Status s = CreateChap(*csi_, "chap-real");
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(FilesUnder(tmp_.Sub("state/credentials")).size(), 1U);
}

// Issue 22, item 3: a create refused because a foreign object holds the name
// leaves no record, so nothing exports, marks or deletes that object: not the
// reconciler's passes, not a DeleteVolume of the same name.
TEST_F(ControllerIntegrationTest, ARefusedCreateLeavesNothingThatWouldTouchTheForeignObject) {
  RegisterNode("node-a", kNqnA, kIpA);
  const std::string image = tmp_.Sub("pools/demo/precious.img");
  const std::string data(1 << 20, 'P');
  { std::ofstream(image, std::ios::binary) << data; }
  grpc::Status s = Create("precious", "nvmeof-tcp");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  EXPECT_EQ(store_->Get("PillarVolumeState", "precious").status().code(), Code::kNotFound);
  // Several resyncs (2 s each) later, nothing was exported or fenced.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_FALSE(fs::exists(Subsys("precious")));
  for (const auto& f : FilesUnder(tmp_.Sub("state"))) {
    EXPECT_EQ(f.find("precious"), std::string::npos) << f;
  }
  grpc::Status deleted = Delete("precious");
  EXPECT_TRUE(deleted.ok()) << deleted.error_message();
  EXPECT_EQ(ReadWholeFile(image), data);
  // Retried as often as a CO likes: still refused, still no record.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Create("precious", "nvmeof-tcp").error_code(), grpc::StatusCode::ALREADY_EXISTS);
  }
  EXPECT_EQ(store_->Get("PillarVolumeState", "precious").status().code(), Code::kNotFound);
  EXPECT_EQ(ReadWholeFile(image), data);
}

// Issue 22, item 4: creates that fail leave no records behind (a tenant
// churning failing claims grows nothing), and a size near INT64_MAX is
// OUT_OF_RANGE instead of overflowing the rounding.
TEST_F(ControllerIntegrationTest, FailedCreatesLeaveNoRecordsAndHugeSizesAreOutOfRange) {
  for (int i = 0; i < 20; ++i) {
    // import=true of storage that does not exist: NOT_FOUND from the agent.
    grpc::Status s =
        Create("churn-" + std::to_string(i), "nvmeof-tcp", nullptr, {{"import", "true"}});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  for (int64_t bytes : {std::numeric_limits<int64_t>::max(),
                        std::numeric_limits<int64_t>::max() - int64_t{1 << 20}}) {
    grpc::ClientContext ctx;
    csi::v1::CreateVolumeRequest req;
    req.set_name("huge");
    req.mutable_capacity_range()->set_required_bytes(bytes);
    *req.add_volume_capabilities() = Cap(true, VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    (*req.mutable_parameters())["agent"] = "storage-1";
    (*req.mutable_parameters())["pool"] = "demo";
    (*req.mutable_parameters())["protocol"] = "nvmeof-tcp";
    csi::v1::CreateVolumeResponse resp;
    grpc::Status s = csi_->CreateVolume(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE) << bytes << ": " << s.error_message();
  }
  auto list = store_->List("PillarVolumeState");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->items.size(), 0U);
}

// Issue 24 on the real binaries and a real file pool: a snapshot keeps the
// data of its moment, a restore and a clone are copies that never touch
// their source, and deleting the source and then the snapshot leaves the
// restored data intact and nothing of the snapshot behind.
TEST_F(ControllerIntegrationTest, SnapshotRestoreAndCloneOnARealFilePool) {
  constexpr int64_t kMiB = 1LL << 20;
  auto image = [&](const std::string& vol) { return tmp_.Sub("pools/demo/" + vol + ".img"); };
  // What a consumer writes through its device, written to the image itself.
  auto fill = [&](const std::string& vol, char c) {
    std::fstream f(image(vol), std::ios::in | std::ios::out | std::ios::binary);
    std::string block(kMiB, c);
    for (int64_t off : {int64_t{0}, 8 * kMiB}) {
      f.seekp(off);
      f.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
  };
  auto holds = [&](const std::string& vol, char c) {
    std::ifstream f(image(vol), std::ios::binary);
    std::string got(kMiB, '\0');
    for (int64_t off : {int64_t{0}, 8 * kMiB}) {
      f.seekg(off);
      f.read(got.data(), static_cast<std::streamsize>(got.size()));
      if (got != std::string(kMiB, c)) return false;
    }
    return true;
  };
  auto snapshot = [&](const std::string& name, const std::string& source,
                      csi::v1::CreateSnapshotResponse* out = nullptr) {
    grpc::ClientContext ctx;
    csi::v1::CreateSnapshotRequest req;
    req.set_name(name);
    req.set_source_volume_id(source);
    csi::v1::CreateSnapshotResponse resp;
    auto s = csi_->CreateSnapshot(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  };
  auto from = [&](const std::string& name, int64_t bytes, const std::string& snap,
                  const std::string& vol, csi::v1::CreateVolumeResponse* out = nullptr) {
    grpc::ClientContext ctx;
    csi::v1::CreateVolumeRequest req;
    req.set_name(name);
    req.mutable_capacity_range()->set_required_bytes(bytes);
    *req.add_volume_capabilities() = Cap(true, VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    auto& p = *req.mutable_parameters();
    p["agent"] = "storage-1";
    p["pool"] = "demo";
    p["protocol"] = "nvmeof-tcp";
    p["bindAddress"] = "127.0.0.1";
    if (!snap.empty())
      req.mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(snap);
    if (!vol.empty()) req.mutable_volume_content_source()->mutable_volume()->set_volume_id(vol);
    csi::v1::CreateVolumeResponse resp;
    auto s = csi_->CreateVolume(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  };
  auto listed = [&] {
    grpc::ClientContext ctx;
    csi::v1::ListSnapshotsResponse resp;
    EXPECT_TRUE(csi_->ListSnapshots(&ctx, {}, &resp).ok());
    std::vector<std::string> ids;
    for (const auto& e : resp.entries()) ids.push_back(e.snapshot().snapshot_id());
    return ids;
  };

  ASSERT_TRUE(Create("vol-src", "nvmeof-tcp").ok()) << ReadWholeFile(tmp_.Sub("controller.log"));
  fill("vol-src", 'A');
  csi::v1::CreateSnapshotResponse snap;
  auto s = snapshot("snap-1", "vol-src", &snap);
  ASSERT_TRUE(s.ok()) << s.error_message() << ReadWholeFile(tmp_.Sub("agent.log"));
  EXPECT_EQ(snap.snapshot().size_bytes(), 16 * kMiB) << "the real size";
  EXPECT_TRUE(snap.snapshot().ready_to_use());
  fill("vol-src", 'B');  // overwritten after the snapshot

  csi::v1::CreateVolumeResponse restored;
  s = from("vol-restore", 32 * kMiB, "snap-1", "", &restored);
  ASSERT_TRUE(s.ok()) << s.error_message() << ReadWholeFile(tmp_.Sub("agent.log"));
  EXPECT_EQ(restored.volume().capacity_bytes(), 32 * kMiB) << "restored into a larger size";
  EXPECT_EQ(fs::file_size(image("vol-restore")), static_cast<uintmax_t>(32 * kMiB));
  EXPECT_TRUE(holds("vol-restore", 'A')) << "the data of the snapshot's moment";
  EXPECT_TRUE(holds("vol-src", 'B')) << "the source untouched";
  EXPECT_EQ(Condition("vol-restore"), "True/Reconciled");

  ASSERT_TRUE(from("vol-clone", 16 * kMiB, "", "vol-src").ok());
  EXPECT_TRUE(holds("vol-clone", 'B'));
  fill("vol-clone", 'C');
  EXPECT_TRUE(holds("vol-src", 'B')) << "a clone diverges on its own";
  fill("vol-src", 'D');
  EXPECT_TRUE(holds("vol-clone", 'C'));

  // The source goes first: its snapshot stays listed and restorable.
  ASSERT_TRUE(Delete("vol-src").ok());
  EXPECT_EQ(listed(), std::vector<std::string>{"snap-1"});
  ASSERT_TRUE(from("vol-restore-2", 16 * kMiB, "snap-1", "").ok());
  EXPECT_TRUE(holds("vol-restore-2", 'A'));

  // Then the snapshot, while volumes restored from it exist.
  grpc::ClientContext ctx;
  csi::v1::DeleteSnapshotRequest del;
  del.set_snapshot_id("snap-1");
  csi::v1::DeleteSnapshotResponse deleted;
  ASSERT_TRUE(csi_->DeleteSnapshot(&ctx, del, &deleted).ok());
  EXPECT_TRUE(listed().empty());
  EXPECT_EQ(store_->Get("PillarSnapshot", "snap-1").status().code(), Code::kNotFound);
  EXPECT_TRUE(holds("vol-restore", 'A')) << "restored data intact";
  EXPECT_TRUE(holds("vol-restore-2", 'A'));
  EXPECT_EQ(from("vol-restore-3", 16 * kMiB, "snap-1", "").error_code(),
            grpc::StatusCode::NOT_FOUND);

  for (const char* v : {"vol-restore", "vol-restore-2", "vol-clone"}) {
    ASSERT_TRUE(Delete(v).ok()) << v;
  }
  // Nothing of any of them left in the pool.
  for (const auto& e : fs::recursive_directory_iterator(tmp_.Sub("pools/demo"))) {
    std::string name = e.path().filename();
    EXPECT_TRUE(name.find("snap-1") == std::string::npos && name.find("vol-") == std::string::npos)
        << e.path() << " left behind";
  }
}

}  // namespace
}  // namespace pillar::testing
