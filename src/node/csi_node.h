// The gRPC edge of the node plugin: CSI Identity + Node services, and the
// node-registry client. Checks field presence, converts messages, maps
// Status to gRPC codes; all logic is NodeCore's.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "csi/v1/csi.grpc.pb.h"
#include "node/identity.h"
#include "node/node_core.h"
#include "pillar/registry/v1/registry.grpc.pb.h"

namespace pillar::node {

constexpr const char* kTopologyNodeKey = "topology.pillar-csi.bhyoo.com/node";

class CsiNodeIdentity final : public csi::v1::Identity::Service {
 public:
  grpc::Status GetPluginInfo(grpc::ServerContext*, const csi::v1::GetPluginInfoRequest*,
                             csi::v1::GetPluginInfoResponse* resp) override;
  grpc::Status GetPluginCapabilities(grpc::ServerContext*,
                                     const csi::v1::GetPluginCapabilitiesRequest*,
                                     csi::v1::GetPluginCapabilitiesResponse* resp) override;
  grpc::Status Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                     csi::v1::ProbeResponse* resp) override;
};

class CsiNode final : public csi::v1::Node::Service {
 public:
  CsiNode(NodeCore& core, std::string node_id) : core_(core), node_id_(std::move(node_id)) {}

  grpc::Status NodeStageVolume(grpc::ServerContext*, const csi::v1::NodeStageVolumeRequest* req,
                               csi::v1::NodeStageVolumeResponse*) override;
  grpc::Status NodeUnstageVolume(grpc::ServerContext*, const csi::v1::NodeUnstageVolumeRequest* req,
                                 csi::v1::NodeUnstageVolumeResponse*) override;
  grpc::Status NodePublishVolume(grpc::ServerContext*, const csi::v1::NodePublishVolumeRequest* req,
                                 csi::v1::NodePublishVolumeResponse*) override;
  grpc::Status NodeUnpublishVolume(grpc::ServerContext*,
                                   const csi::v1::NodeUnpublishVolumeRequest* req,
                                   csi::v1::NodeUnpublishVolumeResponse*) override;
  grpc::Status NodeGetVolumeStats(grpc::ServerContext*,
                                  const csi::v1::NodeGetVolumeStatsRequest* req,
                                  csi::v1::NodeGetVolumeStatsResponse* resp) override;
  grpc::Status NodeExpandVolume(grpc::ServerContext*, const csi::v1::NodeExpandVolumeRequest* req,
                                csi::v1::NodeExpandVolumeResponse* resp) override;
  grpc::Status NodeGetCapabilities(grpc::ServerContext*, const csi::v1::NodeGetCapabilitiesRequest*,
                                   csi::v1::NodeGetCapabilitiesResponse* resp) override;
  grpc::Status NodeGetInfo(grpc::ServerContext*, const csi::v1::NodeGetInfoRequest*,
                           csi::v1::NodeGetInfoResponse* resp) override;

 private:
  NodeCore& core_;
  std::string node_id_;
};

class GrpcRegistryClient final : public RegistryClient {
 public:
  // `token_file`, when set, is the pod's projected ServiceAccount token: it is
  // read again for every report (the kubelet rotates it) and sent as
  // "authorization: Bearer <token>", so the controller can check through
  // TokenReview that this plugin reports its own node.
  explicit GrpcRegistryClient(std::function<std::shared_ptr<grpc::Channel>()> make_channel,
                              Fs* fs = nullptr, std::string token_file = "")
      : make_channel_(std::move(make_channel)), fs_(fs), token_file_(std::move(token_file)) {
    Reconnect();
  }
  Status Register(const NodeIdentityInfo& identity) override;
  void Reset() override { Reconnect(); }

 private:
  void Reconnect();
  std::function<std::shared_ptr<grpc::Channel>()> make_channel_;
  Fs* fs_;
  std::string token_file_;
  std::unique_ptr<pillar::registry::v1::NodeRegistry::Stub> stub_;
};

}  // namespace pillar::node
