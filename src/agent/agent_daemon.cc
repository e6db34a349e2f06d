#include "agent/agent_daemon.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/agent_core.h"
#include "agent/agent_metrics.h"
#include "agent/agent_service.h"
#include "agent/backends/file_backend.h"
#include "agent/backends/lvm_backend.h"
#include "agent/backends/zfs_backend.h"
#include "agent/exporters/lio_exporter.h"
#include "agent/exporters/nfs_exporter.h"
#include "agent/exporters/nvmet_exporter.h"
#include "agent/fencing/fencing_marks.h"
#include "agent/file_event_watcher.h"
#include "common/clock.h"
#include "common/daemon.h"
#include "common/exec.h"
#include "common/grpc_metrics.h"
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

Status ModprobeTarget(Exec& exec, Protocol protocol) {
  std::vector<std::string> modprobe;
  switch (protocol) {
    case Protocol::kNvmeofTcp:
      modprobe = {"modprobe", "-a", "nvmet", "nvmet-tcp"};
      break;
    case Protocol::kIscsi:
      modprobe = {"modprobe", "-a", "target_core_mod", "target_core_iblock", "iscsi_target_mod"};
      break;
    case Protocol::kNfs:
      return Unavailable("nfsd is not running");
  }
  return exec.RunOk({modprobe, "", std::chrono::seconds(30)});
}

std::unique_ptr<Exporter> MakeExporter(Protocol protocol, const AgentDaemonOptions& options,
                                       Exec& exec, Fs& fs, Fs& configfs) {
  switch (protocol) {
    case Protocol::kNvmeofTcp:
      return std::make_unique<NvmetExporter>(configfs, options.configfs_root, options.nqn_prefix);
    case Protocol::kIscsi:
      return std::make_unique<LioExporter>(configfs, options.configfs_root, options.iqn_prefix);
    case Protocol::kNfs:
      return std::make_unique<NfsExporter>(exec, fs, options.exports_dir, options.nfsd_proc,
                                           "/proc/self/mountinfo", options.nfs_etab);
  }
  return nullptr;
}

