// pillar-agent: the storage-node agent. Serves agent.proto over mutual TLS
// (plaintext only with --insecure, for local demos) on top of the node's pools
// and the kernel's own targets.
#include <CLI/CLI.hpp>

#include "agent/agent_daemon.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"pillar-agent: storage-node agent"};
  app.set_version_flag("--version", "pillar-agent " + std::string(pillar::Version()));
  pillar::agent::AgentDaemonOptions options;
  pillar::agent::AddAgentFlags(app, options);
  CLI11_PARSE(app, argc, argv);
  return pillar::agent::RunAgent(options, {});
}
