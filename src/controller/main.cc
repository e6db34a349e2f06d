// pillar-controller: CSI Identity + Controller on a unix socket, the node
// registry, and the export reconciler, over the embedded SQLite store or the
// Kubernetes API server. On the Kubernetes store it also installs pillar's
// CRDs when absent, leads through a Lease, binds node reports to their nodes
// with TokenReview, and records Events.
#include <CLI/CLI.hpp>

#include "common/version.h"
#include "controller/controller_daemon.h"

int main(int argc, char** argv) {
  CLI::App app{"pillar-controller: CSI controller, node registry and export reconciler"};
  app.set_version_flag("--version", "pillar-controller " + std::string(pillar::Version()));
  pillar::controller::ControllerDaemonOptions options;
  pillar::controller::AddControllerFlags(app, options);
  CLI11_PARSE(app, argc, argv);
  return pillar::controller::RunController(std::move(options));
}
