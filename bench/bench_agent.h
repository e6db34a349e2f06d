// An in-process agent for benchmarks: the real AgentCore, FileBackend,
// NvmetExporter and LioExporter on the configfs simulator, NfsExporter on an
// exportfs stand-in, and FencingMarks, all on a
// temporary directory, behind the real AgentService and an AgentClient that
// calls it without a socket. Only the tools are stood in for (losetup by
// LoopTableExec, exportfs by ExportfsTableExec): a benchmark of 1,000 exports
// must not attach 1,000 loop devices, and this machine has no knfsd; the
// figures are the agent's own cost, not the kernel's or the tools'.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent_core.h"
#include "agent/agent_service.h"
#include "agent/backends/file_backend.h"
#include "agent/exporters/lio_exporter.h"
#include "agent/exporters/nfs_exporter.h"
#include "agent/exporters/nvmet_exporter.h"
#include "agent/fencing/fencing_marks.h"
#include "common/clock.h"
#include "common/exec.h"
#include "common/fs.h"
#include "common/grpc_status.h"
#include "controller/agent_api.h"
#include "controller/agent_proto.h"
#include "testing/configfs_sim.h"
#include "timed_fs.h"

namespace pillar::bench {

// This process's resident memory (VmRSS) in MiB. The benches keep simulated
// target state in /dev/shm files, which it does not count.
inline double RssMiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

namespace v1 = pillar::agent::v1;

// losetup on a table: --find "attaches" the next device and lays out what
// the kernel would in sysfs (<sysfs>/block/loopN/loop/backing_file), which
// FileBackend reads; --detach removes it again.
class LoopTableExec : public Exec {
 public:
  // Lays out an empty sysfs under `root` for this table and returns `root`.
  std::string ServeSysfs(const std::string& root) {
    std::lock_guard<std::mutex> lock(mu_);
    sysfs_ = root;
    std::filesystem::create_directories(root + "/block");
    return root;
  }

  StatusOr<ExecResult> Run(const Command& cmd) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& a = cmd.argv;
    if (a.size() >= 2 && a[0] == "losetup" && a[1] == "--list") {
      const std::string& image = a.back();
      auto it = devices_.find(image);
      if (it == devices_.end()) return ExecResult{0, "", ""};
      return ExecResult{0,
                        "{\"loopdevices\": [{\"name\": \"" + it->second + "\", \"back-file\": \"" +
                            image + "\"}]}\n",
                        ""};
    }
    if (a.size() >= 2 && a[0] == "losetup" && a[1] == "--find") {
      const std::string name = "loop" + std::to_string(next_++);
      const std::string& image = a.back();
      devices_[image] = "/dev/" + name;
      if (!sysfs_.empty()) {
        const std::string dir = sysfs_ + "/block/" + name + "/loop";
        std::filesystem::create_directories(dir);
        // The kernel shows the path with every symlink resolved.
        std::ofstream(dir + "/backing_file")
            << std::filesystem::weakly_canonical(image).string() << "\n";
      }
      return ExecResult{0, "/dev/" + name + "\n", ""};
    }
    if (a.size() >= 3 && a[0] == "losetup" && a[1] == "--detach") {
      for (auto it = devices_.begin(); it != devices_.end(); ++it) {
        if (it->second != a[2]) continue;
        if (!sysfs_.empty()) {
          std::filesystem::remove_all(sysfs_ + "/block/" + it->second.substr(5));
        }
        devices_.erase(it);
        break;
      }
      return ExecResult{0, "", ""};
    }
    if (a.size() >= 2 && a[0] == "losetup") return ExecResult{0, "", ""};
    return NotFound("bench exec: " + cmd.ToString());
  }

 private:
  std::mutex mu_;
  std::string sysfs_;
  std::map<std::string, std::string> devices_;  // image -> /dev/loopN
  int next_ = 0;
};

