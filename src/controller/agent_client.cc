#include "controller/agent_client.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "common/grpc_status.h"
#include "controller/agent_proto.h"
#include "controller/controller_metrics.h"
#include "pillar/agent/v1/agent.grpc.pb.h"

namespace pillar::controller {
namespace {

namespace av1 = pillar::agent::v1;

class GrpcAgentClient : public AgentClient {
 public:
  GrpcAgentClient(std::string agent_ref, const std::shared_ptr<grpc::Channel>& channel,
                  std::chrono::milliseconds timeout)
      : agent_ref_(std::move(agent_ref)), stub_(av1::Agent::NewStub(channel)), timeout_(timeout) {}

  StatusOr<agent_api::Info> GetInfo() override {
    return Answer<av1::GetInfoResponse>(&av1::Agent::Stub::GetInfo, av1::GetInfoRequest());
  }
  StatusOr<agent_api::Volume> CreateVolume(const agent_api::CreateVolumeRequest& r) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<av1::CreateVolumeResponse>(&av1::Agent::Stub::CreateVolume, ToProto(r)));
    return FromProto(resp.volume());
  }
  StatusOr<agent_api::Volume> ExpandVolume(const agent_api::ExpandVolumeRequest& r) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<av1::ExpandVolumeResponse>(&av1::Agent::Stub::ExpandVolume, ToProto(r)));
    return FromProto(resp.volume());
  }
  Status DeleteVolume(const agent_api::DeleteVolumeRequest& r) override {
    return Call<av1::DeleteVolumeResponse>(&av1::Agent::Stub::DeleteVolume, ToProto(r)).status();
  }
  StatusOr<std::vector<agent_api::Pool>> GetCapacity(const std::string& pool) override {
    return Answer<av1::GetCapacityResponse>(&av1::Agent::Stub::GetCapacity,
                                            GetCapacityRequestProto(pool));
  }
  StatusOr<agent_api::ApplyExportResult> ApplyExport(
      const agent_api::ApplyExportRequest& r) override {
    return Answer<av1::ApplyExportResponse>(&av1::Agent::Stub::ApplyExport, ToProto(r));
  }
  StatusOr<std::vector<agent_api::ApplyExportItem>> ApplyExports(
      const std::vector<agent_api::ApplyExportRequest>& rs) override {
    ASSIGN_OR_RETURN(auto resp,
                     Call<av1::ApplyExportsResponse>(&av1::Agent::Stub::ApplyExports, ToProto(rs)));
    return FromProto(resp, rs.size());
  }
  StatusOr<agent_api::Export> GetExport(const std::string& agent_volume_id,
                                        Protocol protocol) override {
    ASSIGN_OR_RETURN(
        auto resp, Call<av1::GetExportResponse>(&av1::Agent::Stub::GetExport,
                                                GetExportRequestProto(agent_volume_id, protocol)));
    return FromProto(resp.export_());
  }
  StatusOr<std::vector<agent_api::Export>> ListExports() override {
    return Answer<av1::ListExportsResponse>(&av1::Agent::Stub::ListExports,
                                            av1::ListExportsRequest());
  }
  StatusOr<std::vector<std::string>> UnexportVolume(
      const agent_api::UnexportVolumeRequest& r) override {
    return Answer<av1::UnexportVolumeResponse>(&av1::Agent::Stub::UnexportVolume, ToProto(r));
  }
  StatusOr<agent_api::Snapshot> CreateSnapshot(const agent_api::CreateSnapshotRequest& r) override {
    ASSIGN_OR_RETURN(auto resp, Call<av1::CreateSnapshotResponse>(&av1::Agent::Stub::CreateSnapshot,
                                                                  ToProto(r)));
    return FromProto(resp.snapshot());
  }
  Status DeleteSnapshot(const agent_api::DeleteSnapshotRequest& r) override {
    return Call<av1::DeleteSnapshotResponse>(&av1::Agent::Stub::DeleteSnapshot, ToProto(r))
        .status();
  }
  StatusOr<std::vector<agent_api::Snapshot>> ListSnapshots(const std::string& pool) override {
    return Answer<av1::ListSnapshotsResponse>(&av1::Agent::Stub::ListSnapshots,
                                              ListSnapshotsRequestProto(pool));
  }

 private:
  template <typename Resp, typename Req, typename Method>
  StatusOr<Resp> Call(Method method, const Req& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    Resp resp;
    const auto start = std::chrono::steady_clock::now();
    grpc::Status s = ((*stub_).*method)(&ctx, req, &resp);
    // The RPC's name is its response's, less "Response" (GetInfoResponse).
    static const std::string rpc = [] {
      std::string n = Resp::descriptor()->name();
      const std::string suffix = "Response";
      if (n.size() > suffix.size() && n.ends_with(suffix)) n.resize(n.size() - suffix.size());
      return n;
    }();
    Status st = s.ok() ? Status::Ok() : FromGrpc(s);
    ControllerMetrics::Get().AgentCall(rpc, metrics::GrpcCodeLabel(static_cast<int>(st.code())),
                                       metrics::SecondsSince(start));
    if (!s.ok()) return st.Annotate("agent " + agent_ref_);
    return resp;
  }
  // Call, and the whole answer in pillar's types.
  template <typename Resp, typename Req, typename Method>
  auto Answer(Method method, const Req& req)
      -> StatusOr<decltype(FromProto(std::declval<Resp>()))> {
    ASSIGN_OR_RETURN(auto resp, (Call<Resp>(method, req)));
    return FromProto(resp);
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
