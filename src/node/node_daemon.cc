#include "node/node_daemon.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <condition_variable>
#include <thread>

#include "common/clock.h"
#include "common/daemon.h"
#include "common/exec.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/validate.h"
#include "node/address_watch.h"
#include "node/attach/iscsi.h"
#include "node/attach/nvme.h"
#include "node/csi_node.h"
#include "node/node_metrics.h"
#include "node/selfheal.h"

namespace pillar::node {

StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& flag, const std::string& v) {
  size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  std::string unit = v.substr(digits);
  if (digits == 0 || digits > 9) return InvalidArgument(flag + " \"" + v + "\" is not a duration");
  int64_t n = std::stoll(v.substr(0, digits));
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit.empty() || unit == "s") return std::chrono::milliseconds(n * 1000);
  if (unit == "m") return std::chrono::milliseconds(n * 60000);
  return InvalidArgument(flag + " \"" + v + "\": unit must be ms, s or m");
}

namespace {

// Runs `step` every `interval` on its own thread until Stop().
class Ticker {
 public:
  Ticker(std::chrono::milliseconds interval, std::function<void()> step)
      : interval_(interval), step_(std::move(step)), thread_([this] { Loop(); }) {}
  ~Ticker() { Stop(); }
  // Runs the step now (or right after the one running) rather than at the
  // next interval.
  void Poke() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      poked_ = true;
    }
    cv_.notify_all();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      step_();
      lock.lock();
      cv_.wait_for(lock, interval_, [this] { return stop_ || poked_; });
      poked_ = false;
    }
  }

  std::chrono::milliseconds interval_;
  std::function<void()> step_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool poked_ = false;
  std::thread thread_;
};

std::string DefaultNodeId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "";
  std::string id = host;
  for (auto& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return id;
}

}  // namespace

void AddNodeFlags(CLI::App& app, NodeDaemonOptions& o) {
  auto duration = [&app](const std::string& flag, std::chrono::milliseconds& into,
                         const std::string& help) {
    app.add_option_function<std::string>(
        flag,
        [flag, &into](const std::string& v) {
          auto d = ParseDuration(flag, v);
          if (!d.ok()) throw CLI::ValidationError(flag, d.status().message());
          into = *d;
        },
        help);
  };
  app.add_option("--csi-endpoint", o.csi_endpoint, "CSI socket (unix:///path)");
  app.add_option("--node-id", o.identity.node_id, "CSI node ID (default: the host name)");
  app.add_option("--registry-address", o.registry_address,
                 "controller node registry host:port (empty: do not report)");
  app.add_option("--registry-tls-cert", o.registry_tls.cert, "client certificate (PEM)");
  app.add_option("--registry-tls-key", o.registry_tls.key, "client key (PEM)");
  app.add_option("--registry-tls-ca", o.registry_tls.ca, "CA the registry's certificate chains to");
  app.add_option("--registry-tls-server-name", o.registry_tls_name,
                 "name the registry's certificate must carry (default: the address host)");
  app.add_flag("--registry-insecure", o.registry_insecure, "talk to the registry without TLS");
  app.add_option("--registry-token-file", o.registry_token_file,
                 "projected ServiceAccount token sent with every report (Kubernetes)");
  app.add_option("--state-dir", o.state_dir, "stage records directory");
  app.add_option("--sysfs-root", o.sysfs_root, "where sysfs is mounted");
  app.add_option("--host-nqn-file", o.identity.host_nqn_file,
                 "NVMe host NQN file (a \"hostid\" file beside it gives the host ID)");
  app.add_option("--nvme-fabrics-device", o.fabrics_device,
                 "the kernel's NVMe-oF connect device (DH-HMAC-CHAP keys are written there, "
                 "never put on a command line)");
  app.add_option("--iscsi-node-db", o.iscsi_node_db,
                 "open-iscsi's node database (CHAP settings are written there for iscsiadm, "
                 "never put on a command line)");
  app.add_option("--iscsi-initiator-file", o.identity.iscsi_initiator_file,
                 "open-iscsi initiator name file");
  app.add_option("--node-address", o.identity.static_addresses,
                 "report these addresses instead of discovering them (repeatable)");
  app.add_flag("--report-loopback", o.identity.include_loopback, "report loopback addresses");
  app.add_flag("--report-link-local", o.identity.include_link_local, "report link-local addresses");
  duration("--identity-interval", o.identity_interval, "identity watch interval (default 5s)");
  duration("--selfheal-interval", o.selfheal_interval, "self-healing interval (default 10s)");
  duration("--device-timeout", o.device_timeout,
           "how long NodeStage waits for a device (default 30s)");
  app.add_option("--log-level", o.log_level, "debug, info, warn, error");
  app.add_option("--metrics-address", o.metrics_address,
                 "serve Prometheus metrics on http://HOST:PORT/metrics (empty: none)");
}

