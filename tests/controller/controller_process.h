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

#include "csi/v1/csi.grpc.pb.h"
#include "pillar/registry/v1/registry.grpc.pb.h"

namespace pillar::testing {

class ControllerProcess {
 public:
  explicit ControllerProcess(std::string dir) : dir_(std::move(dir)) {}
  ~ControllerProcess() { Stop(); }

  bool Start(int agent_port, const std::vector<std::string>& extra = {}) {
    std::string ready = dir_ + "/controller.ready";
    unlink(ready.c_str());
    std::vector<std::string> args = {PILLAR_CONTROLLER_BIN,
                                     "--csi-endpoint=unix://" + csi_socket(),
                                     "--registry-listen=127.0.0.1:0",
                                     "--registry-insecure",
                                     "--store=" + store_path(),
                                     "--agent=storage-1=127.0.0.1:" + std::to_string(agent_port),
                                     "--agent-tls-cert=" + dir_ + "/certs/controller.crt",
                                     "--agent-tls-key=" + dir_ + "/certs/controller.key",
                                     "--agent-tls-ca=" + dir_ + "/certs/ca.crt",
                                     "--resync-interval=2",
                                     "--epoch-poll-interval=1",
                                     "--ready-file=" + ready,
                                     "--log-level=info"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::string log = dir_ + "/controller.log";
      FILE* f = freopen(log.c_str(), "a", stderr);
      (void)f;
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      std::ifstream in(ready);
      int port = 0;
      if (in >> port && port > 0) {
        registry_port_ = port;
        return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

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
  pid_t pid_ = -1;
  int registry_port_ = 0;
};

}  // namespace pillar::testing
