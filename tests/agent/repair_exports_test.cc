// AgentCore::RepairExports: what this agent applied comes back after the
// kernel lost it, with the fence it was applied with; what the controller
// withdrew since, or fenced with a newer generation, never does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "agent/agent_core.h"
#include "agent/backends/file_backend.h"
#include "agent/fencing/fencing_marks.h"
#include "common/clock.h"
#include "common/fake_exec.h"
#include "common/fs.h"
#include "common/temp_dir.h"

namespace pillar::agent {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;

constexpr const char* kUid = "7f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";

// knfsd's table as a map: "wiped" by clearing it.
class TableExporter : public Exporter {
 public:
  Protocol protocol() const override { return Protocol::kNfs; }
  Status Apply(const KernelExport& want, std::vector<std::string>* changes) override {
    ActualExport& a = table[want.agent_volume_id];
    if (a.enabled && a.allowed_hosts == want.allowed_hosts && a.params == want.params) {
      return Status::Ok();
    }
    a = {want.agent_volume_id,
         want.target_id,
         want.backing,
         want.params,
         want.allowed_hosts,
         true,
         {}};
    changes->push_back("exported " + want.agent_volume_id);
    return Status::Ok();
  }
  StatusOr<std::optional<ActualExport>> Get(const std::string& id) override {
    auto it = table.find(id);
    if (it == table.end()) return std::optional<ActualExport>();
    return std::optional<ActualExport>(it->second);
  }
  StatusOr<std::vector<ActualExport>> List() override {
    std::vector<ActualExport> out;
    for (auto& [id, a] : table) out.push_back(a);
    return out;
  }
  Status Remove(const std::string& id, std::vector<std::string>* changes) override {
    if (table.erase(id) > 0) changes->push_back("unexported " + id);
    return Status::Ok();
  }
  std::string StateToken() override { return "nfsd"; }
  // Records each batch's size, then applies one after the other.
  void ApplyMany(std::vector<ApplyItem>& items) override {
    batches.push_back(items.size());
    Exporter::ApplyMany(items);
  }

  std::map<std::string, ActualExport> table;
  std::vector<size_t> batches;
};

class RepairExportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs_.MakeDirs(tmp_.Sub("pool")).ok());
    ASSERT_TRUE(fs_.MakeDirs(tmp_.Sub("marks")).ok());
    core_.AddPool(std::make_unique<FileBackend>("p", tmp_.Sub("pool"), exec_, fs_));
    auto exporter = std::make_unique<TableExporter>();
    table_ = exporter.get();
    core_.AddExporter(std::move(exporter));
    CreateVolumeRequest create;
    create.pool = "p";
    create.name = "v1";
    create.size_bytes = 1 << 20;
    create.volume_uid = kUid;
    ASSERT_TRUE(core_.CreateVolume(create).ok());
  }

  static ApplyExportRequest Request(const std::string& id, const std::string& uid,
                                    int64_t generation, std::vector<std::string> hosts) {
    ExportParams params;
    params.bind_address = "10.0.0.5";
    params.port = 2049;
    return {id, Protocol::kNfs, params, {uid, generation}, std::move(hosts), {}};
  }
  Status Apply(int64_t generation, std::vector<std::string> hosts) {
    return core_.ApplyExport(Request("p/v1", kUid, generation, std::move(hosts)), nullptr).status();
  }
  // Another volume of the pool, with its own lifecycle uid.
  void Create(const std::string& name, const std::string& uid) {
    CreateVolumeRequest create;
    create.pool = "p";
    create.name = name;
    create.size_bytes = 1 << 20;
    create.volume_uid = uid;
    ASSERT_TRUE(core_.CreateVolume(create).ok());
  }

  TempDir tmp_;
  PosixFs fs_;
  FakeExec exec_;
  SystemClock clock_;
  FencingMarks marks_{fs_, clock_, tmp_.Sub("marks")};
  AgentCore core_{
      AgentCoreOptions{"node-a", nullptr, kDefaultNqnPrefix, kDefaultIqnPrefix, nullptr}, marks_};
  TableExporter* table_ = nullptr;
};

