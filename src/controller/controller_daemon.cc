#include "controller/controller_daemon.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <thread>

#include "api/convert.h"
#include "common/daemon.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/validate.h"
#include "controller/controller_metrics.h"
#include "controller/csi_controller.h"
#include "controller/leader.h"
#include "controller/reconciler.h"
#include "controller/registry_service.h"
#include "kube/client.h"
#include "kube/events.h"
#include "kube/lease.h"
#include "kube/token_review.h"
#include "store/kube/crd_install.h"
#include "store/open.h"
#include "store/retry.h"

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
  return store::RetryOnConflict("--agent " + name, [&](int) -> Status {
    auto existing = store.Get(api::kKindAgent, name);
    if (existing.status().code() == Code::kNotFound) {
      store::Object obj;
      obj.kind = api::kKindAgent;
      obj.name = name;
      obj.spec = spec_json;
      return store.Create(obj).status();
    }
    if (!existing.ok()) return existing.status();
    if (existing->spec == spec_json) return Status::Ok();
    store::Object next = *existing;
    next.spec = spec_json;
    return store.Update(next).status();
  });
}

std::string DefaultIdentity() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') return pod;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

}  // namespace

void AddControllerFlags(CLI::App& app, ControllerDaemonOptions& o) {
  app.add_option("--csi-endpoint", o.csi_endpoint, "CSI socket (unix:///path)");
  app.add_option("--registry-listen", o.registry_listen, "node registry host:port");
  app.add_option("--registry-tls-cert", o.registry_tls.cert, "registry server certificate (PEM)");
  app.add_option("--registry-tls-key", o.registry_tls.key, "registry server key (PEM)");
  app.add_option("--registry-tls-ca", o.registry_tls.ca,
                 "CA that node plugin certificates chain to");
  app.add_flag("--registry-insecure", o.registry_insecure,
               "serve the registry without TLS (demos)");
  app.add_option("--store", o.store,
                 "the store: sqlite:PATH or a plain PATH (SQLite file), kube (in a pod) or "
                 "kube:KUBECONFIG (the Kubernetes API server)");
  app.add_option("--agent", o.agents, "NAME=ADDRESS:PORT[@TLS-NAME]: register or update an agent");
  app.add_option("--agent-tls-cert", o.agent_tls.files.cert,
                 "client certificate for o.agents (PEM)");
  app.add_option("--agent-tls-key", o.agent_tls.files.key, "client key for o.agents (PEM)");
  app.add_option("--agent-tls-ca", o.agent_tls.files.ca, "CA the o.agents' certificates chain to");
  app.add_flag("--agent-insecure", o.agent_tls.insecure, "talk to o.agents without TLS (demos)");
  app.add_option("--leader-lock", o.leader_lock,
                 "SQLite store: lock file for leader election (default: <store>.lock)");
  app.add_option("--install-crds", o.kube.install_crds,
                 "Kubernetes store: create pillar's CRDs that are absent (true/false)");
  app.add_option("--leader-election-namespace", o.kube.lease_namespace,
                 "Kubernetes store: namespace of the leader Lease (default: the controller's)");
  app.add_option("--leader-election-name", o.kube.lease_name, "Kubernetes store: the Lease's name");
  app.add_option("--leader-election-identity", o.kube.identity,
                 "Kubernetes store: this replica in the Lease (default: $POD_NAME)");
  app.add_option("--leader-election-lease-duration", o.kube.lease_duration_seconds,
                 "seconds a silent leader keeps the Lease");
  app.add_option("--leader-election-renew-deadline", o.kube.renew_deadline_seconds,
                 "seconds a leader that cannot renew keeps leading");
  app.add_option("--leader-election-retry-period", o.kube.retry_period_seconds,
                 "seconds between Lease renewals and attempts");
  app.add_option("--node-service-account", o.kube.node_service_account,
                 "Kubernetes store: NAMESPACE:NAME of the node plugin's ServiceAccount, the only "
                 "one whose tokens may report node identities (default: <namespace>:pillar-node)");
  app.add_option("--node-token-audience", o.kube.node_token_audience,
                 "Kubernetes store: the audience of the node plugins' projected tokens");
  app.add_option("--resync-interval", o.resync_seconds, "seconds between full resyncs (jittered)");
  app.add_option("--store-wait", o.store_wait_seconds,
                 "seconds the start waits for an unreachable or slow store before it gives up")
      ->check(CLI::Range(0, 86400));
  app.add_option("--epoch-poll-interval", o.epoch_poll_seconds,
                 "seconds between agent epoch checks");
  app.add_option("--workers", o.workers, "reconcile workers");
  app.add_option("--workers-per-agent", o.workers_per_agent,
                 "reconcile o.workers one agent's volumes may hold at once (0: half of --workers; "
                 "a hanging agent then delays no other agent's volumes)");
  app.add_option("--log-level", o.log_level, "debug, info, warn, error");
  app.add_option("--ready-file", o.ready_file, "write the registry's bound port here once serving");
  app.add_option("--metrics-address", o.metrics_address,
                 "serve Prometheus metrics on http://HOST:PORT/metrics (empty: none)");
}

