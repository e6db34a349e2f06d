// AgentCore::RepairExports: what this agent applied comes back after the
// kernel lost it, with the fence it was applied with; what the controller
// withdrew since, or fenced with a newer generation, never does.
#include <gtest/gtest.h>

#include <map>

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

  std::map<std::string, ActualExport> table;
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

  Status Apply(int64_t generation, std::vector<std::string> hosts) {
    ExportParams params;
    params.bind_address = "10.0.0.5";
    params.port = 2049;
    return core_
        .ApplyExport({"p/v1", Protocol::kNfs, params, {kUid, generation}, hosts, {}}, nullptr)
        .status();
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
}  // namespace pillar::agent
