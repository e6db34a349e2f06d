// Drives pillar-agent-sim (the production agent's wiring with configfs
// simulated) over real gRPC with mutual TLS: file pool with real loop devices,
// exporters on the simulated configfs tree.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "agent_process.h"
#include "common/credentials.h"
#include "common/exec.h"
#include "common/target_name.h"

namespace pillar::testing {
namespace {

namespace v1 = pillar::agent::v1;
namespace fs = std::filesystem;

constexpr const char* kUid = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";
constexpr const char* kOtherUid = "0b1f7a3e-9c2d-4e5f-8a6b-1c2d3e4f5a6b";
constexpr const char* kHostA =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555";
constexpr const char* kHostB =
    "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
constexpr const char* kSubsys = "nqn.2026-12.com.bhyoo.pillar-csi:demo:2fpvc-1";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class AgentGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || !fs::exists("/dev/loop-control")) {
      GTEST_SKIP() << "needs root and loop devices";
    }
    agent_ = AgentProcess::StartWithCerts(tmp_.path());
    ASSERT_NE(agent_, nullptr) << ReadWholeFile(tmp_.Sub("agent.log"));
    stub_ = agent_->Client();
    ASSERT_NE(stub_, nullptr);
  }
  void TearDown() override {
    if (!agent_) return;
    // Leave no loop device behind, whatever the test did.
    SystemExec exec;
    for (const char* img : {"pvc-1.img", "pvc-2.img", "pvc-3.img"}) {
      std::string path = tmp_.Sub("pools/demo/") + img;
      auto r = exec.Run({{"losetup", "-j", path, "-O", "NAME", "-n"}});
      if (!r.ok()) continue;
      std::istringstream lines(r->out);
      for (std::string dev; std::getline(lines, dev);) {
        if (!dev.empty()) (void)exec.Run({{"losetup", "-d", dev}});
      }
    }
    agent_->Stop();
  }

  static v1::CreateVolumeRequest CreateRequest(const std::string& name,
                                               const std::string& uid = kUid) {
    v1::CreateVolumeRequest req;
    req.set_pool("demo");
    req.set_name(name);
    req.set_size_bytes(64LL << 20);
    req.set_mode(v1::VOLUME_MODE_BLOCK);
    req.set_volume_uid(uid);
    return req;
  }

  grpc::Status Send(const v1::CreateVolumeRequest& req, v1::CreateVolumeResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::CreateVolumeResponse resp;
    auto s = stub_->CreateVolume(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }

  grpc::Status Create(const std::string& name, const std::string& uid = kUid,
                      v1::CreateVolumeResponse* out = nullptr) {
    return Send(CreateRequest(name, uid), out);
  }

  grpc::Status Expand(const std::string& id, int64_t size, const std::string& uid) {
    grpc::ClientContext ctx;
    v1::ExpandVolumeRequest req;
    req.set_agent_volume_id(id);
    req.set_size_bytes(size);
    req.set_volume_uid(uid);
    v1::ExpandVolumeResponse resp;
    return stub_->ExpandVolume(&ctx, req, &resp);
  }

  grpc::Status Apply(const std::string& id, int64_t gen, const std::vector<std::string>& hosts,
                     v1::ApplyExportResponse* out = nullptr, const std::string& uid = kUid,
                     v1::Protocol protocol = v1::PROTOCOL_NVMEOF_TCP,
                     std::string* reason = nullptr) {
    grpc::ClientContext ctx;
    v1::ApplyExportRequest req;
    req.set_agent_volume_id(id);
    req.set_protocol(protocol);
    req.mutable_spec()->set_bind_address("127.0.0.1");
    req.mutable_spec()->set_port(protocol == v1::PROTOCOL_ISCSI ? 3260 : 4420);
    req.mutable_spec()->set_acl_enabled(true);
    req.mutable_fence()->set_volume_uid(uid);
    req.mutable_fence()->set_publication_generation(gen);
    for (const auto& h : hosts) req.add_allowed_hosts(h);
    v1::ApplyExportResponse resp;
    auto s = stub_->ApplyExport(&ctx, req, &resp);
    if (out != nullptr) *out = resp;
    if (reason != nullptr) {
      auto it = ctx.GetServerTrailingMetadata().find("pillar-reason");
      *reason = it == ctx.GetServerTrailingMetadata().end()
                    ? ""
                    : std::string(it->second.data(), it->second.size());
    }
    return s;
  }

  grpc::Status Delete(const std::string& id) {
    grpc::ClientContext ctx;
    v1::DeleteVolumeRequest del;
    del.set_agent_volume_id(id);
    del.set_volume_uid(kUid);
    v1::DeleteVolumeResponse resp;
    return stub_->DeleteVolume(&ctx, del, &resp);
  }

  std::string Subsys(const std::string& rel = "") const {
    return tmp_.Sub("configfs/nvmet/subsystems/") + kSubsys + (rel.empty() ? "" : "/" + rel);
  }

  TempDir tmp_;
  std::unique_ptr<AgentProcess> agent_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

TEST_F(AgentGrpcTest, InfoReportsPoolsAndEpoch) {
  grpc::ClientContext ctx;
  v1::GetInfoResponse info;
  ASSERT_TRUE(stub_->GetInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.node_name(), "storage-1");
  EXPECT_FALSE(info.boot_epoch().empty());
  ASSERT_EQ(info.pools_size(), 1);
  EXPECT_EQ(info.pools(0).name(), "demo");
  EXPECT_EQ(info.pools(0).backend(), "file");
  EXPECT_GT(info.pools(0).total_bytes(), 0);
}

TEST_F(AgentGrpcTest, ExportLifecycleConvergesExactlyAndIsFenced) {
  v1::CreateVolumeResponse created;
  ASSERT_TRUE(Create("pvc-1", kUid, &created).ok());
  EXPECT_EQ(created.volume().agent_volume_id(), "demo/pvc-1");
  EXPECT_EQ(created.volume().size_bytes(), 64LL << 20);
  ASSERT_TRUE(Create("pvc-1").ok()) << "CreateVolume must be idempotent";

  v1::ApplyExportResponse applied;
  auto s = Apply("demo/pvc-1", 1, {kHostA}, &applied);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(applied.changes().empty());
  EXPECT_EQ(applied.export_().target_id(), kSubsys);
  ASSERT_EQ(applied.export_().allowed_hosts_size(), 1);
  EXPECT_EQ(applied.export_().allowed_hosts(0), kHostA);
  EXPECT_EQ(applied.export_().fence().publication_generation(), 1);
  EXPECT_EQ(Slurp(Subsys("attr_allow_any_host")), "0");
  EXPECT_TRUE(fs::is_symlink(Subsys("allowed_hosts/") + kHostA));
  EXPECT_EQ(Slurp(Subsys("namespaces/1/device_path")).rfind("/dev/loop", 0), 0u);
  EXPECT_EQ(Slurp(Subsys("namespaces/1/enable")), "1");

  // Converged: the same intent again changes nothing.
  ASSERT_TRUE(Apply("demo/pvc-1", 1, {kHostA}, &applied).ok());
  EXPECT_TRUE(applied.changes().empty()) << applied.changes(0);

  // A new ACL set replaces the old one exactly.
  ASSERT_TRUE(Apply("demo/pvc-1", 2, {kHostB}, &applied).ok());
  EXPECT_FALSE(fs::exists(Subsys("allowed_hosts/") + kHostA));
  EXPECT_TRUE(fs::is_symlink(Subsys("allowed_hosts/") + kHostB));

  // An older generation and another lifecycle are refused and change nothing.
  std::string reason;
  s = Apply("demo/pvc-1", 1, {kHostA}, nullptr, kUid, v1::PROTOCOL_NVMEOF_TCP, &reason);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << s.error_message();
  EXPECT_EQ(reason, "StaleGeneration");
  s = Apply("demo/pvc-1", 9, {kHostA}, nullptr, kOtherUid, v1::PROTOCOL_NVMEOF_TCP, &reason);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_FALSE(fs::exists(Subsys("allowed_hosts/") + kHostA));

  // Out-of-band deletion of the rule is repaired by the next apply.
  fs::remove(Subsys("allowed_hosts/") + kHostB);
  ASSERT_TRUE(Apply("demo/pvc-1", 2, {kHostB}, &applied).ok());
  EXPECT_EQ(applied.changes_size(), 1);
  EXPECT_TRUE(fs::is_symlink(Subsys("allowed_hosts/") + kHostB));

  {
    grpc::ClientContext ctx;
    v1::ListExportsResponse list;
    ASSERT_TRUE(stub_->ListExports(&ctx, {}, &list).ok());
    ASSERT_EQ(list.exports_size(), 1);
    EXPECT_EQ(list.exports(0).agent_volume_id(), "demo/pvc-1");
    EXPECT_EQ(list.exports(0).fence().volume_uid(), kUid);
  }
  {  // Deleting an exported volume is refused.
    grpc::ClientContext ctx;
    v1::DeleteVolumeRequest del;
    del.set_agent_volume_id("demo/pvc-1");
    del.set_volume_uid(kUid);
    v1::DeleteVolumeResponse resp;
    EXPECT_EQ(stub_->DeleteVolume(&ctx, del, &resp).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext ctx;
    v1::UnexportVolumeRequest req;
    req.set_agent_volume_id("demo/pvc-1");
    req.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    req.mutable_fence()->set_volume_uid(kUid);
    req.mutable_fence()->set_publication_generation(3);
    v1::UnexportVolumeResponse resp;
    ASSERT_TRUE(stub_->UnexportVolume(&ctx, req, &resp).ok());
    EXPECT_FALSE(fs::exists(Subsys()));
  }
  {
    auto ds = Delete("demo/pvc-1");
    ASSERT_TRUE(ds.ok()) << ds.error_message();
    EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/pvc-1.img")));
  }
}

// Issue 26: many exports in one call, each applied, fenced and answered on
// its own; a stale, malformed or missing item stops none of the others.
TEST_F(AgentGrpcTest, ApplyExportsAnswersEachItemOnItsOwn) {
  for (const char* name : {"pvc-1", "pvc-2", "pvc-3"}) ASSERT_TRUE(Create(name).ok()) << name;
  ASSERT_TRUE(Apply("demo/pvc-2", 5, {kHostB}).ok());
  auto item = [](const std::string& id, int64_t gen, const std::string& host) {
    v1::ApplyExportRequest req;
    req.set_agent_volume_id(id);
    req.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    req.mutable_spec()->set_bind_address("127.0.0.1");
    req.mutable_spec()->set_port(4420);
    req.mutable_spec()->set_acl_enabled(true);
    req.mutable_fence()->set_volume_uid(kUid);
    req.mutable_fence()->set_publication_generation(gen);
    req.add_allowed_hosts(host);
    return req;
  };
  v1::ApplyExportsRequest batch;
  *batch.add_exports() = item("demo/pvc-1", 1, kHostA);
  *batch.add_exports() = item("demo/pvc-2", 1, kHostA);  // generation 5 holds it
  *batch.add_exports() = item("demo/pvc-3", 1, kHostA);
  batch.mutable_exports(2)->clear_spec();  // malformed
  *batch.add_exports() = item("demo/pvc-3", 1, kHostB);
  *batch.add_exports() = item("demo/pvc-9", 1, kHostA);  // no such volume
  auto send = [&](const v1::ApplyExportsRequest& req, v1::ApplyExportsResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->ApplyExports(&ctx, req, resp);
  };
  v1::ApplyExportsResponse resp;
  auto s = send(batch, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.results_size(), 5);
  std::vector<int> codes;
  for (const auto& r : resp.results()) codes.push_back(r.code());
  EXPECT_EQ(codes,
            (std::vector<int>{0, grpc::StatusCode::ABORTED, grpc::StatusCode::INVALID_ARGUMENT, 0,
                              grpc::StatusCode::NOT_FOUND}));
  EXPECT_EQ(resp.results(1).agent_volume_id(), "demo/pvc-2");
  EXPECT_NE(resp.results(2).message().find("exports[2]"), std::string::npos)
      << resp.results(2).message();
  EXPECT_NE(resp.results(2).message().find("spec"), std::string::npos);
  EXPECT_FALSE(resp.results(0).changes().empty());
  EXPECT_EQ(resp.results(0).export_().allowed_hosts(0), kHostA);
  EXPECT_EQ(resp.results(0).export_().fence().publication_generation(), 1);
  EXPECT_EQ(resp.results(3).export_().allowed_hosts(0), kHostB);
  EXPECT_FALSE(resp.results(1).has_export_());
  // The stale item changed nothing: generation 5's host alone is admitted.
  auto pvc2 = tmp_.Sub("configfs/nvmet/subsystems/") + TargetName(kDefaultNqnPrefix, "demo/pvc-2") +
              "/allowed_hosts/";
  EXPECT_TRUE(fs::is_symlink(pvc2 + kHostB));
  EXPECT_FALSE(fs::exists(pvc2 + kHostA));
  EXPECT_TRUE(fs::is_symlink(Subsys("allowed_hosts/") + kHostA));

  // Converged: the applied items again change nothing.
  v1::ApplyExportsRequest again;
  *again.add_exports() = batch.exports(0);
  *again.add_exports() = batch.exports(3);
  v1::ApplyExportsResponse second;
  ASSERT_TRUE(send(again, &second).ok());
  ASSERT_EQ(second.results_size(), 2);
  for (const auto& r : second.results()) {
    EXPECT_EQ(r.code(), 0) << r.message();
    EXPECT_TRUE(r.changes().empty()) << r.agent_volume_id();
  }

  // More than a call may carry is refused whole, naming the field.
  v1::ApplyExportsRequest huge;
  for (int i = 0; i <= 10000; ++i) *huge.add_exports() = batch.exports(0);
  v1::ApplyExportsResponse refused;
  s = send(huge, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.results_size(), 0);
  EXPECT_NE(s.error_message().find("exports"), std::string::npos) << s.error_message();
}

// Issue 11: a hand-made precious.img in the file pool is never adopted,
// exported, grown or deleted; import=true is the one explicit way in.
TEST_F(AgentGrpcTest, StorageNotMarkedAsPillarsIsNeverAdoptedOrTouched) {
  const std::string image = tmp_.Sub("pools/demo/precious.img");
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 7 + 3) & 0xff);
  {
    std::ofstream out(image, std::ios::binary);
    out << data;
  }
  auto unchanged = [&] {
    std::ifstream in(image, std::ios::binary);
    std::string now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return now == data;
  };
  v1::CreateVolumeRequest req = CreateRequest("precious");
  req.set_size_bytes(1 << 20);
  v1::CreateVolumeResponse created;
  auto s = Send(req, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  EXPECT_NE(s.error_message().find("file pool demo: precious.img exists and is not pillar's"),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("import=true"), std::string::npos);
  EXPECT_TRUE(unchanged());
  EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/.pillar/precious.json")));

  // No fencing mark was left: a delete of any lifecycle reaches the storage
  // check and is refused there, the file untouched.
  for (const char* uid : {kUid, kOtherUid}) {
    grpc::ClientContext dctx;
    v1::DeleteVolumeRequest del;
    del.set_agent_volume_id("demo/precious");
    del.set_volume_uid(uid);
    v1::DeleteVolumeResponse resp;
    auto ds = stub_->DeleteVolume(&dctx, del, &resp);
    EXPECT_EQ(ds.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << ds.error_message();
    EXPECT_NE(ds.error_message().find("not pillar's"), std::string::npos) << ds.error_message();
    EXPECT_TRUE(unchanged());
  }
  {
    EXPECT_EQ(Expand("demo/precious", 2 << 20, kUid).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(fs::file_size(image), data.size());
  }
  // Never exported either (issue 22): an export of unmarked storage is
  // refused before a fencing mark is planted, so no later call finds one.
  {
    auto as = Apply("demo/precious", 1, {kHostA});
    EXPECT_EQ(as.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << as.error_message();
    EXPECT_FALSE(
        fs::exists(tmp_.Sub("configfs/nvmet/subsystems/"
                            "nqn.2026-12.com.bhyoo.pillar-csi:demo:2fprecious")));
    for (const auto& e : fs::recursive_directory_iterator(tmp_.Sub("state"))) {
      EXPECT_EQ(e.path().string().find("precious"), std::string::npos) << e.path();
    }
    EXPECT_TRUE(unchanged());
  }

  // The explicit import: marks it as kUid's, data intact; then another
  // lifecycle can neither adopt, grow, export nor delete it.
  {
    req.set_import_existing(true);
    auto is = Send(req, &created);
    ASSERT_TRUE(is.ok()) << is.error_message();
    EXPECT_EQ(created.volume().owner_uid(), kUid);
    EXPECT_TRUE(unchanged());
  }
  EXPECT_EQ(Create("precious", kOtherUid).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  {
    EXPECT_EQ(Expand("demo/precious", 2 << 20, kOtherUid).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(fs::file_size(image), data.size());
  }
  EXPECT_EQ(Apply("demo/precious", 1, {kHostA}, nullptr, kOtherUid).error_code(),
            grpc::StatusCode::ABORTED);  // the fencing mark of kUid refuses it first
  {
    auto es = Expand("demo/precious", 2 << 20, kUid);
    ASSERT_TRUE(es.ok()) << es.error_message();
    EXPECT_EQ(fs::file_size(image), size_t{2} << 20);
  }
  // Importing what does not exist creates nothing.
  {
    req.set_name("absent");
    EXPECT_EQ(Send(req).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/absent.img")));
  }
}

// Issue 22, item 3: a fencing mark never stands in for ownership. Storage
// without an ownership mark (here: a volume whose sidecar is gone) is neither
// re-created, exported, grown nor deleted, whatever marks the agent holds;
// and an unexport plants no mark for a volume the agent has none for.
TEST_F(AgentGrpcTest, AFencingMarkNeverStandsInForOwnership) {
  ASSERT_TRUE(Create("pvc-1").ok());
  const std::string image = tmp_.Sub("pools/demo/pvc-1.img");
  fs::remove(tmp_.Sub("pools/demo/.pillar/pvc-1.json"));  // unmarked now
  EXPECT_EQ(Create("pvc-1").error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/.pillar/pvc-1.json")));
  auto applied = Apply("demo/pvc-1", 1, {kHostA});
  EXPECT_EQ(applied.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(applied.error_message().find("not pillar's"), std::string::npos)
      << applied.error_message();
  EXPECT_EQ(Expand("demo/pvc-1", 128LL << 20, kUid).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Delete("demo/pvc-1").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(fs::file_size(image), size_t{64} << 20);

  // Unexport of a volume the agent holds no mark for: OK, and no mark made.
  auto marks = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(tmp_.Sub("state"))) {
      if (e.is_regular_file()) out.push_back(e.path().filename().string());
    }
    return out;
  };
  auto before = marks();
  {
    grpc::ClientContext ctx;
    v1::UnexportVolumeRequest req;
    req.set_agent_volume_id("demo/never-made");
    req.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    req.mutable_fence()->set_volume_uid(kOtherUid);
    req.mutable_fence()->set_publication_generation(7);
    v1::UnexportVolumeResponse resp;
    auto s = stub_->UnexportVolume(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(marks(), before);
  EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/never-made.img")));
}

// An NFS volume's directory gets the root mode and owner the controller
// sends, once: a retried create leaves what its users made of it since.
TEST_F(AgentGrpcTest, FilesystemVolumeRootGetsTheModeAndOwnerOnceAtCreate) {
  const std::string dir = tmp_.Sub("pools/demo/share");
  auto stat_of = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st;
  };
  v1::CreateVolumeRequest req = CreateRequest("share");
  req.set_mode(v1::VOLUME_MODE_FILESYSTEM);
  req.mutable_root()->set_mode(02770);
  req.mutable_root()->set_uid(1000);
  req.mutable_root()->set_gid(2000);
  v1::CreateVolumeResponse created;
  auto s = Send(req, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(created.volume().export_path(), dir);
  struct stat st = stat_of(dir);
  EXPECT_EQ(st.st_mode & 07777, 02770u);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 2000u);

  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);  // what a user of the volume did
  s = Send(req);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(stat_of(dir).st_mode & 07777, 0700u);

  // A block volume has no root directory; a mode beyond 07777 is no mode.
  v1::CreateVolumeRequest block = CreateRequest("pvc-2");
  *block.mutable_root() = req.root();
  auto bs = Send(block);
  EXPECT_EQ(bs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bs.error_message().find("filesystem volumes only"), std::string::npos)
      << bs.error_message();
  EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/pvc-2.img")));
  v1::CreateVolumeRequest wide = req;
  wide.set_name("wide");
  wide.mutable_root()->set_mode(010777);
  EXPECT_EQ(Send(wide).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/wide")));
}

TEST_F(AgentGrpcTest, IscsiExportOnLio) {
  ASSERT_TRUE(Create("pvc-2").ok());
  const std::string initiator = "iqn.1993-08.org.debian:01:consumer-a";
  v1::ApplyExportResponse applied;
  auto s = Apply("demo/pvc-2", 1, {initiator}, &applied, kUid, v1::PROTOCOL_ISCSI);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string tpg = tmp_.Sub("configfs/target/iscsi/") + applied.export_().target_id() + "/tpgt_1";
  EXPECT_TRUE(fs::is_directory(tpg + "/acls/" + initiator));
  EXPECT_TRUE(fs::is_directory(tpg + "/np/127.0.0.1:3260"));
  EXPECT_EQ(Slurp(tpg + "/enable"), "1");
  ASSERT_TRUE(Apply("demo/pvc-2", 1, {initiator}, &applied, kUid, v1::PROTOCOL_ISCSI).ok());
  EXPECT_TRUE(applied.changes().empty());
}

TEST_F(AgentGrpcTest, BadInputIsRefusedByFieldAndChangesNothing) {
  auto expect_invalid = [&](const grpc::Status& st, const std::string& field) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find(field), std::string::npos) << st.error_message();
  };
  expect_invalid(Apply("demo/../../etc", 1, {kHostA}), "agentVolumeId");
  expect_invalid(Apply("demo/pvc-1", 1, {"nqn.2014-08.x:a/../../b"}), "allowedHosts[0]");
  expect_invalid(Apply("demo/pvc-1", 1, {kHostA, "nqn.2014-08.org.x:a\nb"}), "allowedHosts[1]");
  expect_invalid(Apply("demo/pvc-1", 1, {kHostA}, nullptr, "not-a-uuid"), "fence.volumeUid");
  expect_invalid(Create("../escape"), "name");
  expect_invalid(Create("pvc-x", "uid"), "volumeUid");
  // Caps on repeated fields (common/caps.cc), checked before anything else.
  expect_invalid(Apply("demo/pvc-1", 1, std::vector<std::string>(1025, kHostA)),
                 "allowedHosts has 1025 entries; at most 1024");
  {
    v1::CreateVolumeRequest req = CreateRequest("pvc-x");
    for (int i = 0; i < 65; ++i) (*req.mutable_parameters())["p" + std::to_string(i)] = "v";
    expect_invalid(Send(req), "parameters has 65 entries");
    EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/pvc-x.img")));
  }
  {
    grpc::ClientContext ctx;
    v1::ApplyExportRequest req;  // no spec
    req.set_agent_volume_id("demo/pvc-1");
    req.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    v1::ApplyExportResponse resp;
    expect_invalid(stub_->ApplyExport(&ctx, req, &resp), "spec");
  }
  // An export of a volume that does not exist never creates one.
  auto missing = Apply("demo/pvc-9", 1, {kHostA});
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND) << missing.error_message();
  EXPECT_NE(missing.error_message().find("never a reason to create"), std::string::npos);
  EXPECT_FALSE(fs::exists(tmp_.Sub("pools/demo/pvc-9.img")));
  EXPECT_TRUE(fs::is_empty(tmp_.Sub("configfs/nvmet/subsystems")));
  auto no_pool = Apply("other/pvc-1", 1, {kHostA});
  EXPECT_EQ(no_pool.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(AgentGrpcTest, ClientsWithoutATrustedCertificateAreRefused) {
  for (auto& stub : {agent_->Client("rogue", "ca")}) {
    ASSERT_NE(stub, nullptr);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetInfoResponse info;
    EXPECT_FALSE(stub->GetInfo(&ctx, {}, &info).ok());
  }
  auto plain = v1::Agent::NewStub(
      grpc::CreateChannel(agent_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetInfoResponse info;
  EXPECT_FALSE(plain->GetInfo(&ctx, {}, &info).ok());
}

TEST_F(AgentGrpcTest, BootEpochChangesOnRestartAndOnTargetStateLoss) {
  auto epoch = [&] {
    grpc::ClientContext ctx;
    v1::GetInfoResponse info;
    EXPECT_TRUE(stub_->GetInfo(&ctx, {}, &info).ok());
    return info.boot_epoch();
  };
  ASSERT_TRUE(Create("pvc-1").ok());
  ASSERT_TRUE(Apply("demo/pvc-1", 1, {kHostA}).ok());
  std::string first = epoch();
  EXPECT_EQ(epoch(), first);

  // Simulated module unload: the whole nvmet tree vanishes.
  fs::remove_all(tmp_.Sub("configfs/nvmet"));
  std::string after_loss = epoch();
  EXPECT_NE(after_loss, first);
  {
    grpc::ClientContext ctx;
    v1::ListExportsResponse list;
    ASSERT_TRUE(stub_->ListExports(&ctx, {}, &list).ok());
    EXPECT_EQ(list.exports_size(), 0);
  }

  agent_->Stop();
  ASSERT_TRUE(agent_->Start());
  stub_ = agent_->Client();
  EXPECT_NE(epoch(), after_loss);
  // The restarted agent re-creates the simulated tree; the export is rebuilt.
  v1::ApplyExportResponse applied;
  auto s = Apply("demo/pvc-1", 1, {kHostA}, &applied);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(fs::is_symlink(Subsys("allowed_hosts/") + kHostA));
}

TEST_F(AgentGrpcTest, ChapCredentialsAreKeptRootOnlyAndRebuildAnExportAfterARestart) {
  const std::string key = "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2:";
  const std::string digest = CredentialsDigest("demo/pvc-1", {"", key, "", ""});
  ASSERT_TRUE(Create("pvc-1").ok());
  auto apply = [&](const std::string& want_digest, const std::string& with_key) {
    grpc::ClientContext ctx;
    v1::ApplyExportRequest req;
    req.set_agent_volume_id("demo/pvc-1");
    req.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    req.mutable_spec()->set_bind_address("127.0.0.1");
    req.mutable_spec()->set_port(4420);
    req.mutable_spec()->set_acl_enabled(true);
    req.mutable_spec()->set_auth("chap");
    req.mutable_spec()->set_auth_digest(want_digest);
    if (!with_key.empty()) req.mutable_credentials()->set_secret(with_key);
    req.mutable_fence()->set_volume_uid(kUid);
    req.mutable_fence()->set_publication_generation(1);
    req.add_allowed_hosts(kHostA);
    v1::ApplyExportResponse resp;
    auto st = stub_->ApplyExport(&ctx, req, &resp);
    if (st.ok()) {
      EXPECT_EQ(resp.export_().spec().auth(), "chap");
      EXPECT_EQ(resp.export_().spec().auth_digest(), digest);
    }
    EXPECT_EQ(st.error_message().find(key.substr(10, 20)), std::string::npos);
    return st;
  };
  std::string host_key = tmp_.Sub("configfs/nvmet/hosts/") + kHostA + "/dhchap_key";
  // No credentials yet and none given: refused, nothing admitted.
  EXPECT_EQ(apply(digest, "").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_FALSE(fs::exists(Subsys("allowed_hosts/") + kHostA));
  // Credentials that do not match the digest: refused by field.
  auto bad = apply(digest, "DHHC-1:00:SlVga3aBjJeirbjDztnk7/oFEBsmMTxHUl1oc36JlJ9Udcmo:");
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("authDigest"), std::string::npos) << bad.error_message();

  auto ok = apply(digest, key);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(Slurp(host_key), key);
  std::string kept = tmp_.Sub("state/credentials/demo:2fpvc-1.json");
  ASSERT_TRUE(fs::exists(kept));
  EXPECT_EQ(fs::status(kept).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(tmp_.Sub("state/credentials")).permissions() & fs::perms::all,
            fs::perms::owner_all);
  // Later applies (the reconciler after a controller restart) send only the digest.
  ASSERT_TRUE(apply(digest, "").ok());
  EXPECT_EQ(apply("sha256:00", "").error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // A reboot loses configfs; the restarted agent rebuilds the export, key
  // included, from what it kept.
  agent_->Stop();
  fs::remove_all(tmp_.Sub("configfs/nvmet"));
  ASSERT_TRUE(agent_->Start());
  stub_ = agent_->Client();
  auto rebuilt = apply(digest, "");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.error_message();
  EXPECT_EQ(Slurp(host_key), key);
  EXPECT_TRUE(fs::is_symlink(Subsys("allowed_hosts/") + kHostA));
  EXPECT_EQ(Slurp(tmp_.Sub("agent.log")).find(key.substr(10, 20)), std::string::npos);

  // DeleteVolume drops them.
  {
    grpc::ClientContext ctx;
    v1::UnexportVolumeRequest req;
    req.set_agent_volume_id("demo/pvc-1");
    req.set_protocol(v1::PROTOCOL_NVMEOF_TCP);
    req.mutable_fence()->set_volume_uid(kUid);
    req.mutable_fence()->set_publication_generation(2);
    v1::UnexportVolumeResponse resp;
    ASSERT_TRUE(stub_->UnexportVolume(&ctx, req, &resp).ok());
  }
  auto ds = Delete("demo/pvc-1");
  ASSERT_TRUE(ds.ok()) << ds.error_message();
  EXPECT_FALSE(fs::exists(kept));
}

constexpr const char* kSnapUid = "5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

grpc::Status Snapshot(v1::Agent::Stub& stub, const std::string& source,
                      const std::string& source_uid, const std::string& name,
                      const std::string& snap_uid, v1::CreateSnapshotResponse* out = nullptr) {
  grpc::ClientContext ctx;
  v1::CreateSnapshotRequest req;
  req.set_source_volume_id(source);
  req.set_source_volume_uid(source_uid);
  req.set_name(name);
  req.set_snapshot_uid(snap_uid);
  v1::CreateSnapshotResponse resp;
  auto s = stub.CreateSnapshot(&ctx, req, &resp);
  if (out != nullptr) *out = resp;
  return s;
}

std::vector<v1::Snapshot> Snapshots(v1::Agent::Stub& stub, const std::string& pool = "") {
  grpc::ClientContext ctx;
  v1::ListSnapshotsRequest req;
  req.set_pool(pool);
  v1::ListSnapshotsResponse resp;
  EXPECT_TRUE(stub.ListSnapshots(&ctx, req, &resp).ok());
  return {resp.snapshots().begin(), resp.snapshots().end()};
}

grpc::Status DeleteSnap(v1::Agent::Stub& stub, const std::string& id, const std::string& uid) {
  grpc::ClientContext ctx;
  v1::DeleteSnapshotRequest req;
  req.set_agent_snapshot_id(id);
  req.set_snapshot_uid(uid);
  v1::DeleteSnapshotResponse resp;
  return stub.DeleteSnapshot(&ctx, req, &resp);
}

// Issue 24 on a file pool: snapshot, restore larger, clone, and the
// contract's codes, all over the real gRPC edge.
TEST_F(AgentGrpcTest, SnapshotRestoreAndCloneOnAFilePool) {
  ASSERT_TRUE(Create("pvc-1").ok());
  v1::CreateSnapshotResponse snap;
  auto s = Snapshot(*stub_, "demo/pvc-1", kUid, "snap-1", kSnapUid, &snap);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(snap.snapshot().agent_snapshot_id(), "demo/snap-1");
  EXPECT_EQ(snap.snapshot().source_volume_id(), "demo/pvc-1");
  EXPECT_EQ(snap.snapshot().size_bytes(), 64LL << 20);
  EXPECT_GT(snap.snapshot().creation_time_unix_nanos(), 0);
  EXPECT_EQ(snap.snapshot().owner_uid(), kSnapUid);
  EXPECT_EQ(snap.snapshot().backend(), "file");
  EXPECT_TRUE(snap.snapshot().ready_to_use());
  // Retried: the same snapshot; another uid or source: ALREADY_EXISTS.
  EXPECT_TRUE(Snapshot(*stub_, "demo/pvc-1", kUid, "snap-1", kSnapUid).ok());
  EXPECT_EQ(Snapshot(*stub_, "demo/pvc-1", kUid, "snap-1", kOtherUid).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  // The source must carry the uid named; a missing source is NOT_FOUND.
  EXPECT_EQ(Snapshot(*stub_, "demo/pvc-1", kOtherUid, "snap-2", kSnapUid).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Snapshot(*stub_, "demo/nope", kUid, "snap-2", kSnapUid).error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_EQ(Snapshots(*stub_).size(), 1u);
  EXPECT_EQ(Snapshots(*stub_, "demo").size(), 1u);

  auto restore = CreateRequest("pvc-2", kOtherUid);
  restore.set_size_bytes(128LL << 20);
  restore.mutable_source()->set_agent_snapshot_id("demo/snap-1");
  restore.mutable_source()->set_source_uid(kSnapUid);
  v1::CreateVolumeResponse made;
  s = Send(restore, &made);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(made.volume().size_bytes(), 128LL << 20);
  EXPECT_EQ(made.volume().origin(), "snapshot demo/snap-1");
  EXPECT_TRUE(Send(restore).ok()) << "a retry returns the volume";
  // The same name from another source: ALREADY_EXISTS.
  auto other = restore;
  other.mutable_source()->set_agent_volume_id("demo/pvc-1");
  other.mutable_source()->set_source_uid(kUid);
  EXPECT_EQ(Send(other).error_code(), grpc::StatusCode::ALREADY_EXISTS);

  // A clone of a volume; its source's uid is checked first.
  auto clone = CreateRequest("pvc-3", kOtherUid);
  clone.mutable_source()->set_agent_volume_id("demo/pvc-1");
  clone.mutable_source()->set_source_uid(kOtherUid);
  EXPECT_EQ(Send(clone).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  clone.mutable_source()->set_source_uid(kUid);
  s = Send(clone, &made);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(made.volume().origin(), "volume demo/pvc-1");

  // Deleted: gone from the listing at once; deleting again succeeds; the
  // restored volume stays.
  EXPECT_EQ(DeleteSnap(*stub_, "demo/snap-1", kOtherUid).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(DeleteSnap(*stub_, "demo/snap-1", kSnapUid).ok());
  EXPECT_TRUE(Snapshots(*stub_).empty());
  EXPECT_TRUE(DeleteSnap(*stub_, "demo/snap-1", kSnapUid).ok());
  restore.mutable_source()->set_agent_snapshot_id("demo/snap-1");
  auto again = CreateRequest("pvc-4", kOtherUid);
  *again.mutable_source() = restore.source();
  EXPECT_EQ(Send(again).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx;
  v1::ListVolumesResponse vols;
  ASSERT_TRUE(stub_->ListVolumes(&ctx, v1::ListVolumesRequest(), &vols).ok());
  EXPECT_EQ(vols.volumes_size(), 3);
}

TEST_F(AgentGrpcTest, BadSnapshotRequestsAreRefusedByField) {
  ASSERT_TRUE(Create("pvc-1").ok());
  struct Case {
    std::string source, source_uid, name, uid, field;
  };
  for (const Case& c : std::vector<Case>{
           {"pvc-1", kUid, "s", kSnapUid, "sourceVolumeId"},
           {"demo/pvc-1", "x", "s", kSnapUid, "sourceVolumeUid"},
           {"demo/pvc-1", kUid, "../s", kSnapUid, "name"},
           {"demo/pvc-1", kUid, "s", "", "snapshotUid"},
       }) {
    auto s = Snapshot(*stub_, c.source, c.source_uid, c.name, c.uid);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_NE(s.error_message().find(c.field), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(DeleteSnap(*stub_, "snap-1", kSnapUid).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // A source in another pool, both or neither source kinds, a bad source uid.
  auto req = CreateRequest("pvc-2");
  req.mutable_source()->set_agent_snapshot_id("elsewhere/snap-1");
  req.mutable_source()->set_source_uid(kSnapUid);
  auto s = Send(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("own pool"), std::string::npos) << s.error_message();
  req.mutable_source()->set_agent_snapshot_id("");
  EXPECT_EQ(Send(req).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req.mutable_source()->set_agent_volume_id("demo/pvc-1");
  req.mutable_source()->set_source_uid("nope");
  s = Send(req);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("source.sourceUid"), std::string::npos) << s.error_message();
  grpc::ClientContext ctx;
  v1::ListSnapshotsRequest list;
  list.set_pool("nope");
  v1::ListSnapshotsResponse resp;
  EXPECT_EQ(stub_->ListSnapshots(&ctx, list, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace pillar::testing
