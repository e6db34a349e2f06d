// How the controller reaches storage-node agents. The interface exists so the
// reconciler's unit tests can script an agent; production uses GrpcAgentClient
// over mutual TLS, and integration tests use it against the real agent.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/grpc_tls.h"
#include "common/status.h"
#include "pillar/agent/v1/agent.pb.h"

namespace pillar::controller {

namespace av1 = pillar::agent::v1;

// Every call maps gRPC failures to Status: ABORTED means a fencing refusal
// (the agent uses ABORTED for nothing else); UNAVAILABLE / DEADLINE_EXCEEDED
// mean the agent cannot be reached.
class AgentClient {
 public:
  virtual ~AgentClient() = default;
  virtual StatusOr<av1::GetInfoResponse> GetInfo() = 0;
  virtual StatusOr<av1::CreateVolumeResponse> CreateVolume(const av1::CreateVolumeRequest& r) = 0;
  virtual StatusOr<av1::ExpandVolumeResponse> ExpandVolume(const av1::ExpandVolumeRequest& r) = 0;
  virtual Status DeleteVolume(const av1::DeleteVolumeRequest& r) = 0;
  virtual StatusOr<av1::GetCapacityResponse> GetCapacity(const av1::GetCapacityRequest& r) = 0;
  virtual StatusOr<av1::ApplyExportResponse> ApplyExport(const av1::ApplyExportRequest& r) = 0;
  virtual StatusOr<av1::GetExportResponse> GetExport(const av1::GetExportRequest& r) = 0;
  virtual StatusOr<av1::ListExportsResponse> ListExports() = 0;
  virtual StatusOr<av1::UnexportVolumeResponse> UnexportVolume(
      const av1::UnexportVolumeRequest& r) = 0;
};

struct AgentEndpoint {
  std::string address;
  int64_t port = 0;
  std::string tls_server_name;

  bool operator==(const AgentEndpoint&) const = default;
};

// Resolves an agentRef to a client; implementations cache connections and
// rebuild them when the endpoint changes.
class AgentDirectory {
 public:
  virtual ~AgentDirectory() = default;
  virtual StatusOr<std::shared_ptr<AgentClient>> Client(const std::string& agent_ref,
                                                        const AgentEndpoint& endpoint) = 0;
};

struct AgentTlsConfig {
  bool insecure = false;  // plaintext, demos only
  TlsFiles files;         // the controller's client certificate and the agents' CA
  std::chrono::milliseconds timeout{std::chrono::seconds(15)};
};

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