// nfs-utils' exportfs on a table kept in memory and written to `etab` on
// every change (a new file renamed into place, as nfs-utils does): -v prints
// it in the real layout, -o sets one client, -u removes its arguments, -a
// adds every line of the files in `exports_dir` and keeps the rest, -ua
// empties it. Everything else goes to `inner` (losetup).
class ExportfsTableExec : public Exec {
 public:
  ExportfsTableExec(Exec& inner, std::string exports_dir, std::string etab)
      : inner_(inner), exports_dir_(std::move(exports_dir)), etab_(std::move(etab)) {
    // Made before the agent's own directories (a member of BenchAgent).
    std::filesystem::create_directories(std::filesystem::path(etab_).parent_path());
    Save();
  }

  StatusOr<ExecResult> Run(const Command& cmd) override {
    const auto& a = cmd.argv;
    if (a.empty() || a[0] != "exportfs") return inner_.Run(cmd);
    std::lock_guard<std::mutex> lock(mu_);
    if (a.size() == 2 && a[1] == "-v") return ExecResult{0, Print(), ""};
    if (a.size() == 4 && a[1] == "-o") {
      size_t colon = a[3].find(':');
      table_[{a[3].substr(colon + 1), a[3].substr(0, colon)}] = Printed(a[2]);
    } else if (a.size() >= 2 && a[1] == "-u") {
      for (size_t i = 2; i < a.size(); ++i) {
        size_t colon = a[i].find(':');
        table_.erase({a[i].substr(colon + 1), a[i].substr(0, colon)});
      }
    } else if (a.size() == 2 && a[1] == "-ua") {
      table_.clear();
    } else if (a.size() == 2 && a[1] == "-a") {
      std::error_code ec;
      for (const auto& f : std::filesystem::directory_iterator(exports_dir_, ec)) {
        std::ifstream in(f.path());
        std::string line;
        while (std::getline(in, line)) {
          if (line.empty() || line[0] == '#') continue;
          size_t sp = line.find(' ');
          std::string path = line.substr(0, sp);
          while (sp != std::string::npos) {
            size_t next = line.find(' ', sp + 1);
            std::string spec =
                line.substr(sp + 1, next == std::string::npos ? next : next - sp - 1);
            size_t paren = spec.find('(');
            table_[{path, spec.substr(0, paren)}] =
                Printed(spec.substr(paren + 1, spec.size() - paren - 2));
            sp = next;
          }
        }
      }
    } else {
      return NotFound("bench exec: " + cmd.ToString());
    }
    Save();
    return ExecResult{0, "", ""};
  }

 private:
  // pillar's "rw,sync,<check>,<squash>,fsid=..." as exportfs -v shows it.
  static std::string Printed(const std::string& given) {
    bool check = given.find("no_subtree_check") == std::string::npos;
    bool squash = given.find("no_root_squash") == std::string::npos;
    return std::string("sync,wdelay,hide,") + (check ? "" : "no_subtree_check,") +
           given.substr(given.find("fsid=")) + ",sec=sys,rw," +
           (squash ? "root_squash" : "no_root_squash") + ",no_all_squash";
  }
  std::string Print() const {
    std::string out;
    for (const auto& [key, opts] : table_) {
      const auto& [path, client] = key;
      std::string host = client == "*" ? "<world>" : client;
      out += path.size() > 14 ? path + "\n\t\t" + host
                              : path + std::string(14 - path.size(), ' ') + "\t" + host;
      out += "(" + opts + ")\n";
    }
    return out;
  }
  void Save() {
    {
      std::ofstream tmp(etab_ + ".tmp");
      for (const auto& [key, opts] : table_) tmp << key.first << "\t" << key.second << "\n";
    }
    std::filesystem::rename(etab_ + ".tmp", etab_);
  }

  Exec& inner_;
  std::string exports_dir_;
  std::string etab_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::string> table_;  // (path, client) -> opts
};

