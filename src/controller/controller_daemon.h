// The controller daemon's wiring: its flags, the store and (on the
// Kubernetes store) CRDs, Lease, TokenReview and Events, the reconciler, the
// CSI server on its socket and the node registry on its port. `main` only
// parses the flags.
#pragma once

#include <string>
#include <vector>

#include "common/grpc_tls.h"
#include "controller/agent_client.h"

namespace CLI {
class App;
}  // namespace CLI

namespace pillar::controller {

// The Kubernetes side of a controller on the kube store.
struct KubeOptions {
  bool install_crds = true;
  std::string lease_namespace;  // default: the pod's (or the kubeconfig context's) namespace
  std::string lease_name = "pillar-csi-controller";
  std::string identity;  // default: $POD_NAME, else <hostname>-<pid>
  int lease_duration_seconds = 15;
  int renew_deadline_seconds = 10;
  int retry_period_seconds = 2;
  std::string node_service_account;  // default: <namespace>:pillar-node
  std::string node_token_audience = "pillar-csi.bhyoo.com";
};

struct ControllerDaemonOptions {
  std::string csi_endpoint = "unix:///var/lib/pillar-csi/controller/csi.sock";
  std::string registry_listen = "0.0.0.0:9600";
  TlsFiles registry_tls;
  bool registry_insecure = false;
  std::string store = "/var/lib/pillar-csi/controller/store.db";  // store/open.h's URI
  std::vector<std::string> agents;  // "NAME=ADDRESS:PORT[@TLS-NAME]", seeded or updated
  AgentTlsConfig agent_tls;
  std::string leader_lock;  // SQLite store; empty: <store>.lock
  KubeOptions kube;
  int resync_seconds = 30;
  int epoch_poll_seconds = 5;
  // How long the start waits for a store that cannot be reached (or answers
  // too late) before it gives up with exit code 2.
  int store_wait_seconds = 300;
  int workers = 8;
  int workers_per_agent = 0;  // 0: half of workers
  std::string log_level = "info";
  std::string ready_file;       // receives the registry's bound port once serving
  std::string metrics_address;  // HOST:PORT of /metrics; empty: none
};

// Declares every controller flag on `app`, bound to `options`.
void AddControllerFlags(CLI::App& app, ControllerDaemonOptions& options);

// Runs the controller until SIGTERM or SIGINT (or a lost Lease: exit code
// 1); returns the process exit code (0 after a clean stop, 2 when it cannot
// start).
int RunController(ControllerDaemonOptions options);

}  // namespace pillar::controller
