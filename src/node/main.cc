// pillar-node: CSI Identity + Node on a unix socket, identity reporting to
// the controller's node registry, and the self-healing loop.
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
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/validate.h"
#include "common/version.h"
#include "node/attach/iscsi.h"
#include "node/attach/nvme.h"
#include "node/csi_node.h"
#include "node/selfheal.h"

namespace pillar::node {
namespace {

// "500ms", "5s", "2m" or plain seconds.
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

// Runs `step` every `interval` on its own thread until Stop().
class Ticker {
 public:
  Ticker(std::chrono::milliseconds interval, std::function<void()> step)
      : interval_(interval), step_(std::move(step)), thread_([this] { Loop(); }) {}
  ~Ticker() { Stop(); }
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
      cv_.wait_for(lock, interval_, [this] { return stop_; });
    }
  }

  std::chrono::milliseconds interval_;
  std::function<void()> step_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::string DefaultNodeId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "";
  std::string id = host;
  for (auto& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return id;
}

int Run(int argc, char** argv) {
  CLI::App app{"pillar-node: CSI node plugin (NVMe-oF/TCP, iSCSI, NFS)"};
  app.set_version_flag("--version", "pillar-node " + std::string(pillar::Version()));
  std::string csi_endpoint = "unix:///var/lib/kubelet/plugins/pillar-csi.bhyoo.com/csi.sock";
  IdentityOptions id_opts;
  std::string registry_address;
  TlsFiles registry_tls;
  bool registry_insecure = false;
  std::string registry_tls_name;
  std::string state_dir = "/var/lib/pillar-csi/node";
  std::string sysfs_root = "/sys";
  std::string fabrics_device = "/dev/nvme-fabrics";
  std::string iscsi_node_db = "/etc/iscsi/nodes";
  std::string identity_interval = "5s";
  std::string selfheal_interval = "10s";
  std::string device_timeout = "30s";
  std::string log_level = "info";

  app.add_option("--csi-endpoint", csi_endpoint, "CSI socket (unix:///path)");
  app.add_option("--node-id", id_opts.node_id, "CSI node ID (default: the host name)");
  app.add_option("--registry-address", registry_address,
                 "controller node registry host:port (empty: do not report)");
  app.add_option("--registry-tls-cert", registry_tls.cert, "client certificate (PEM)");
  app.add_option("--registry-tls-key", registry_tls.key, "client key (PEM)");
  app.add_option("--registry-tls-ca", registry_tls.ca, "CA the registry's certificate chains to");
  app.add_option("--registry-tls-server-name", registry_tls_name,
                 "name the registry's certificate must carry (default: the address host)");
  app.add_flag("--registry-insecure", registry_insecure, "talk to the registry without TLS");
  std::string registry_token_file;
  app.add_option("--registry-token-file", registry_token_file,
                 "projected ServiceAccount token sent with every report (Kubernetes)");
  app.add_option("--state-dir", state_dir, "stage records directory");
  app.add_option("--sysfs-root", sysfs_root, "where sysfs is mounted");
  app.add_option("--host-nqn-file", id_opts.host_nqn_file,
                 "NVMe host NQN file (a \"hostid\" file beside it gives the host ID)");
  app.add_option("--nvme-fabrics-device", fabrics_device,
                 "the kernel's NVMe-oF connect device (DH-HMAC-CHAP keys are written there, "
                 "never put on a command line)");
  app.add_option("--iscsi-node-db", iscsi_node_db,
                 "open-iscsi's node database (CHAP settings are written there for iscsiadm, "
                 "never put on a command line)");
  app.add_option("--iscsi-initiator-file", id_opts.iscsi_initiator_file,
                 "open-iscsi initiator name file");
  app.add_option("--node-address", id_opts.static_addresses,
                 "report these addresses instead of discovering them (repeatable)");
  app.add_flag("--report-loopback", id_opts.include_loopback, "report loopback addresses");
  app.add_flag("--report-link-local", id_opts.include_link_local, "report link-local addresses");
  app.add_option("--identity-interval", identity_interval, "identity watch interval");
  app.add_option("--selfheal-interval", selfheal_interval, "self-healing interval");
  app.add_option("--device-timeout", device_timeout, "how long NodeStage waits for a device");
  app.add_option("--log-level", log_level, "debug, info, warn, error");
  CLI11_PARSE(app, argc, argv);

  GrpcDaemon daemon("node", log_level, "node plugin");  // before any thread starts
  WarnIfCsiOnTcp(csi_endpoint);
  if (registry_insecure && !registry_address.empty()) {
    log::Warn(
        "INSECURE: identities are reported to the registry without TLS "
        "(--registry-insecure): anyone on the path can read or forge them");
  }
  if (id_opts.node_id.empty()) id_opts.node_id = DefaultNodeId();
  if (Status s = validate::ObjectName("--node-id", id_opts.node_id); !s.ok()) return daemon.Fail(s);
  for (const auto& a : id_opts.static_addresses) {
    if (Status s = validate::IpAddress("--node-address", a); !s.ok()) return daemon.Fail(s);
  }
  auto id_every = ParseDuration("--identity-interval", identity_interval);
  if (!id_every.ok()) return daemon.Fail(id_every.status());
  auto heal_every = ParseDuration("--selfheal-interval", selfheal_interval);
  if (!heal_every.ok()) return daemon.Fail(heal_every.status());
  auto dev_timeout = ParseDuration("--device-timeout", device_timeout);
  if (!dev_timeout.ok()) return daemon.Fail(dev_timeout.status());

  SystemExec exec;
  PosixFs fs;
  SystemClock clock;
  SyscallMounter mounter;
  AttachOptions attach_opts;
  attach_opts.device_timeout_ms = dev_timeout->count();
  DevFabrics fabrics(fabrics_device);
  NvmeAttacher nvme(exec, fabrics, fs, clock, sysfs_root, id_opts.host_nqn_file, attach_opts);
  IscsiAttacher iscsi(exec, fs, clock, sysfs_root, iscsi_node_db, attach_opts);
  NfsMounter nfs(exec);
  PosixDeviceClaimer claimer;
  DeviceFormatter formatter(exec, claimer);
  StageRecordStore records(fs, JoinPath(state_dir, "volumes"));
  if (Status s = records.Init(); !s.ok()) return daemon.Fail(s);
  VolumeLocks volume_locks;
  NamedLocks connection_locks;
  Attachers attachers{&nvme, &iscsi};
  NodeCore core(NodeDeps{fs, mounter, attachers, nfs, formatter, records, volume_locks,
                         connection_locks, sysfs_root});
  log::Info("stage records loaded",
            {{"dir", JoinPath(state_dir, "volumes")}, {"volumes", records.List().size()}});

  CsiNodeIdentity identity;
  CsiNode node(core, id_opts.node_id);
  if (Status s =
          daemon.Serve({{csi_endpoint, grpc::InsecureServerCredentials()}}, {&identity, &node});
      !s.ok()) {
    return daemon.Fail(s);
  }

  std::unique_ptr<GrpcRegistryClient> registry;
  std::unique_ptr<IdentitySource> id_source;
  std::unique_ptr<IdentityReporter> reporter;
  std::unique_ptr<Ticker> id_ticker;
  if (!registry_address.empty()) {
    std::shared_ptr<grpc::ChannelCredentials> creds;
    if (registry_insecure) {
      creds = grpc::InsecureChannelCredentials();
    } else {
      // The registry is the controller's: a node reports to nothing else.
      auto c = MutualTlsChannelCredentials(registry_tls, ExpectedPeer{Role::kController, {}});
      if (!c.ok()) return daemon.Fail(c.status());
      creds = *c;
    }
    grpc::ChannelArguments args;
    if (!registry_tls_name.empty()) args.SetSslTargetNameOverride(registry_tls_name);
    // A local subchannel pool: a channel made after a failure never reuses
    // the old (possibly dead) connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    registry = std::make_unique<GrpcRegistryClient>(
        [registry_address, creds, args] {
          return grpc::CreateCustomChannel(registry_address, creds, args);
        },
        &fs, registry_token_file);
    id_source = std::make_unique<IdentitySource>(exec, fs, id_opts);
    reporter = std::make_unique<IdentityReporter>(*id_source, *registry);
    id_ticker = std::make_unique<Ticker>(*id_every, [&reporter] {
      if (Status s = reporter->Tick(); !s.ok()) {
        log::Warn("identity report failed; retrying", {{"error", s.ToString()}});
      }
    });
  } else {
    log::Warn("no --registry-address: node identities are not reported", {});
  }
  SelfHealer healer(records, attachers, mounter, nfs, volume_locks, connection_locks);
  Ticker heal_ticker(*heal_every, [&healer] {
    HealReport r = healer.RunOnce();
    if (r.repaired > 0 || r.skipped > 0) {
      log::Info("self-heal pass",
                {{"checked", r.checked}, {"repaired", r.repaired}, {"skipped", r.skipped}});
    }
  });
  log::Info("node plugin serving", {{"csi", csi_endpoint},
                                    {"nodeID", id_opts.node_id},
                                    {"registry", registry_address},
                                    {"stateDir", state_dir},
                                    {"sysfsRoot", sysfs_root}});

  return daemon.WaitAndShutdown(std::chrono::seconds(5), [&] {
    heal_ticker.Stop();
    if (id_ticker) id_ticker->Stop();
  });
}

}  // namespace
}  // namespace pillar::node

int main(int argc, char** argv) { return pillar::node::Run(argc, argv); }
