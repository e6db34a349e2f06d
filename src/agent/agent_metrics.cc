#include "agent/agent_metrics.h"

#include <map>

#include "agent/agent_core.h"
#include "common/protocol.h"

namespace pillar::agent {

namespace {
AgentMetrics Make() {
  auto& r = metrics::Registry();
  return AgentMetrics{
      prometheus::BuildGauge()
          .Name("pillar_agent_exports")
          .Help("Exports on this node's kernel targets by protocol, as listed at the scrape")
          .Register(r),
      prometheus::BuildCounter()
          .Name("pillar_agent_target_operations_total")
          .Help("Changes to the kernel targets (configfs_*) and programs run (exec_*), by result")
          .Register(r),
      prometheus::BuildGauge()
          .Name("pillar_agent_pool_size_bytes")
          .Help("A pool's total size")
          .Register(r),
      prometheus::BuildGauge()
          .Name("pillar_agent_pool_available_bytes")
          .Help("A pool's available bytes")
          .Register(r),
      prometheus::BuildGauge()
          .Name("pillar_agent_pool_provisioned_bytes")
          .Help("The sum of the sizes of the volumes a pool holds")
          .Register(r),
      prometheus::BuildCounter()
          .Name("pillar_agent_fencing_refusals_total")
          .Help("Calls refused because a newer generation or another volume uid holds the volume")
          .Register(r)
          .Add({}),
      prometheus::BuildGauge()
          .Name("pillar_agent_boot_epoch_info")
          .Help("1, labelled with this agent process's boot epoch")
          .Register(r),
      prometheus::BuildHistogram()
          .Name("pillar_agent_rpc_duration_seconds")
          .Help("Calls the agent answered, by method and gRPC code")
          .Register(r),
  };
}

template <typename T>
T Counted(const std::string& kind, T result) {
  AgentMetrics::Get().Operation(kind, result.ok());
  return result;
}

std::string Program(const Command& cmd) {
  if (cmd.argv.empty()) return "exec_";
  const std::string& p = cmd.argv.front();
  size_t slash = p.rfind('/');
  return "exec_" + (slash == std::string::npos ? p : p.substr(slash + 1));
}

}  // namespace

AgentMetrics& AgentMetrics::Get() {
  static AgentMetrics* m = new AgentMetrics(Make());
  return *m;
}

void RefreshOnScrape(AgentCore& core) {
  metrics::OnScrape([&core] {
    AgentMetrics& m = AgentMetrics::Get();
    if (auto list = core.ListExports(); list.ok()) {
      std::map<std::string, int> by_protocol;
      for (Protocol p : core.Info().protocols) by_protocol[ProtocolName(p)] = 0;
      for (const auto& e : *list) by_protocol[ProtocolName(e.protocol)]++;
      for (const auto& [p, n] : by_protocol) m.exports.Add({{"protocol", p}}).Set(n);
    }
    if (auto pools = core.Capacity(""); pools.ok()) {
      for (const auto& p : *pools) {
        m.pool_size.Add({{"pool", p.name}}).Set(static_cast<double>(p.capacity.total_bytes));
        m.pool_available.Add({{"pool", p.name}})
            .Set(static_cast<double>(p.capacity.available_bytes));
        if (auto vols = core.ListVolumes(p.name); vols.ok()) {
          double provisioned = 0;
          for (const auto& v : *vols) provisioned += static_cast<double>(v.volume.size_bytes);
          m.pool_provisioned.Add({{"pool", p.name}}).Set(provisioned);
        }
      }
    }
  });
}

StatusOr<std::string> MeteredFs::ReadFile(const std::string& path) { return inner_.ReadFile(path); }
Status MeteredFs::WriteFile(const std::string& path, const std::string& content) {
  return Counted("configfs_write", inner_.WriteFile(path, content));
}
Status MeteredFs::WriteFileAtomic(const std::string& path, const std::string& content) {
  return Counted("configfs_write", inner_.WriteFileAtomic(path, content));
}
Status MeteredFs::MakeDir(const std::string& path) {
  return Counted("configfs_mkdir", inner_.MakeDir(path));
}
Status MeteredFs::MakeDirs(const std::string& path) {
  return Counted("configfs_mkdir", inner_.MakeDirs(path));
}
Status MeteredFs::RemoveDir(const std::string& path) {
  return Counted("configfs_rmdir", inner_.RemoveDir(path));
}
Status MeteredFs::Unlink(const std::string& path) {
  return Counted("configfs_unlink", inner_.Unlink(path));
}
Status MeteredFs::Symlink(const std::string& target, const std::string& link) {
  return Counted("configfs_symlink", inner_.Symlink(target, link));
}
StatusOr<std::string> MeteredFs::ReadLink(const std::string& path) { return inner_.ReadLink(path); }
StatusOr<std::vector<DirEntry>> MeteredFs::ListDir(const std::string& path) {
  return inner_.ListDir(path);
}
bool MeteredFs::Exists(const std::string& path) { return inner_.Exists(path); }
bool MeteredFs::IsDir(const std::string& path) { return inner_.IsDir(path); }
Status MeteredFs::CreateSparseFile(const std::string& path, int64_t size_bytes) {
  return inner_.CreateSparseFile(path, size_bytes);
}
Status MeteredFs::ResizeFile(const std::string& path, int64_t size_bytes) {
  return inner_.ResizeFile(path, size_bytes);
}
StatusOr<int64_t> MeteredFs::FileSize(const std::string& path) { return inner_.FileSize(path); }
StatusOr<FsCapacity> MeteredFs::StatVfs(const std::string& path) { return inner_.StatVfs(path); }
Status MeteredFs::RemoveTree(const std::string& path) { return inner_.RemoveTree(path); }
Status MeteredFs::Chmod(const std::string& path, mode_t mode) { return inner_.Chmod(path, mode); }
StatusOr<mode_t> MeteredFs::Mode(const std::string& path) { return inner_.Mode(path); }
Status MeteredFs::Chown(const std::string& path, uid_t uid, gid_t gid) {
  return inner_.Chown(path, uid, gid);
}
Status MeteredFs::CopyFile(const std::string& from, const std::string& to) {
  return inner_.CopyFile(from, to);
}
Status MeteredFs::CopyTree(const std::string& from, const std::string& to) {
  return inner_.CopyTree(from, to);
}
Status MeteredFs::Rename(const std::string& from, const std::string& to) {
  return inner_.Rename(from, to);
}
StatusOr<int64_t> MeteredFs::AllocatedBytes(const std::string& path) {
  return inner_.AllocatedBytes(path);
}

StatusOr<ExecResult> MeteredExec::Run(const Command& cmd) {
  auto r = inner_.Run(cmd);
  AgentMetrics::Get().Operation(Program(cmd), r.ok() && r->exit_code == 0);
  return r;
}

StatusOr<PipeResult> MeteredExec::RunPipe(const Command& from, const Command& to) {
  auto r = inner_.RunPipe(from, to);
  bool ok = r.ok() && r->from.exit_code == 0 && r->to.exit_code == 0;
  AgentMetrics::Get().Operation(Program(from), ok);
  AgentMetrics::Get().Operation(Program(to), ok);
  return r;
}

}  // namespace pillar::agent
