// The node plugin daemon's wiring: its flags, the attachers, stage records
// and self-healing they configure, the CSI server and the identity reports
// to the controller's registry. `main` only parses the flags.
#pragma once

#include <chrono>
#include <string>

#include "common/grpc_tls.h"
#include "common/status.h"
#include "node/identity.h"

namespace CLI {
class App;
}  // namespace CLI

namespace pillar::node {

struct NodeDaemonOptions {
  std::string csi_endpoint = "unix:///var/lib/kubelet/plugins/pillar-csi.bhyoo.com/csi.sock";
  IdentityOptions identity;      // node_id empty: the host name, lower-cased
  std::string registry_address;  // empty: identities are not reported
  TlsFiles registry_tls;
  bool registry_insecure = false;
  std::string registry_tls_name;    // empty: the address host
  std::string registry_token_file;  // projected ServiceAccount token (Kubernetes)
  std::string state_dir = "/var/lib/pillar-csi/node";
  std::string sysfs_root = "/sys";
  std::string fabrics_device = "/dev/nvme-fabrics";
  std::string iscsi_node_db = "/etc/iscsi/nodes";
  std::chrono::milliseconds identity_interval{std::chrono::seconds(5)};
  std::chrono::milliseconds selfheal_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds device_timeout{std::chrono::seconds(30)};
  std::string log_level = "info";
  std::string metrics_address;  // HOST:PORT of /metrics; empty: none
};

// "500ms", "5s", "2m" or plain seconds; INVALID_ARGUMENT naming `flag`.
StatusOr<std::chrono::milliseconds> ParseDuration(const std::string& flag, const std::string& v);

// Declares every node plugin flag on `app`, bound to `options`; a duration
// flag that does not parse is a CLI error naming the flag.
void AddNodeFlags(CLI::App& app, NodeDaemonOptions& options);

// Runs the node plugin until SIGTERM or SIGINT; returns the process exit
// code (0 after a clean stop, 2 when it cannot start).
int RunNode(NodeDaemonOptions options);

}  // namespace pillar::node