int RunController(ControllerDaemonOptions options) {
  ControllerDaemonOptions& o = options;
  GrpcDaemon daemon("controller", o.log_level);  // before any thread starts
  auto fail = [&daemon](const Status& s) { return daemon.Fail(s); };
  if (o.registry_insecure) {
    log::Warn("INSECURE: the node registry is served without TLS (--registry-insecure)");
  }
  if (o.agent_tls.insecure) {
    log::Warn("INSECURE: o.agents are called without TLS (--agent-insecure)");
  }
  WarnIfCsiOnTcp(o.csi_endpoint);

  auto metrics_endpoint = metrics::MaybeServe(o.metrics_address);
  if (!metrics_endpoint.ok()) return fail(metrics_endpoint.status());
  ControllerMetrics& m = ControllerMetrics::Get();
  m.leader.Set(0);

  auto where = store::ParseStoreUri(o.store);
  if (!where.ok()) return fail(where.status());
  auto opened = store::OpenStoreWithClient(*where);
  if (!opened.ok()) return fail(opened.status());
  std::unique_ptr<store::Store> store = std::move(opened->store);
  kube::Client* kube_client = opened->kube;
  const bool on_kube = kube_client != nullptr;
  SystemClock clock;

  // Kubernetes: CRDs first (every store call needs them), then who we are.
  std::unique_ptr<kube::KubeEventSink> events;
  std::unique_ptr<kube::TokenReviewer> reviewer;
  std::unique_ptr<NodeAuthorizer> authorizer;
  std::unique_ptr<kube::LeaseElector> elector;
  if (on_kube) {
    kube::Client& client = *kube_client;
    client.SetRequestObserver([&m](const std::string& verb, Code code, double seconds) {
      m.StoreRequest(verb, metrics::GrpcCodeLabel(static_cast<int>(code)), seconds);
    });
    const std::string ns = client.config().namespace_name;
    if (o.kube.install_crds) {
      auto crds = store::EnsureCrds(client, std::chrono::seconds(60));
      if (!crds.ok()) return fail(crds.status());
      log::Info("CRDs in place",
                {{"created", crds->created.size()}, {"present", crds->present.size()}});
    }
    if (o.kube.identity.empty()) o.kube.identity = DefaultIdentity();
    kube::LeaseOptions lo;
    lo.namespace_name = o.kube.lease_namespace.empty() ? ns : o.kube.lease_namespace;
    lo.name = o.kube.lease_name;
    lo.identity = o.kube.identity;
    lo.lease_duration = std::chrono::seconds(std::max(1, o.kube.lease_duration_seconds));
    lo.renew_deadline = std::chrono::seconds(std::max(1, o.kube.renew_deadline_seconds));
    lo.retry_period = std::chrono::seconds(std::max(1, o.kube.retry_period_seconds));
    if (lo.renew_deadline >= lo.lease_duration || lo.retry_period >= lo.renew_deadline) {
      return fail(InvalidArgument(
          "--leader-election-*: want retry-period < renew-deadline < lease-duration"));
    }
    elector = std::make_unique<kube::LeaseElector>(client, clock, lo);
    if (o.kube.node_service_account.empty()) o.kube.node_service_account = ns + ":pillar-node";
    reviewer = std::make_unique<kube::TokenReviewer>(client, o.kube.node_token_audience,
                                                     o.kube.node_service_account);
    authorizer = std::make_unique<TokenReviewAuthorizer>(*reviewer);
    // Events about pillar's cluster-scoped kinds go to "default": the API
    // server refuses them in any other namespace (the controller's included).
    kube::EventSinkOptions eo;
    eo.host = o.kube.identity;
    events = std::make_unique<kube::KubeEventSink>(client, clock, eo);
    log::Info("on the Kubernetes store", {{"server", client.config().server},
                                          {"lease", lo.namespace_name + "/" + lo.name},
                                          {"identity", lo.identity},
                                          {"nodeServiceAccount", o.kube.node_service_account}});
  }

  store::StartPatience patience;
  patience.total = std::chrono::seconds(o.store_wait_seconds);
  auto keep_waiting = [](const Status& s, std::chrono::milliseconds wait) {
    log::Warn("the store did not answer; trying again",
              {{"error", s.ToString()}, {"waitMs", static_cast<int64_t>(wait.count())}});
  };
  for (const auto& a : o.agents) {
    Status s = store::RetryWhileUnreachable(
        patience, [&] { return SeedAgent(*store, a); }, keep_waiting);
    if (!s.ok()) return fail(s);
  }

  GrpcAgentDirectory directory(o.agent_tls);
  ReconcilerOptions ropts;
  ropts.resync_interval = std::chrono::seconds(std::max(1, o.resync_seconds));
  ropts.epoch_poll_interval = std::chrono::seconds(std::max(1, o.epoch_poll_seconds));
  ropts.workers = o.workers;
  ropts.max_workers_per_agent = o.workers_per_agent;
  ropts.events = events.get();
  ExportReconciler reconciler(*store, directory, clock, ropts);

  std::unique_ptr<LeaseLeader> lease_leader;
  std::unique_ptr<FileLockLeader> file_leader;
  LeaderGate* gate = nullptr;
  if (on_kube) {
    lease_leader = std::make_unique<LeaseLeader>(*elector);
    gate = lease_leader.get();
  } else {
    file_leader = std::make_unique<FileLockLeader>(o.leader_lock.empty() ? where->path + ".lock"
                                                                         : o.leader_lock);
    gate = file_leader.get();
  }
  CsiIdentity identity(*gate);
  CsiController controller(*store, directory, reconciler, *gate, clock);
  // Outside Kubernetes a node proves who it is with its certificate.
  if (!authorizer && !o.registry_insecure)
    authorizer = std::make_unique<CertificateNodeAuthorizer>();
  NodeRegistryService registry(*store, clock, authorizer.get());

  // Two servers: the CSI services stay on the local socket, never on the
  // registry's TCP port. On the Kubernetes store the CSI socket is served
  // from the start, leading or not: a replica that does not lead answers
  // Probe with ready=false and refuses mutations, so the CSI sidecars beside
  // it wait in their probe loop (they give up on a socket that is absent for
  // 30 s) and take no lease of their own until this replica leads. The
  // registry and the reconciler run only on the leader.
  auto serve_csi = [&]() -> Status {
    return daemon.Serve({{o.csi_endpoint, grpc::InsecureServerCredentials()}},
                        {&identity, &controller});
  };
  std::atomic<int> exit_code{0};
  auto lead = [&]() -> Status {
    RETURN_IF_ERROR(store::RetryWhileUnreachable(
        patience, [&] { return reconciler.Start(); }, keep_waiting));
    if (!on_kube) RETURN_IF_ERROR(serve_csi());
    ASSIGN_OR_RETURN(
        auto reg_creds,
        ListenerCredentials("the node registry on " + o.registry_listen + " (--registry-insecure)",
                            o.registry_tls, o.registry_insecure, RegistryRpcPolicy()));
    int reg_port = 0;
    RETURN_IF_ERROR(daemon.Serve({{o.registry_listen, reg_creds, &reg_port}}, {&registry}));
    log::Info("controller serving", {{"csi", o.csi_endpoint},
                                     {"registry", o.registry_listen},
                                     {"registryPort", reg_port},
                                     {"store", o.store}});
    if (!o.ready_file.empty()) {
      PosixFs fs;
      RETURN_IF_ERROR(fs.WriteFileAtomic(o.ready_file, std::to_string(reg_port) + "\n"));
    }
    return Status::Ok();
  };
  auto stop_self = [&exit_code](int code) {
    exit_code = code;
    kill(getpid(), SIGTERM);  // the main thread's WaitAndShutdown takes it
  };

  std::thread leading;
  if (on_kube) {
    if (Status s = serve_csi(); !s.ok()) return fail(s);
    log::Info("waiting for leadership", {{"identity", o.kube.identity}, {"csi", o.csi_endpoint}});
    leading = std::thread([&] {
      if (!elector->WaitForLeadership()) return;  // stopping
      log::Info("leading", {{"identity", o.kube.identity}});
      if (Status s = lead(); !s.ok()) {
        log::Error("controller cannot start", {{"error", s.ToString()}});
        return stop_self(2);
      }
      lease_leader->SetReady();
      m.leader.Set(1);
      // Lost means another replica may lead now: stop at once; Kubernetes
      // restarts this one as a candidate.
      elector->Run([&] { stop_self(1); });
    });
  } else {
    if (Status s = file_leader->WaitForLeadership(); !s.ok()) return fail(s);
    if (Status s = lead(); !s.ok()) return fail(s);
    m.leader.Set(1);
  }

  daemon.WaitAndShutdown(std::chrono::seconds(1), [&] {
    if (elector) elector->Stop();
    if (leading.joinable()) leading.join();
    reconciler.Stop();
  });
  if (elector && exit_code == 0) {
    if (Status s = elector->Release(); !s.ok()) {
      log::Warn("could not release the lease", {{"error", s.ToString()}});
    }
  }
  events.reset();  // posts what is queued
  return exit_code;
}

}  // namespace pillar::controller