// Serves until a termination signal, checking the kernel target state every
// `interval` meanwhile.
void ServeUntilSignalled(AgentCore& core, TerminationSignals& signals, int interval_seconds) {
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop = false;
  std::thread monitor([&] {
    std::unique_lock<std::mutex> lock(stop_mu);
    while (!stop) {
      stop_cv.wait_for(lock, std::chrono::seconds(std::max(1, interval_seconds)));
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
}

}  // namespace

void AddAgentFlags(CLI::App& app, AgentDaemonOptions& o) {
  app.add_option("--listen", o.listen, "host:port or unix:/path to serve on");
  app.add_option("--tls-cert", o.tls.cert, "server certificate (PEM)");
  app.add_option("--tls-key", o.tls.key, "server private key (PEM)");
  app.add_option("--tls-ca", o.tls.ca, "CA bundle client certificates must chain to");
  app.add_option("--tls-reload-interval", o.tls.reload_seconds,
                 "seconds between checks of the TLS files for a rotated certificate");
  app.add_flag("--insecure", o.insecure,
               "serve plaintext without client authentication (demos only)");
  app.add_option("--node-name", o.node_name, "name reported to the controller (default: hostname)");
  app.add_option("--pool", o.pools,
                 "NAME=file:<dir> | NAME=lvm | NAME=lvm-thin:<thinpool> | NAME=zfs")
      ->required();
  app.add_option("--configfs-root", o.configfs_root, "where configfs is mounted");
  app.add_option("--state-dir", o.state_dir,
                 "agent state; fencing marks live in <state-dir>/generations, auth=chap "
                 "credentials (0600) in <state-dir>/credentials");
  app.add_option("--exports-dir", o.exports_dir, "exports.d directory for knfsd");
  app.add_option("--nfsd-proc", o.nfsd_proc, "nfsd's proc directory");
  app.add_option("--nfs-etab", o.nfs_etab,
                 "knfsd's export table, watched to repair a wiped export at once; while it is "
                 "unchanged, the table read last is reused (no exportfs -v)");
  app.add_option("--nfs-etab-debounce-ms", o.nfs_etab_debounce_ms,
                 "quiet time after the export table's last change before the repair")
      ->check(CLI::Range(0, 10000));
  app.add_option("--protocols", o.protocols, "protocols to serve")->delimiter(',');
  app.add_flag("--no-load-modules", o.no_load_modules, "never modprobe target modules");
  app.add_option("--epoch-check-interval", o.epoch_check_seconds,
                 "seconds between target-state checks");
  app.add_option("--nqn-prefix", o.nqn_prefix, "prefix of subsystem NQNs");
  app.add_option("--iqn-prefix", o.iqn_prefix, "prefix of target IQNs");
  app.add_option("--log-level", o.log_level, "debug, info, warn, error");
  app.add_option("--ready-file", o.ready_file, "write the bound port here once serving");
  app.add_option("--metrics-address", o.metrics_address,
                 "serve Prometheus metrics on http://HOST:PORT/metrics (empty: none)");
}

int RunAgent(const AgentDaemonOptions& options, const AgentDaemonHooks& hooks) {
  log::Init("agent", options.log_level);
  TerminationSignals signals;  // before any thread starts
  auto fail = [](const Status& s) {
    log::Error("agent cannot start", {{"error", s.ToString()}});
    return 2;
  };
  if (Status s = RequireTls13(); !s.ok()) return fail(s);
  RaiseFileLimit();
  if (Status s = validate::Nqn("--nqn-prefix", options.nqn_prefix + ":x"); !s.ok()) return fail(s);
  if (Status s = validate::Iqn("--iqn-prefix", options.iqn_prefix + ":x"); !s.ok()) return fail(s);
  std::vector<Protocol> protocols;
  for (const auto& name : options.protocols) {
    auto p = ParseProtocol("--protocols", name);
    if (!p.ok()) return fail(p.status());
    protocols.push_back(*p);
  }
  if (hooks.prepare) {
    if (Status s = hooks.prepare(); !s.ok()) return fail(s);
  }

  auto metrics_endpoint = metrics::MaybeServe(options.metrics_address);
  if (!metrics_endpoint.ok()) return fail(metrics_endpoint.status());

  SystemExec system_exec;
  MeteredExec exec(system_exec);  // programs run count as target operations
  PosixFs fs;
  MeteredFs configfs(hooks.configfs != nullptr ? *hooks.configfs : fs);
  if (Status s = fs.MakeDirs(options.state_dir + "/generations"); !s.ok()) return fail(s);
  SystemClock clock;
  FencingMarks marks(fs, clock, options.state_dir + "/generations");
  // auth=chap secrets: a root-only directory of 0600 files.
  std::string creds_dir = options.state_dir + "/credentials";
  if (Status s = fs.MakeDirs(creds_dir); !s.ok()) return fail(s);
  if (::chmod(creds_dir.c_str(), 0700) != 0) {
    return fail(Internal("chmod 0700 " + creds_dir + ": " + std::strerror(errno)));
  }
  CredentialStore credential_store(fs, creds_dir);

  AgentCoreOptions core_opts;
  core_opts.node_name = options.node_name.empty() ? Hostname() : options.node_name;
  core_opts.nqn_prefix = options.nqn_prefix;
  core_opts.iqn_prefix = options.iqn_prefix;
  core_opts.credentials = &credential_store;
  if (hooks.load_target) {
    core_opts.load_target = hooks.load_target;
  } else if (!options.no_load_modules) {
    core_opts.load_target = [&exec](Protocol p) { return ModprobeTarget(exec, p); };
  }
  AgentCore core(core_opts, marks);
  for (const auto& spec : options.pools) {
    auto pool = MakePool(spec, exec, fs);
    if (!pool.ok()) return fail(pool.status());
    core.AddPool(std::move(pool).value());
  }
  for (Protocol p : protocols) core.AddExporter(MakeExporter(p, options, exec, fs, configfs));
  core.CheckTargetState();
  AgentMetrics::Get().boot_epoch.Add({{"epoch", core.BootEpoch()}}).Set(1);
  RefreshOnScrape(core);

  auto creds = ListenerCredentials("the agent API on " + options.listen + " (--insecure)",
                                   options.tls, options.insecure, AgentRpcPolicy());
  if (!creds.ok()) return fail(creds.status());
  AgentService service(core);
  grpc::ServerBuilder builder;
  HardenServer(builder);
  {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> timers;
    timers.push_back(
        metrics::CallMetricsInterceptor({&AgentMetrics::Get().rpc_duration, "method",
                                         "grpc_status_code", &metrics::FastBuckets()}));
    builder.experimental().SetInterceptorCreators(std::move(timers));
  }
  int bound_port = 0;
  builder.AddListeningPort(options.listen, *creds, &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return fail(Unavailable("cannot listen on " + options.listen));
  log::Info("agent serving", {{"listen", options.listen},
                              {"port", bound_port},
                              {"node", core_opts.node_name},
                              {"bootEpoch", core.BootEpoch()}});

  if (!options.ready_file.empty()) {
    Status s = fs.WriteFileAtomic(options.ready_file, std::to_string(bound_port) + "\n");
    if (!s.ok()) return fail(s);
  }
  // knfsd's export table rewritten (exportfs -ua / -ra by another tool): the
  // exports this agent applied come back at once; the controller's resync
  // stays the backstop (and the only repair when the table cannot be
  // watched).
  std::unique_ptr<FileEventWatcher> etab_watcher;
  if (std::find(protocols.begin(), protocols.end(), Protocol::kNfs) != protocols.end() &&
      !options.nfs_etab.empty()) {
    etab_watcher = std::make_unique<FileEventWatcher>(
        options.nfs_etab, std::chrono::milliseconds(options.nfs_etab_debounce_ms),
        [&core] { core.RepairExports(Protocol::kNfs); });
    if (Status s = etab_watcher->Start(); !s.ok()) {
      log::Warn("knfsd export table not watched; repairs wait for the controller's resync",
                {{"error", s.ToString()}});
      etab_watcher.reset();
    }
  }
  ServeUntilSignalled(core, signals, options.epoch_check_seconds);
  if (etab_watcher) etab_watcher->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  log::Info("agent stopped");
  return 0;
}

}  // namespace pillar::agent
