// Runs the real pillar-controller binary for integration tests, against an
// agent started with AgentProcess, and gives CSI, registry and store access.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/child_process.h"
#include "csi/v1/csi.grpc.pb.h"
#include "pillar/registry/v1/registry.grpc.pb.h"

namespace pillar::testing {

class ControllerProcess {
 public:
  explicit ControllerProcess(std::string dir) : dir_(std::move(dir)) {}

  bool Start(int agent_port, const std::vector<std::string>& extra = {}) {
    std::string ready = dir_ + "/controller.ready";
    std::vector<std::string> args = {PILLAR_CONTROLLER_BIN,
                                     "--csi-endpoint=unix://" + csi_socket(),
                                     "--registry-listen=127.0.0.1:0",
                                     "--store=" + store_path(),
                                     "--agent=storage-1=127.0.0.1:" + std::to_string(agent_port),
                                     "--agent-tls-cert=" + dir_ + "/certs/controller.crt",
                                     "--agent-tls-key=" + dir_ + "/certs/controller.key",
                                     "--agent-tls-ca=" + dir_ + "/certs/ca.crt",
                                     "--resync-interval=2",
                                     "--epoch-poll-interval=1",
                                     "--ready-file=" + ready,
                                     "--log-level=info"};
    if (registry_tls_) {
      // The controller's certificate (127.0.0.1 among its SANs) serves the registry.
      args.insert(args.end(), {"--registry-tls-cert=" + dir_ + "/certs/controller.crt",
                               "--registry-tls-key=" + dir_ + "/certs/controller.key",
                               "--registry-tls-ca=" + dir_ + "/certs/ca.crt"});
    } else {
      args.emplace_back("--registry-insecure");
    }
    args.insert(args.end(), extra.begin(), extra.end());
    registry_port_ = child_.StartAndWaitForPort(args, dir_ + "/controller.log", ready);
    return registry_port_ > 0;
  }

  void Stop() { child_.Stop(); }

  // Serve the registry over mutual TLS (certs/ from make-certs.sh) instead of
  // plaintext; call before Start.
  void UseRegistryTls() { registry_tls_ = true; }
  int registry_port() const { return registry_port_; }

  std::string csi_socket() const { return dir_ + "/csi.sock"; }
  std::string store_path() const { return dir_ + "/store.db"; }

  std::unique_ptr<csi::v1::Controller::Stub> Csi() const {
    return csi::v1::Controller::NewStub(
        grpc::CreateChannel("unix:" + csi_socket(), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<csi::v1::Identity::Stub> Identity() const {
    return csi::v1::Identity::NewStub(
        grpc::CreateChannel("unix:" + csi_socket(), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<pillar::registry::v1::NodeRegistry::Stub> Registry() const {
    return pillar::registry::v1::NodeRegistry::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(registry_port_), grpc::InsecureChannelCredentials()));
  }

 private:
  std::string dir_;
  ChildProcess child_;
  int registry_port_ = 0;
  bool registry_tls_ = false;
};

}  // namespace pillar::testing