// Counts the processes an agent starts (through `inner`) and the CPU time
// spent in them, which a stand-in runs in this process: a benchmark takes it
// out of the agent's own figure.
class CountingExec : public Exec {
 public:
  explicit CountingExec(Exec& inner) : inner_(inner) {}
  StatusOr<ExecResult> Run(const Command& cmd) override {
    ++runs_;
    int64_t start = TimedFs::ThreadNanos();
    auto r = inner_.Run(cmd);
    nanos_ += TimedFs::ThreadNanos() - start;
    return r;
  }
  int64_t runs() const { return runs_; }
  int64_t nanos() const { return nanos_; }
  void ResetRuns() {
    runs_ = 0;
    nanos_ = 0;
  }

 private:
  Exec& inner_;
  std::atomic<int64_t> runs_{0};
  std::atomic<int64_t> nanos_{0};
};

// Every file system call of the agent (configfs, the pool, the fencing
// marks) goes through `timed`, so a benchmark can tell its cost apart; the
// simulator's own calls to the real file system go through `tree`, so the
// simulator's share is told apart from a plain tree's.
struct BenchAgent {
  explicit BenchAgent(const std::string& dir, const std::string& name = "storage-1")
      : root(dir),
        sim(dir + "/configfs", &tree),
        timed(sim),
        marks(timed, clock, dir + "/generations") {
    std::filesystem::create_directories(dir + "/configfs");
    std::filesystem::create_directories(dir + "/generations");
    std::filesystem::create_directories(dir + "/pool");
    std::filesystem::create_directories(dir + "/nfsd");
    std::ofstream(dir + "/nfsd/threads") << "8\n";
    (void)sim.LoadNvmet();
    (void)sim.LoadLio();
    agent::AgentCoreOptions opts;
    opts.node_name = name;
    opts.load_target = [this](Protocol p) { return sim.LoadTarget(p); };
    core = std::make_unique<agent::AgentCore>(opts, marks);
    core->AddPool(std::make_unique<agent::FileBackend>("demo", dir + "/pool", exec, timed,
                                                       loops.ServeSysfs(dir + "/sys")));
    core->AddExporter(std::make_unique<agent::NvmetExporter>(timed, dir + "/configfs"));
    core->AddExporter(std::make_unique<agent::LioExporter>(timed, dir + "/configfs"));
    core->AddExporter(std::make_unique<agent::NfsExporter>(
        exec, timed, dir + "/exports.d", dir + "/nfsd", dir + "/mountinfo", dir + "/etab"));
    core->CheckTargetState();
    service = std::make_unique<agent::AgentService>(*core);
  }

  std::string root;
  PosixFs fs;
  SystemClock clock;
  LoopTableExec loops;
  ExportfsTableExec tools{loops, root + "/exports.d", root + "/etab"};
  CountingExec exec{tools};
  // The system calls under the simulator: what the agent's file system work
  // costs on a plain directory tree (see Split in agent_bench.cc).
  TimedFs tree{fs};
  pillar::testing::ConfigfsSim sim;
  TimedFs timed;
  agent::FencingMarks marks;
  std::unique_ptr<agent::AgentCore> core;
  std::unique_ptr<agent::AgentService> service;
};

// Calls the AgentService directly, through the controller's conversions
// (agent_proto.h) as the gRPC client does, and counts calls.
class InProcessAgentClient : public controller::AgentClient {
 public:
  explicit InProcessAgentClient(BenchAgent& agent) : agent_(agent) {}

  using S = agent::AgentService;

