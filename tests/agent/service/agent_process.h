// Runs the agent binary on the simulated configfs (pillar-agent-sim: the
// production wiring, ConfigfsSim in place of the kernel's configfs) as a child
// process for integration tests, with mutual TLS certificates made by
// tests/tools/make-certs.sh.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.h"
#include "common/grpc_tls.h"
#include "common/loop_devices.h"
#include "common/temp_dir.h"
#include "pillar/agent/v1/agent.grpc.pb.h"

namespace pillar::testing {

class AgentProcess {
 public:
  // `dir` holds certs/, configfs/, state/, pools/ and the agent's log.
  explicit AgentProcess(std::string dir) : dir_(std::move(dir)) {}
  // Stops the agent, then detaches the loop devices its block volumes left
  // attached (a real storage node keeps them; a test does not).
  ~AgentProcess() {
    child_.Stop();
    DetachLoopDevicesUnder(dir_);
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  static bool MakeCerts(const std::string& dir) {
    std::string cmd = std::string(PILLAR_SOURCE_DIR) + "/tests/tools/make-certs.sh " + dir;
    return std::system(cmd.c_str()) == 0;  // NOLINT(cert-env33-c): test-only fixed script
  }

  // Certificates made under `dir`/certs, then the agent started; nullptr
  // when either failed (the agent's log is `dir`/agent.log).
  static std::unique_ptr<AgentProcess> StartWithCerts(const std::string& dir) {
    if (!MakeCerts(dir + "/certs")) return nullptr;
    auto agent = std::make_unique<AgentProcess>(dir);
    if (!agent->Start()) return nullptr;
    return agent;
  }

  // Starts the agent with a file pool "demo" and simulated configfs; extra
  // flags are appended. A restart reuses the first start's port, as a
  // rebooted storage node keeps its address. Returns false when it did not
  // come up in time.
  bool Start(const std::vector<std::string>& extra = {}) {
    std::string ready = dir_ + "/ready";
    std::vector<std::string> args = {PILLAR_AGENT_SIM_BIN,
                                     "--listen=127.0.0.1:" + std::to_string(port_),
                                     "--ready-file=" + ready,
                                     "--tls-cert=" + dir_ + "/certs/" + cert_ + ".crt",
                                     "--tls-key=" + dir_ + "/certs/" + cert_ + ".key",
                                     "--tls-ca=" + dir_ + "/certs/ca.crt",
                                     "--node-name=storage-1",
                                     "--pool=demo=file:" + dir_ + "/pools/demo",
                                     "--configfs-root=" + dir_ + "/configfs",
                                     "--state-dir=" + dir_ + "/state",
                                     "--exports-dir=" + dir_ + "/exports.d",
                                     "--nfsd-proc=" + dir_ + "/nfsd",
                                     "--epoch-check-interval=1",
                                     "--log-level=warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.begin(), prefix_.begin(), prefix_.end());
    int port = child_.StartAndWaitForPort(args, dir_ + "/agent.log", ready);
    if (port > 0) port_ = port;
    return port > 0;
  }

  void Stop() { child_.Stop(); }

  // The next Start runs the agent under this command (prlimit, ...).
  void RunUnder(std::vector<std::string> prefix) { prefix_ = std::move(prefix); }

  // The next Start presents certs/`name`.crt (default "agent", storage-1's).
  void UseCert(std::string name) { cert_ = std::move(name); }

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // A client presenting `cert_name`.crt/.key from certs/ (controller, rogue).
  std::unique_ptr<pillar::agent::v1::Agent::Stub> Client(
      const std::string& cert_name = "controller", const std::string& ca = "ca") const {
    TlsFiles files{dir_ + "/certs/" + cert_name + ".crt", dir_ + "/certs/" + cert_name + ".key",
                   dir_ + "/certs/" + ca + ".crt"};
    auto creds = MutualTlsChannelCredentials(files);
    if (!creds.ok()) return nullptr;
    return pillar::agent::v1::Agent::NewStub(grpc::CreateChannel(address(), *creds));
  }

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string cert_ = "agent";
  std::vector<std::string> prefix_;
  ChildProcess child_;
  int port_ = 0;
};

}  // namespace pillar::testing
