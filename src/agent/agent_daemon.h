// The agent daemon's wiring, shared by the production `pillar-agent` and the
// test binary `pillar-agent-sim`: its flags, the pools and exporters they
// configure, the gRPC server and the target-state monitor. A main only parses
// the flags and chooses the hooks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/exporters/exporter.h"
#include "common/fs.h"
#include "common/grpc_tls.h"
#include "common/protocol.h"
#include "common/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace pillar::agent {

struct AgentDaemonOptions {
  std::string listen = "0.0.0.0:9500";
  TlsFiles tls;
  bool insecure = false;
  std::string node_name;           // empty: the host name
  std::vector<std::string> pools;  // "NAME=KIND[:ARG]", see MakePool in the .cc
  std::string configfs_root = "/sys/kernel/config";
  std::string state_dir = "/var/lib/pillar-csi/agent";
  std::string exports_dir = "/etc/exports.d";
  std::string nfsd_proc = "/proc/fs/nfsd";
  std::string nfs_etab = "/var/lib/nfs/etab";
  int nfs_etab_debounce_ms = 50;
  std::vector<std::string> protocols = {ProtocolName(Protocol::kNvmeofTcp),
                                        ProtocolName(Protocol::kIscsi),
                                        ProtocolName(Protocol::kNfs)};
  bool no_load_modules = false;
  int epoch_check_seconds = 5;
  std::string log_level = "info";
  std::string ready_file;
  std::string metrics_address;  // HOST:PORT of /metrics; empty: none
  std::string nqn_prefix = kDefaultNqnPrefix;
  std::string iqn_prefix = kDefaultIqnPrefix;
};

// Declares every agent flag on `app`, bound to `options`.
void AddAgentFlags(CLI::App& app, AgentDaemonOptions& options);

// What a binary may put in place of the kernel. The production agent passes
// none: configfs through the real file system, targets loaded by modprobe.
struct AgentDaemonHooks {
  // The file system the nvmet and LIO exporters write configfs through.
  Fs* configfs = nullptr;
  // Loads a protocol's kernel target; when set, replaces modprobe and
  // --no-load-modules.
  std::function<Status(Protocol)> load_target;
  // Runs once logging is up, before any target state is read.
  std::function<Status()> prepare;
};

// Runs the agent until SIGTERM or SIGINT; returns the process exit code
// (0 after a clean stop, 2 when it cannot start).
int RunAgent(const AgentDaemonOptions& options, const AgentDaemonHooks& hooks);

}  // namespace pillar::agent
