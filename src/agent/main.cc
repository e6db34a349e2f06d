// pillar-agent: the storage-node agent. Serves agent.proto over mutual TLS
// (plaintext only with --insecure, for local demos) on top of the node's pools
// and kernel targets.
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <csignal>
#include <memory>
#include <thread>

#include "agent/agent_core.h"
#include "agent/agent_service.h"
#include "agent/backends/file_backend.h"
#include "agent/backends/lvm_backend.h"
#include "agent/backends/zfs_backend.h"
#include "agent/exporters/configfs_sim.h"
#include "agent/exporters/lio_exporter.h"
#include "agent/exporters/nfs_exporter.h"
#include "agent/exporters/nvmet_exporter.h"
#include "agent/fencing/fencing_marks.h"
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// "--pool NAME=KIND[:ARG]": file:<dir>, lvm, lvm-thin:<thinpool>, zfs.
StatusOr<std::unique_ptr<Backend>> MakePool(const std::string& spec, Exec& exec, Fs& fs) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos)
    return InvalidArgument("--pool \"" + spec + "\": want NAME=KIND[:ARG]");
  std::string name = spec.substr(0, eq);
  std::string rest = spec.substr(eq + 1);
  size_t colon = rest.find(':');
  std::string kind = rest.substr(0, colon);
  std::string arg = colon == std::string::npos ? "" : rest.substr(colon + 1);
  RETURN_IF_ERROR(validate::PoolName("--pool name", name));
  if (kind == "file") {
    if (arg.empty() || arg[0] != '/')
      return InvalidArgument("--pool " + name + ": file needs an absolute directory");
    RETURN_IF_ERROR(fs.MakeDirs(arg));
    return std::unique_ptr<Backend>(std::make_unique<FileBackend>(name, arg, exec, fs));
  }
  if (kind == "lvm") return std::unique_ptr<Backend>(std::make_unique<LvmBackend>(name, "", exec));
  if (kind == "lvm-thin") {
    RETURN_IF_ERROR(validate::VolumeName("--pool thin pool", arg));
    return std::unique_ptr<Backend>(std::make_unique<LvmBackend>(name, arg, exec));
  }
  if (kind == "zfs") return std::unique_ptr<Backend>(std::make_unique<ZfsBackend>(name, exec, fs));
  return InvalidArgument("--pool " + name + ": unknown kind \"" + kind +
                         "\" (want file, lvm, lvm-thin or zfs)");
}

