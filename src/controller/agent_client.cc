#include "controller/agent_client.h"

#include <grpcpp/grpcpp.h>

#include "common/grpc_status.h"
#include "pillar/agent/v1/agent.grpc.pb.h"

namespace pillar::controller {
namespace {

class GrpcAgentClient : public AgentClient {
 public:
  GrpcAgentClient(std::string agent_ref, const std::shared_ptr<grpc::Channel>& channel,
                  std::chrono::milliseconds timeout)
      : agent_ref_(std::move(agent_ref)), stub_(av1::Agent::NewStub(channel)), timeout_(timeout) {}

  StatusOr<av1::GetInfoResponse> GetInfo() override {
    return Call<av1::GetInfoResponse>(&av1::Agent::Stub::GetInfo, av1::GetInfoRequest());
  }
  StatusOr<av1::CreateVolumeResponse> CreateVolume(const av1::CreateVolumeRequest& r) override {
    return Call<av1::CreateVolumeResponse>(&av1::Agent::Stub::CreateVolume, r);
  }
  StatusOr<av1::ExpandVolumeResponse> ExpandVolume(const av1::ExpandVolumeRequest& r) override {
    return Call<av1::ExpandVolumeResponse>(&av1::Agent::Stub::ExpandVolume, r);
  }
  Status DeleteVolume(const av1::DeleteVolumeRequest& r) override {
    return Call<av1::DeleteVolumeResponse>(&av1::Agent::Stub::DeleteVolume, r).status();
  }
  StatusOr<av1::GetCapacityResponse> GetCapacity(const av1::GetCapacityRequest& r) override {
    return Call<av1::GetCapacityResponse>(&av1::Agent::Stub::GetCapacity, r);
  }
  StatusOr<av1::ApplyExportResponse> ApplyExport(const av1::ApplyExportRequest& r) override {
    return Call<av1::ApplyExportResponse>(&av1::Agent::Stub::ApplyExport, r);
  }
  StatusOr<av1::GetExportResponse> GetExport(const av1::GetExportRequest& r) override {
    return Call<av1::GetExportResponse>(&av1::Agent::Stub::GetExport, r);
  }
  StatusOr<av1::ListExportsResponse> ListExports() override {
    return Call<av1::ListExportsResponse>(&av1::Agent::Stub::ListExports,
                                          av1::ListExportsRequest());
  }
  StatusOr<av1::UnexportVolumeResponse> UnexportVolume(
      const av1::UnexportVolumeRequest& r) override {
    return Call<av1::UnexportVolumeResponse>(&av1::Agent::Stub::UnexportVolume, r);
  }

 private:
  template <typename Resp, typename Req, typename Method>
  StatusOr<Resp> Call(Method method, const Req& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    Resp resp;
    grpc::Status s = ((*stub_).*method)(&ctx, req, &resp);
    if (!s.ok()) return FromGrpc(s).Annotate("agent " + agent_ref_);
    return resp;
  }

  std::string agent_ref_;
  std::unique_ptr<av1::Agent::Stub> stub_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

StatusOr<std::shared_ptr<AgentClient>> GrpcAgentDirectory::Client(const std::string& agent_ref,
                                                                  const AgentEndpoint& endpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(agent_ref);
  if (it != clients_.end() && it->second.first == endpoint) return it->second.second;
  if (endpoint.address.empty() || endpoint.port <= 0 || endpoint.port > 65535) {
    return FailedPrecondition("agent " + agent_ref + " has no usable address/port");
  }
  std::string target = endpoint.address.find(':') != std::string::npos
                           ? "[" + endpoint.address + "]:" + std::to_string(endpoint.port)
                           : endpoint.address + ":" + std::to_string(endpoint.port);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  if (config_.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    // Bound to this agent: another agent's, a node's or an operator's
    // certificate is refused in the handshake, whatever host it names.
    ASSIGN_OR_RETURN(
        creds, MutualTlsChannelCredentials(config_.files, ExpectedPeer{Role::kAgent, agent_ref}));
    if (!endpoint.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(endpoint.tls_server_name);
    }
  }
  // Fail fast when an agent is down, so the condition says AgentUnavailable;
  // retry the connection at least once a second, so a restarted agent is
  // reached (and its lost target state rebuilt) within a second of its
  // return, not after a backoff of up to 5 s (issue 28).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = grpc::CreateCustomChannel(target, creds, args);
  auto client = std::make_shared<GrpcAgentClient>(agent_ref, channel, config_.timeout);
  clients_[agent_ref] = {endpoint, client};
  return std::shared_ptr<AgentClient>(client);
}

}  // namespace pillar::controller
