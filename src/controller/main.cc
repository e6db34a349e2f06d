// pillar-controller: CSI Identity + Controller on a unix socket, the node
// registry, and the export reconciler, over the embedded SQLite store.
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <thread>

#include "api/convert.h"
#include "common/daemon.h"
#include "common/fs.h"
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/validate.h"
#include "controller/agent_client.h"
#include "controller/csi_controller.h"
#include "controller/leader.h"
#include "controller/reconciler.h"
#include "controller/registry_service.h"
#include "store/open.h"

namespace pillar::controller {
namespace {

// "--agent NAME=ADDRESS:PORT[@TLS-NAME]" seeds or updates a PillarAgent.
Status SeedAgent(store::Store& store, const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos)
    return InvalidArgument("--agent \"" + spec + "\": want NAME=ADDR:PORT");
  std::string name = spec.substr(0, eq);
  std::string rest = spec.substr(eq + 1);
  std::string tls_name;
  if (size_t at = rest.find('@'); at != std::string::npos) {
    tls_name = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("--agent " + name + ": want ADDR:PORT");
  std::string addr = rest.substr(0, colon);
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']')
    addr = addr.substr(1, addr.size() - 2);
  std::string port = rest.substr(colon + 1);
  RETURN_IF_ERROR(validate::ObjectName("--agent name", name));
  RETURN_IF_ERROR(validate::IpAddress("--agent address", addr));
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("--agent " + name + ": bad port \"" + port + "\"");
  }
  RETURN_IF_ERROR(validate::Port("--agent port", std::stoll(port)));
  api::AgentRecord rec;
  rec.address = addr;
  rec.port = std::stoll(port);
  rec.tls_server_name = tls_name;
  nlohmann::json spec_json = api::AgentSpecToJson(rec);
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto existing = store.Get(api::kKindAgent, name);
    if (existing.status().code() == Code::kNotFound) {
      store::Object obj;
      obj.kind = api::kKindAgent;
      obj.name = name;
      obj.spec = spec_json;
      auto c = store.Create(obj);
      if (c.status().code() == Code::kAlreadyExists) continue;
      return c.status();
    }
    if (!existing.ok()) return existing.status();
    if (existing->spec == spec_json) return Status::Ok();
    store::Object next = *existing;
    next.spec = spec_json;
    auto u = store.Update(next);
    if (u.status().code() == Code::kAborted) continue;
    return u.status();
  }
  return Aborted("--agent " + name + ": concurrent updates");
}

int Run(int argc, char** argv) {
  CLI::App app{"pillar-controller: CSI controller, node registry and export reconciler"};
  std::string csi_endpoint = "unix:///var/lib/pillar-csi/controller/csi.sock";
  std::string registry_listen = "0.0.0.0:9600";
  TlsFiles registry_tls;
  bool registry_insecure = false;
  std::string store_path = "/var/lib/pillar-csi/controller/store.db";
  std::vector<std::string> agents;
  AgentTlsConfig agent_tls;
  std::string leader_lock;
  int resync_seconds = 30;
  int epoch_poll_seconds = 5;
  int workers = 4;
  std::string log_level = "info";
  std::string ready_file;

  app.add_option("--csi-endpoint", csi_endpoint, "CSI socket (unix:///path)");
  app.add_option("--registry-listen", registry_listen, "node registry host:port");
  app.add_option("--registry-tls-cert", registry_tls.cert, "registry server certificate (PEM)");
  app.add_option("--registry-tls-key", registry_tls.key, "registry server key (PEM)");
  app.add_option("--registry-tls-ca", registry_tls.ca, "CA that node plugin certificates chain to");
  app.add_flag("--registry-insecure", registry_insecure, "serve the registry without TLS (demos)");
  app.add_option("--store", store_path, "the store: sqlite:PATH or a plain PATH (SQLite file)");
  app.add_option("--agent", agents, "NAME=ADDRESS:PORT[@TLS-NAME]: register or update an agent");
  app.add_option("--agent-tls-cert", agent_tls.files.cert, "client certificate for agents (PEM)");
  app.add_option("--agent-tls-key", agent_tls.files.key, "client key for agents (PEM)");
  app.add_option("--agent-tls-ca", agent_tls.files.ca, "CA the agents' certificates chain to");
  app.add_flag("--agent-insecure", agent_tls.insecure, "talk to agents without TLS (demos)");
  app.add_option("--leader-lock", leader_lock,
                 "lock file for leader election (default: <store>.lock)");
  app.add_option("--resync-interval", resync_seconds, "seconds between full resyncs (jittered)");
  app.add_option("--epoch-poll-interval", epoch_poll_seconds, "seconds between agent epoch checks");
  app.add_option("--workers", workers, "reconcile workers");
  app.add_option("--log-level", log_level, "debug, info, warn, error");
  app.add_option("--ready-file", ready_file, "write the registry's bound port here once serving");
  CLI11_PARSE(app, argc, argv);

  GrpcDaemon daemon("controller", log_level);  // before any thread starts
  auto fail = [&daemon](const Status& s) { return daemon.Fail(s); };

  auto where = store::ParseStoreUri(store_path);
  if (!where.ok()) return fail(where.status());
  auto opened = store::OpenStore(*where);
  if (!opened.ok()) return fail(opened.status());
  std::unique_ptr<store::Store> store = std::move(opened).value();
  for (const auto& a : agents) {
    if (Status s = SeedAgent(*store, a); !s.ok()) return fail(s);
  }

  FileLockLeader leader(leader_lock.empty() ? where->path + ".lock" : leader_lock);
  if (Status s = leader.WaitForLeadership(); !s.ok()) return fail(s);

  SystemClock clock;
  GrpcAgentDirectory directory(agent_tls);
  ReconcilerOptions ropts;
  ropts.resync_interval = std::chrono::seconds(std::max(1, resync_seconds));
  ropts.epoch_poll_interval = std::chrono::seconds(std::max(1, epoch_poll_seconds));
  ropts.workers = workers;
  ExportReconciler reconciler(*store, directory, clock, ropts);
  if (Status s = reconciler.Start(); !s.ok()) return fail(s);

  CsiIdentity identity(leader);
  CsiController controller(*store, directory, reconciler, leader);
  NodeRegistryService registry(*store, clock);

  // Two servers: the CSI services stay on the local socket, never on the
  // registry's TCP port.
  if (Status s = daemon.Serve({{csi_endpoint, grpc::InsecureServerCredentials()}},
                              {&identity, &controller});
      !s.ok()) {
    return fail(s);
  }
  auto reg_creds = ListenerCredentials(registry_tls, registry_insecure);
  if (!reg_creds.ok()) return fail(reg_creds.status());
  int reg_port = 0;
  if (Status s = daemon.Serve({{registry_listen, *reg_creds, &reg_port}}, {&registry}); !s.ok()) {
    return fail(s);
  }
  log::Info("controller serving", {{"csi", csi_endpoint},
                                   {"registry", registry_listen},
                                   {"registryPort", reg_port},
                                   {"store", store_path}});

  if (!ready_file.empty()) {
    PosixFs fs;
    if (Status s = fs.WriteFileAtomic(ready_file, std::to_string(reg_port) + "\n"); !s.ok()) {
      return fail(s);
    }
  }

  int code = daemon.WaitAndShutdown(std::chrono::seconds(1));
  reconciler.Stop();
  return code;
}

}  // namespace
}  // namespace pillar::controller

int main(int argc, char** argv) { return pillar::controller::Run(argc, argv); }