int Run(int argc, char** argv) {
  CLI::App app{"pillar-agent: storage-node agent"};
  std::string listen = "0.0.0.0:9500";
  TlsFiles tls;
  bool insecure = false;
  std::string node_name = Hostname();
  std::vector<std::string> pools;
  std::string configfs_root = "/sys/kernel/config";
  bool simulate_configfs = false;
  std::string state_dir = "/var/lib/pillar-csi/agent";
  std::string exports_dir = "/etc/exports.d";
  std::string nfsd_proc = "/proc/fs/nfsd";
  std::vector<std::string> protocols = {"nvmeof-tcp", "iscsi", "nfs"};
  bool no_load_modules = false;
  int epoch_check_seconds = 5;
  std::string log_level = "info";
  std::string ready_file;
  AgentCoreOptions core_opts;

  app.add_option("--listen", listen, "host:port or unix:/path to serve on");
  app.add_option("--tls-cert", tls.cert, "server certificate (PEM)");
  app.add_option("--tls-key", tls.key, "server private key (PEM)");
  app.add_option("--tls-ca", tls.ca, "CA bundle client certificates must chain to");
  app.add_flag("--insecure", insecure,
               "serve plaintext without client authentication (demos only)");
  app.add_option("--node-name", node_name, "name reported to the controller");
  app.add_option("--pool", pools,
                 "NAME=file:<dir> | NAME=lvm | NAME=lvm-thin:<thinpool> | NAME=zfs")
      ->required();
  app.add_option("--configfs-root", configfs_root, "where configfs is mounted");
  app.add_flag("--simulate-configfs", simulate_configfs,
               "treat --configfs-root as a plain directory shaped like configfs (demos and tests; "
               "no kernel target is configured)");
  app.add_option("--state-dir", state_dir,
                 "agent state; fencing marks live in <state-dir>/generations");
  app.add_option("--exports-dir", exports_dir, "exports.d directory for knfsd");
  app.add_option("--nfsd-proc", nfsd_proc, "nfsd's proc directory");
  app.add_option("--protocols", protocols, "protocols to serve")->delimiter(',');
  app.add_flag("--no-load-modules", no_load_modules, "never modprobe target modules");
  app.add_option("--epoch-check-interval", epoch_check_seconds,
                 "seconds between target-state checks");
  app.add_option("--nqn-prefix", core_opts.nqn_prefix, "prefix of subsystem NQNs");
  app.add_option("--iqn-prefix", core_opts.iqn_prefix, "prefix of target IQNs");
  app.add_option("--log-level", log_level, "debug, info, warn, error");
  app.add_option("--ready-file", ready_file, "write the bound port here once serving");
  CLI11_PARSE(app, argc, argv);

  log::Init("agent", log_level);
  TerminationSignals signals;  // before any thread starts
  auto fail = [](const Status& s) {
    log::Error("agent cannot start", {{"error", s.ToString()}});
    return 2;
  };
  if (Status s = validate::Nqn("--nqn-prefix", core_opts.nqn_prefix + ":x"); !s.ok())
    return fail(s);
  if (Status s = validate::Iqn("--iqn-prefix", core_opts.iqn_prefix + ":x"); !s.ok())
    return fail(s);

  SystemExec exec;
  PosixFs fs;
  std::unique_ptr<ConfigfsSim> sim;
  Fs* configfs = &fs;
  if (simulate_configfs) {
    if (Status s = fs.MakeDirs(configfs_root); !s.ok()) return fail(s);
    sim = std::make_unique<ConfigfsSim>(configfs_root);
    configfs = sim.get();
    log::Warn(
        "configfs is SIMULATED: exports are written to a plain directory, no kernel target "
        "serves them",
        {{"root", configfs_root}});
  }
  if (Status s = fs.MakeDirs(state_dir + "/generations"); !s.ok()) return fail(s);
  SystemClock clock;
  FencingMarks marks(fs, clock, state_dir + "/generations");

  core_opts.node_name = node_name;
  if (sim) {
    core_opts.load_target = [&sim](Protocol p) {
      if (p == Protocol::kNvmeofTcp) return sim->LoadNvmet();
      if (p == Protocol::kIscsi) return sim->LoadLio();
      return Unavailable("nfsd cannot be simulated");
    };
  } else if (!no_load_modules) {
    core_opts.load_target = [&exec](Protocol p) {
      std::vector<std::string> modprobe;
      if (p == Protocol::kNvmeofTcp) modprobe = {"modprobe", "-a", "nvmet", "nvmet-tcp"};
      if (p == Protocol::kIscsi) {
        modprobe = {"modprobe", "-a", "target_core_mod", "target_core_iblock", "iscsi_target_mod"};
      }
      if (modprobe.empty()) return Unavailable("nfsd is not running");
      return exec.RunOk({modprobe, "", std::chrono::seconds(30)});
    };
  }
  AgentCore core(core_opts, marks);
  if (sim) {
    // A simulated node boots with its targets loaded, as modules-load.d would.
    if (Status s = sim->LoadNvmet(); !s.ok()) return fail(s);
    if (Status s = sim->LoadLio(); !s.ok()) return fail(s);
  }
  for (const auto& spec : pools) {
    auto pool = MakePool(spec, exec, fs);
    if (!pool.ok()) return fail(pool.status());
    core.AddPool(std::move(pool).value());
  }
  for (const auto& p : protocols) {
    if (p == "nvmeof-tcp") {
      core.AddExporter(
          std::make_unique<NvmetExporter>(*configfs, configfs_root, core_opts.nqn_prefix));
    } else if (p == "iscsi") {
      core.AddExporter(
          std::make_unique<LioExporter>(*configfs, configfs_root, core_opts.iqn_prefix));
    } else if (p == "nfs") {
      core.AddExporter(std::make_unique<NfsExporter>(exec, fs, exports_dir, nfsd_proc));
    } else {
      return fail(InvalidArgument("--protocols: unknown protocol \"" + p + "\""));
    }
  }
  core.CheckTargetState();

  std::shared_ptr<grpc::ServerCredentials> creds;
  if (insecure) {
    log::Warn("serving WITHOUT TLS (--insecure)", {{"listen", listen}});
    creds = grpc::InsecureServerCredentials();
  } else {
    auto c = MutualTlsServerCredentials(tls);
    if (!c.ok()) return fail(c.status());
    creds = *c;
  }
  AgentService service(core);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen, creds, &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return fail(Unavailable("cannot listen on " + listen));
  log::Info("agent serving", {{"listen", listen},
                              {"port", bound_port},
                              {"node", node_name},
                              {"bootEpoch", core.BootEpoch()}});

  if (!ready_file.empty()) {
    if (Status s = fs.WriteFileAtomic(ready_file, std::to_string(bound_port) + "\n"); !s.ok()) {
      return fail(s);
    }
  }

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop = false;
  std::thread monitor([&] {
    std::unique_lock<std::mutex> lock(stop_mu);
    while (!stop) {
      stop_cv.wait_for(lock, std::chrono::seconds(std::max(1, epoch_check_seconds)));
      if (!stop) core.CheckTargetState();
    }
  });
  int sig = signals.Wait();
  log::Info("agent stopping", {{"signal", sig}});
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    stop = true;
  }
  stop_cv.notify_all();
  monitor.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  log::Info("agent stopped");
  return 0;
}

}  // namespace
}  // namespace pillar::agent

int main(int argc, char** argv) { return pillar::agent::Run(argc, argv); }