  StatusOr<controller::agent_api::Info> GetInfo() override {
    return Answer<v1::GetInfoResponse>(&S::GetInfo, v1::GetInfoRequest());
  }
  StatusOr<controller::agent_api::Volume> CreateVolume(
      const controller::agent_api::CreateVolumeRequest& r) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<v1::CreateVolumeResponse>(&S::CreateVolume, controller::ToProto(r)));
    return controller::FromProto(resp.volume());
  }
  StatusOr<controller::agent_api::Volume> ExpandVolume(
      const controller::agent_api::ExpandVolumeRequest& r) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<v1::ExpandVolumeResponse>(&S::ExpandVolume, controller::ToProto(r)));
    return controller::FromProto(resp.volume());
  }
  Status DeleteVolume(const controller::agent_api::DeleteVolumeRequest& r) override {
    return Call<v1::DeleteVolumeResponse>(&S::DeleteVolume, controller::ToProto(r)).status();
  }
  StatusOr<std::vector<controller::agent_api::Pool>> GetCapacity(const std::string& pool) override {
    return Answer<v1::GetCapacityResponse>(&S::GetCapacity,
                                           controller::GetCapacityRequestProto(pool));
  }
  StatusOr<controller::agent_api::ApplyExportResult> ApplyExport(
      const controller::agent_api::ApplyExportRequest& r) override {
    return Answer<v1::ApplyExportResponse>(&S::ApplyExport, controller::ToProto(r));
  }
  StatusOr<std::vector<controller::agent_api::ApplyExportItem>> ApplyExports(
      const std::vector<controller::agent_api::ApplyExportRequest>& rs) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<v1::ApplyExportsResponse>(&S::ApplyExports, controller::ToProto(rs)));
    return controller::FromProto(resp, rs.size());
  }
  StatusOr<controller::agent_api::Export> GetExport(const std::string& agent_volume_id,
                                                    Protocol protocol) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<v1::GetExportResponse>(&S::GetExport, controller::GetExportRequestProto(
                                                                    agent_volume_id, protocol)));
    return controller::FromProto(resp.export_());
  }
  StatusOr<std::vector<controller::agent_api::Export>> ListExports() override {
    return Answer<v1::ListExportsResponse>(&S::ListExports, v1::ListExportsRequest());
  }
  StatusOr<std::vector<std::string>> UnexportVolume(
      const controller::agent_api::UnexportVolumeRequest& r) override {
    return Answer<v1::UnexportVolumeResponse>(&S::UnexportVolume, controller::ToProto(r));
  }
  StatusOr<controller::agent_api::Snapshot> CreateSnapshot(
      const controller::agent_api::CreateSnapshotRequest& r) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<v1::CreateSnapshotResponse>(&S::CreateSnapshot, controller::ToProto(r)));
    return controller::FromProto(resp.snapshot());
  }
  Status DeleteSnapshot(const controller::agent_api::DeleteSnapshotRequest& r) override {
    return Call<v1::DeleteSnapshotResponse>(&S::DeleteSnapshot, controller::ToProto(r)).status();
  }
  StatusOr<std::vector<controller::agent_api::Snapshot>> ListSnapshots(
      const std::string& pool) override {
    return Answer<v1::ListSnapshotsResponse>(&S::ListSnapshots,
                                             controller::ListSnapshotsRequestProto(pool));
  }

  std::atomic<int64_t> calls{0};
  // CPU time spent in the agent's service methods (the calling thread's),
  // so a benchmark can tell the controller's own share of its process.
  std::atomic<int64_t> agent_nanos{0};

 private:
  template <typename Resp, typename Req, typename Method>
  StatusOr<Resp> Call(Method method, const Req& req) {
    calls++;
    grpc::ServerContext ctx;
    Resp resp;
    int64_t start = TimedFs::ThreadNanos();
    grpc::Status s = ((*agent_.service).*method)(&ctx, &req, &resp);
    agent_nanos += TimedFs::ThreadNanos() - start;
    if (!s.ok()) return FromGrpc(s);
    return resp;
  }
  template <typename Resp, typename Req, typename Method>
  auto Answer(Method method, const Req& req)
      -> StatusOr<decltype(controller::FromProto(std::declval<Resp>()))> {
    ASSIGN_OR_RETURN(auto resp, (Call<Resp>(method, req)));
    return controller::FromProto(resp);
  }

  BenchAgent& agent_;
};

// A temporary directory, on tmpfs when /dev/shm exists (configfs is in
// memory too), removed at exit.
inline std::string BenchDir(const std::string& tag) {
  std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
  std::string tmpl = base + "/pillar-bench-" + tag + "-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  return made != nullptr ? made : "";
}

}  // namespace pillar::bench