TEST_F(RepairExportsTest, AWipedExportComesBackAsLastApplied) {
  ASSERT_EQ(Apply(1, {"10.0.0.1"}).ToString(), "OK");
  ASSERT_TRUE(Apply(2, {"10.0.0.1", "10.0.0.2"}).ok());
  EXPECT_EQ(core_.RepairExports(Protocol::kNfs), 0) << "nothing lost, nothing changed";
  table_->table.clear();  // exportfs -ua
  EXPECT_EQ(core_.RepairExports(Protocol::kNfs), 1);
  ASSERT_EQ(table_->table.count("p/v1"), 1U);
  EXPECT_EQ(table_->table["p/v1"].allowed_hosts, (std::set<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(core_.RepairExports(Protocol::kIscsi), 0) << "another protocol's repair touches none";
}

TEST_F(RepairExportsTest, AWithdrawnExportNeverComesBack) {
  ASSERT_TRUE(Apply(3, {"10.0.0.1"}).ok());
  // The controller's unexport, at the same generation (a DeleteVolume).
  ASSERT_TRUE(core_.UnexportVolume("p/v1", Protocol::kNfs, {kUid, 3}, nullptr).ok());
  EXPECT_EQ(core_.RepairExports(Protocol::kNfs), 0);
  EXPECT_TRUE(table_->table.empty());
}

TEST_F(RepairExportsTest, AFencedGenerationIsNeverReapplied) {
  ASSERT_TRUE(Apply(4, {"10.0.0.1"}).ok());
  // A newer writer's mark landed (its apply then failed, so the memory still
  // holds generation 4): the old ACL must not come back.
  ASSERT_TRUE(marks_.Advance("p/v1", kUid, 5).ok());
  table_->table.clear();
  EXPECT_EQ(core_.RepairExports(Protocol::kNfs), 0);
  EXPECT_TRUE(table_->table.empty());
}

// The fence is checked before anything else: a stale writer learns nothing
// of the volume (not even that its storage is gone) and changes nothing.
TEST_F(RepairExportsTest, AStaleWriterLearnsNothingOfTheVolume) {
  ASSERT_TRUE(marks_.Advance("p/gone", kUid, 5).ok());
  ExportParams params;
  params.bind_address = "10.0.0.5";
  params.port = 2049;
  auto stale =
      core_.ApplyExport({"p/gone", Protocol::kNfs, params, {kUid, 4}, {"10.0.0.1"}, {}}, nullptr);
  EXPECT_EQ(stale.status().code(), Code::kAborted) << stale.status().ToString();
  EXPECT_TRUE(table_->table.empty());
}

}  // namespace
// Issue 26: what a wipe lost comes back in one batch (for NFS one exportfs
// run for all of it), each volume still fenced on its own.
TEST_F(RepairExportsTest, EveryLostExportIsRepairedInOneBatchEachFencedOnItsOwn) {
  const std::string uid2 = "7f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a52";
  const std::string uid3 = "7f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a53";
  Create("v2", uid2);
  Create("v3", uid3);
  ASSERT_TRUE(Apply(1, {"10.0.0.1"}).ok());
  ASSERT_TRUE(core_.ApplyExport(Request("p/v2", uid2, 1, {"10.0.0.2"}), nullptr).ok());
  ASSERT_TRUE(core_.ApplyExport(Request("p/v3", uid3, 1, {"10.0.0.3"}), nullptr).ok());
  ASSERT_TRUE(marks_.Advance("p/v2", uid2, 2).ok());  // v2's generation 1 is fenced now
  table_->table.clear();
  table_->batches.clear();
  EXPECT_EQ(core_.RepairExports(Protocol::kNfs), 2);
  EXPECT_EQ(table_->batches, std::vector<size_t>{2}) << "v1 and v3 in one batch; v2 refused";
  EXPECT_EQ(table_->table.count("p/v1"), 1U);
  EXPECT_EQ(table_->table.count("p/v2"), 0U);
  EXPECT_EQ(table_->table.count("p/v3"), 1U);
}

// ApplyExports hands each exporter its volumes at once and answers each item
// on its own: a volume named twice is refused the second time, a stale
// writer is refused alone.
TEST_F(RepairExportsTest, ApplyExportsIsOneBatchPerExporterAndRefusesAVolumeNamedTwice) {
  const std::string uid2 = "7f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a52";
  Create("v2", uid2);
  ASSERT_TRUE(marks_.Advance("p/v2", uid2, 9).ok());
  auto out = core_.ApplyExports({Request("p/v1", kUid, 1, {"10.0.0.1"}),
                                 Request("p/v2", uid2, 3, {"10.0.0.2"}),
                                 Request("p/v1", kUid, 1, {"10.0.0.9"})});
  ASSERT_EQ(out.size(), 3U);
  EXPECT_TRUE(out[0].status.ok()) << out[0].status.ToString();
  ASSERT_TRUE(out[0].report.has_value());
  EXPECT_EQ(out[0].report->actual.allowed_hosts, std::set<std::string>{"10.0.0.1"});
  EXPECT_EQ(out[1].status.code(), Code::kAborted) << out[1].status.ToString();
  EXPECT_EQ(out[2].status.code(), Code::kInvalidArgument);
  EXPECT_THAT(out[2].status.message(), ::testing::HasSubstr("more than once"));
  EXPECT_EQ(table_->batches, std::vector<size_t>{1}) << "only v1 reached the exporter";
  EXPECT_EQ(table_->table.count("p/v2"), 0U);
}

}  // namespace pillar::agent
