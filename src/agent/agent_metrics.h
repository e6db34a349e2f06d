// The agent's Prometheus families (issue 25) and the decorators that count
// what it does to the kernel: configfs changes (MeteredFs) and the programs
// it runs (MeteredExec), each by kind and result, never by volume.
#pragma once

#include <string>

#include "common/exec.h"
#include "common/fs.h"
#include "common/metrics.h"

namespace pillar::agent {

class AgentCore;

struct AgentMetrics {
  static AgentMetrics& Get();

  prometheus::Family<prometheus::Gauge>& exports;              // {protocol}
  prometheus::Family<prometheus::Counter>& target_operations;  // {kind, result}
  prometheus::Family<prometheus::Gauge>& pool_size;            // {pool}
  prometheus::Family<prometheus::Gauge>& pool_available;       // {pool}
  prometheus::Family<prometheus::Gauge>& pool_provisioned;     // {pool}
  prometheus::Counter& fencing_refusals;
  prometheus::Family<prometheus::Gauge>& boot_epoch;        // {epoch}
  prometheus::Family<prometheus::Histogram>& rpc_duration;  // {method, grpc_status_code}

  void Operation(const std::string& kind, bool ok) {
    target_operations.Add({{"kind", kind}, {"result", ok ? "ok" : "error"}}).Increment();
  }
};

// Reads the exports and the pools' capacity on every scrape.
void RefreshOnScrape(AgentCore& core);

// An Fs whose changes (mkdir, rmdir, write, symlink, unlink) count as
// target operations "configfs_<op>"; reads pass through uncounted.
class MeteredFs : public Fs {
 public:
  explicit MeteredFs(Fs& inner) : inner_(inner) {}
  StatusOr<std::string> ReadFile(const std::string& path) override;
  Status WriteFile(const std::string& path, const std::string& content) override;
  Status WriteFileAtomic(const std::string& path, const std::string& content) override;
  Status MakeDir(const std::string& path) override;
  Status MakeDirs(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Status Unlink(const std::string& path) override;
  Status Symlink(const std::string& target, const std::string& link) override;
  StatusOr<std::string> ReadLink(const std::string& path) override;
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) override;
  bool Exists(const std::string& path) override;
  bool IsDir(const std::string& path) override;
  Status CreateSparseFile(const std::string& path, int64_t size_bytes) override;
  Status ResizeFile(const std::string& path, int64_t size_bytes) override;
  StatusOr<int64_t> FileSize(const std::string& path) override;
  StatusOr<FsCapacity> StatVfs(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  Status Chmod(const std::string& path, mode_t mode) override;
  StatusOr<mode_t> Mode(const std::string& path) override;
  Status Chown(const std::string& path, uid_t uid, gid_t gid) override;
  Status CopyFile(const std::string& from, const std::string& to) override;
  Status CopyTree(const std::string& from, const std::string& to) override;
  Status Rename(const std::string& from, const std::string& to) override;
  StatusOr<int64_t> AllocatedBytes(const std::string& path) override;

 private:
  Fs& inner_;
};

// An Exec whose runs count as target operations "exec_<program>" (the
// basename of argv[0]: exportfs, losetup, zfs, lvcreate, ...); a run that
// cannot start, times out or exits non-zero is an error.
class MeteredExec : public Exec {
 public:
  explicit MeteredExec(Exec& inner) : inner_(inner) {}
  StatusOr<ExecResult> Run(const Command& cmd) override;
  StatusOr<PipeResult> RunPipe(const Command& from, const Command& to) override;

 private:
  Exec& inner_;
};

}  // namespace pillar::agent
