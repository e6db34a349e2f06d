// An in-process agent for benchmarks: the real AgentCore, FileBackend,
// NvmetExporter on the configfs simulator and FencingMarks, all on a
// temporary directory, behind the real AgentService and an AgentClient that
// calls it without a socket. Only losetup is stood in for (LoopTableExec),
// because a benchmark of 1,000 exports must not attach 1,000 loop devices;
// the figures are the agent's own cost, not the kernel's.
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

// Counts the processes an agent starts (through `inner`).
class CountingExec : public Exec {
 public:
  explicit CountingExec(Exec& inner) : inner_(inner) {}
  StatusOr<ExecResult> Run(const Command& cmd) override {
    ++runs_;
    return inner_.Run(cmd);
  }
  int64_t runs() const { return runs_; }
  void ResetRuns() { runs_ = 0; }

 private:
  Exec& inner_;
  std::atomic<int64_t> runs_{0};
};

// Every file system call of the agent (configfs, the pool, the fencing
// marks) goes through `timed`, so a benchmark can tell its cost apart.
struct BenchAgent {
  explicit BenchAgent(const std::string& dir, const std::string& name = "storage-1")
      : root(dir), sim(dir + "/configfs"), timed(sim), marks(timed, clock, dir + "/generations") {
    std::filesystem::create_directories(dir + "/configfs");
    std::filesystem::create_directories(dir + "/generations");
    std::filesystem::create_directories(dir + "/pool");
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
    core->CheckTargetState();
    service = std::make_unique<agent::AgentService>(*core);
  }

  std::string root;
  PosixFs fs;
  SystemClock clock;
  LoopTableExec loops;
  CountingExec exec{loops};
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

 private:
  template <typename Resp, typename Req, typename Method>
  StatusOr<Resp> Call(Method method, const Req& req) {
    calls++;
    grpc::ServerContext ctx;
    Resp resp;
    grpc::Status s = ((*agent_.service).*method)(&ctx, &req, &resp);
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
