// pillar-agent-sim: pillar-agent on a SIMULATED configfs (ConfigfsSim in a
// plain directory at --configfs-root), for the integration tests, benchmarks
// and the local demo on hosts without nvmet or LIO. No kernel target serves
// what it exports. The production pillar-agent cannot do this.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "agent/agent_daemon.h"
#include "common/fs.h"
#include "common/log.h"
#include "testing/configfs_sim.h"

int main(int argc, char** argv) {
  CLI::App app{
      "pillar-agent-sim: pillar-agent on a SIMULATED configfs (tests and demos only; no kernel "
      "target serves its exports)"};
  pillar::agent::AgentDaemonOptions options;
  pillar::agent::AddAgentFlags(app, options);
  CLI11_PARSE(app, argc, argv);
  std::fprintf(stderr,
               "pillar-agent-sim: configfs is SIMULATED in %s; no kernel target serves these "
               "exports (tests and demos only)\n",
               options.configfs_root.c_str());

  pillar::testing::ConfigfsSim sim(options.configfs_root);
  pillar::agent::AgentDaemonHooks hooks;
  hooks.configfs = &sim;
  hooks.load_target = [&sim](pillar::Protocol p) { return sim.LoadTarget(p); };
  hooks.prepare = [&]() -> pillar::Status {
    pillar::log::Warn(
        "configfs is SIMULATED: exports are written to a plain directory, no kernel target "
        "serves them",
        {{"root", options.configfs_root}});
    pillar::PosixFs fs;
    RETURN_IF_ERROR(fs.MakeDirs(options.configfs_root));
    // A simulated node boots with its targets loaded, as modules-load.d would.
    RETURN_IF_ERROR(sim.LoadNvmet());
    return sim.LoadLio();
  };
  return pillar::agent::RunAgent(options, hooks);
}
