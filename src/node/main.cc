// pillar-node: CSI Identity + Node on a unix socket, identity reporting to
// the controller's node registry, and the self-healing loop.
#include <CLI/CLI.hpp>

#include "common/version.h"
#include "node/node_daemon.h"

int main(int argc, char** argv) {
  CLI::App app{"pillar-node: CSI node plugin (NVMe-oF/TCP, iSCSI, NFS)"};
  app.set_version_flag("--version", "pillar-node " + std::string(pillar::Version()));
  pillar::node::NodeDaemonOptions options;
  pillar::node::AddNodeFlags(app, options);
  CLI11_PARSE(app, argc, argv);
  return pillar::node::RunNode(std::move(options));
}