int RunNode(NodeDaemonOptions options) {
  const NodeDaemonOptions& o = options;
  IdentityOptions& id_opts = options.identity;
  GrpcDaemon daemon("node", o.log_level, "node plugin");  // before any thread starts
  WarnIfCsiOnTcp(o.csi_endpoint);
  if (o.registry_insecure && !o.registry_address.empty()) {
    log::Warn(
        "INSECURE: identities are reported to the registry without TLS "
        "(--registry-insecure): anyone on the path can read or forge them");
  }
  if (id_opts.node_id.empty()) id_opts.node_id = DefaultNodeId();
  if (Status s = validate::ObjectName("--node-id", id_opts.node_id); !s.ok()) return daemon.Fail(s);
  for (const auto& a : id_opts.static_addresses) {
    if (Status s = validate::IpAddress("--node-address", a); !s.ok()) return daemon.Fail(s);
  }

  SystemExec exec;
  PosixFs fs;
  SystemClock clock;
  SyscallMounter mounter;
  AttachOptions attach_opts;
  attach_opts.device_timeout_ms = o.device_timeout.count();
  DevFabrics fabrics(o.fabrics_device);
  NvmeAttacher nvme(exec, fabrics, fs, clock, o.sysfs_root, id_opts.host_nqn_file, attach_opts);
  IscsiAttacher iscsi(exec, fs, clock, o.sysfs_root, o.iscsi_node_db, attach_opts);
  NfsMounter nfs(exec);
  PosixDeviceClaimer claimer;
  DeviceFormatter formatter(exec, claimer);
  StageRecordStore records(fs, JoinPath(o.state_dir, "volumes"));
  if (Status s = records.Init(); !s.ok()) return daemon.Fail(s);
  VolumeLocks volume_locks;
  NamedLocks connection_locks;
  Attachers attachers{&nvme, &iscsi};
  NodeCore core(NodeDeps{fs, mounter, attachers, nfs, formatter, records, volume_locks,
                         connection_locks, o.sysfs_root});
  log::Info("stage records loaded",
            {{"dir", JoinPath(o.state_dir, "volumes")}, {"volumes", records.List().size()}});

  auto metrics_endpoint = metrics::MaybeServe(o.metrics_address);
  if (!metrics_endpoint.ok()) return daemon.Fail(metrics_endpoint.status());
  RefreshOnScrape(records);
  daemon.TimeCalls({&NodeMetrics::Get().csi_operations});

  CsiNodeIdentity identity;
  CsiNode node(core, id_opts.node_id);
  if (Status s =
          daemon.Serve({{o.csi_endpoint, grpc::InsecureServerCredentials()}}, {&identity, &node});
      !s.ok()) {
    return daemon.Fail(s);
  }

  std::unique_ptr<GrpcRegistryClient> registry;
  std::unique_ptr<IdentitySource> id_source;
  std::unique_ptr<IdentityReporter> reporter;
  std::unique_ptr<Ticker> id_ticker;
  std::unique_ptr<AddressWatch> address_watch;
  if (!o.registry_address.empty()) {
    std::shared_ptr<grpc::ChannelCredentials> creds;
    if (o.registry_insecure) {
      creds = grpc::InsecureChannelCredentials();
    } else {
      // The registry is the controller's: a node reports to nothing else.
      auto c = MutualTlsChannelCredentials(o.registry_tls, ExpectedPeer{Role::kController, {}});
      if (!c.ok()) return daemon.Fail(c.status());
      creds = *c;
    }
    grpc::ChannelArguments args;
    if (!o.registry_tls_name.empty()) args.SetSslTargetNameOverride(o.registry_tls_name);
    // A local subchannel pool: a channel made after a failure never reuses
    // the old (possibly dead) connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    registry = std::make_unique<GrpcRegistryClient>(
        [address = o.registry_address, creds, args] {
          return grpc::CreateCustomChannel(address, creds, args);
        },
        &fs, o.registry_token_file);
    id_source = std::make_unique<IdentitySource>(exec, fs, id_opts);
    reporter = std::make_unique<IdentityReporter>(*id_source, *registry);
    id_ticker = std::make_unique<Ticker>(o.identity_interval, [&reporter] {
      if (Status s = reporter->Tick(); !s.ok()) {
        log::Warn("identity report failed; retrying", {{"error", s.ToString()}});
      }
    });
    // An address or link event reports at once; the interval is the net.
    address_watch = std::make_unique<AddressWatch>([&id_ticker] { id_ticker->Poke(); });
    if (Status s = address_watch->Start(); !s.ok()) {
      log::Warn("no address events; identities are polled only",
                {{"error", s.ToString()}, {"interval", o.identity_interval.count()}});
      address_watch.reset();
    }
  } else {
    log::Warn("no --registry-address: node identities are not reported", {});
  }
  SelfHealer healer(records, attachers, mounter, nfs, volume_locks, connection_locks);
  Ticker heal_ticker(o.selfheal_interval, [&healer] {
    HealReport r = healer.RunOnce();
    if (r.repaired > 0 || r.skipped > 0) {
      log::Info("self-heal pass",
                {{"checked", r.checked}, {"repaired", r.repaired}, {"skipped", r.skipped}});
    }
  });
  log::Info("node plugin serving", {{"csi", o.csi_endpoint},
                                    {"nodeID", id_opts.node_id},
                                    {"registry", o.registry_address},
                                    {"stateDir", o.state_dir},
                                    {"sysfsRoot", o.sysfs_root}});

  return daemon.WaitAndShutdown(std::chrono::seconds(5), [&] {
    heal_ticker.Stop();
    if (address_watch) address_watch->Stop();
    if (id_ticker) id_ticker->Stop();
  });
}

}  // namespace pillar::node
