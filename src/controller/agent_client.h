// The gRPC edge to storage-node agents: AgentClient (agent_api.h) over mutual
// TLS, converting pillar's types to agent.proto and back (agent_proto.h).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/grpc_tls.h"
#include "common/status.h"
#include "controller/agent_api.h"

namespace pillar::controller {

struct AgentTlsConfig {
  bool insecure = false;  // plaintext, demos only
  TlsFiles files;         // the controller's client certificate and the agents' CA
  std::chrono::milliseconds timeout{std::chrono::seconds(15)};
};

// One channel per agent, rebuilt when its endpoint changes; the TLS handshake
// admits only that agent's certificate.
class GrpcAgentDirectory : public AgentDirectory {
 public:
  explicit GrpcAgentDirectory(AgentTlsConfig config) : config_(std::move(config)) {}
  StatusOr<std::shared_ptr<AgentClient>> Client(const std::string& agent_ref,
                                                const AgentEndpoint& endpoint) override;

 private:
  AgentTlsConfig config_;
  std::mutex mu_;
  std::map<std::string, std::pair<AgentEndpoint, std::shared_ptr<AgentClient>>> clients_;
};

}  // namespace pillar::controller
