#include "node/csi_node.h"

#include <chrono>

#include "common/grpc_status.h"
#include "common/log.h"
#include "common/request_caps.h"
#include "common/version.h"

namespace pillar::node {
namespace {

using csi::v1::VolumeCapability;

struct Capability {
  bool block = false;
  std::string fs_type;
  std::vector<std::string> mount_flags;
  bool read_only_mode = false;
};

StatusOr<Capability> ParseCapability(const csi::v1::VolumeCapability& cap, bool present) {
  if (!present) return InvalidArgument("volume_capability is required");
  Capability out;
  switch (cap.access_type_case()) {
    case VolumeCapability::kBlock:
      out.block = true;
      break;
    case VolumeCapability::kMount:
      out.fs_type = cap.mount().fs_type();
      out.mount_flags.assign(cap.mount().mount_flags().begin(), cap.mount().mount_flags().end());
      break;
    default:
      return InvalidArgument("volume_capability.access_type (block or mount) is required");
  }
  auto mode = cap.access_mode().mode();
  out.read_only_mode = mode == VolumeCapability::AccessMode::SINGLE_NODE_READER_ONLY ||
                       mode == VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY;
  return out;
}

Context Merge(const google::protobuf::Map<std::string, std::string>& volume_ctx,
              const google::protobuf::Map<std::string, std::string>& publish_ctx) {
  Context out(volume_ctx.begin(), volume_ctx.end());
  for (const auto& [k, v] : publish_ctx) out[k] = v;
  return out;
}

grpc::Status Reply(const Status& s, const char* rpc, const std::string& volume_id) {
  if (!s.ok()) {
    log::Warn(std::string(rpc) + " failed",
              {{"volume", volume_id}, {"code", CodeName(s.code())}, {"error", s.message()}});
  }
  return ToGrpc(s);
}

}  // namespace

grpc::Status CsiNodeIdentity::GetPluginInfo(grpc::ServerContext*,
                                            const csi::v1::GetPluginInfoRequest*,
                                            csi::v1::GetPluginInfoResponse* resp) {
  resp->set_name(std::string(kDriverName));
  resp->set_vendor_version(std::string(Version()));
  return grpc::Status::OK;
}

grpc::Status CsiNodeIdentity::GetPluginCapabilities(grpc::ServerContext*,
                                                    const csi::v1::GetPluginCapabilitiesRequest*,
                                                    csi::v1::GetPluginCapabilitiesResponse* resp) {
  // The plugin's capabilities, whichever of its processes answers: pillar
  // provides the Controller service (from pillar-controller), and a CO or
  // csi-sanity asking the node plugin decides from this whether to call
  // ControllerPublishVolume before NodeStageVolume.
  resp->add_capabilities()->mutable_service()->set_type(
      csi::v1::PluginCapability::Service::CONTROLLER_SERVICE);
  resp->add_capabilities()->mutable_volume_expansion()->set_type(
      csi::v1::PluginCapability::VolumeExpansion::ONLINE);
  return grpc::Status::OK;
}

grpc::Status CsiNodeIdentity::Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                                    csi::v1::ProbeResponse* resp) {
  resp->mutable_ready()->set_value(true);
  return grpc::Status::OK;
}

grpc::Status CsiNode::NodeStageVolume(grpc::ServerContext*,
                                      const csi::v1::NodeStageVolumeRequest* req,
                                      csi::v1::NodeStageVolumeResponse*) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  auto run = [&]() -> Status {
    if (req->volume_id().empty()) return InvalidArgument("volume_id is required");
    if (req->staging_target_path().empty()) {
      return InvalidArgument("staging_target_path is required");
    }
    ASSIGN_OR_RETURN(Capability cap,
                     ParseCapability(req->volume_capability(), req->has_volume_capability()));
    StageRequest s;
    s.volume_id = req->volume_id();
    s.staging_path = req->staging_target_path();
    s.block = cap.block;
    s.fs_type = cap.fs_type;
    s.mount_flags = cap.mount_flags;
    s.context = Merge(req->volume_context(), req->publish_context());
    s.read_only = cap.read_only_mode || s.context["readonly"] == "true";
    s.secrets.insert(req->secrets().begin(), req->secrets().end());
    return core_.Stage(s);
  };
  return Reply(run(), "NodeStageVolume", req->volume_id());
}

grpc::Status CsiNode::NodeUnstageVolume(grpc::ServerContext*,
                                        const csi::v1::NodeUnstageVolumeRequest* req,
                                        csi::v1::NodeUnstageVolumeResponse*) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  auto run = [&]() -> Status {
    if (req->volume_id().empty()) return InvalidArgument("volume_id is required");
    if (req->staging_target_path().empty()) {
      return InvalidArgument("staging_target_path is required");
    }
    return core_.Unstage(req->volume_id(), req->staging_target_path());
  };
  return Reply(run(), "NodeUnstageVolume", req->volume_id());
}

grpc::Status CsiNode::NodePublishVolume(grpc::ServerContext*,
                                        const csi::v1::NodePublishVolumeRequest* req,
                                        csi::v1::NodePublishVolumeResponse*) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  auto run = [&]() -> Status {
    if (req->volume_id().empty()) return InvalidArgument("volume_id is required");
    if (req->staging_target_path().empty()) {
      return InvalidArgument("staging_target_path is required");
    }
    if (req->target_path().empty()) return InvalidArgument("target_path is required");
    ASSIGN_OR_RETURN(Capability cap,
                     ParseCapability(req->volume_capability(), req->has_volume_capability()));
    PublishRequest p;
    p.volume_id = req->volume_id();
    p.staging_path = req->staging_target_path();
    p.target_path = req->target_path();
    p.block = cap.block;
    p.read_only = req->readonly() || cap.read_only_mode;
    p.mount_flags = cap.mount_flags;
    return core_.Publish(p);
  };
  return Reply(run(), "NodePublishVolume", req->volume_id());
}

grpc::Status CsiNode::NodeUnpublishVolume(grpc::ServerContext*,
                                          const csi::v1::NodeUnpublishVolumeRequest* req,
                                          csi::v1::NodeUnpublishVolumeResponse*) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  auto run = [&]() -> Status {
    if (req->volume_id().empty()) return InvalidArgument("volume_id is required");
    if (req->target_path().empty()) return InvalidArgument("target_path is required");
    return core_.Unpublish(req->volume_id(), req->target_path());
  };
  return Reply(run(), "NodeUnpublishVolume", req->volume_id());
}

grpc::Status CsiNode::NodeGetVolumeStats(grpc::ServerContext*,
                                         const csi::v1::NodeGetVolumeStatsRequest* req,
                                         csi::v1::NodeGetVolumeStatsResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  auto run = [&]() -> Status {
    if (req->volume_id().empty()) return InvalidArgument("volume_id is required");
    if (req->volume_path().empty()) return InvalidArgument("volume_path is required");
    ASSIGN_OR_RETURN(VolumeStats st, core_.Stats(req->volume_id(), req->volume_path()));
    if (st.has_usage) {
      auto* bytes = resp->add_usage();
      bytes->set_unit(csi::v1::VolumeUsage::BYTES);
      bytes->set_total(st.total_bytes);
      bytes->set_available(st.available_bytes);
      bytes->set_used(st.used_bytes);
      if (!st.block) {
        auto* inodes = resp->add_usage();
        inodes->set_unit(csi::v1::VolumeUsage::INODES);
        inodes->set_total(st.total_inodes);
        inodes->set_available(st.free_inodes);
        inodes->set_used(st.used_inodes);
      }
    }
    resp->mutable_volume_condition()->set_abnormal(st.abnormal);
    resp->mutable_volume_condition()->set_message(st.message);
    return Status::Ok();
  };
  return Reply(run(), "NodeGetVolumeStats", req->volume_id());
}

grpc::Status CsiNode::NodeExpandVolume(grpc::ServerContext*,
                                       const csi::v1::NodeExpandVolumeRequest* req,
                                       csi::v1::NodeExpandVolumeResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  auto run = [&]() -> Status {
    if (req->volume_id().empty()) return InvalidArgument("volume_id is required");
    if (req->volume_path().empty()) return InvalidArgument("volume_path is required");
    ASSIGN_OR_RETURN(int64_t size, core_.Expand(req->volume_id(), req->volume_path(),
                                                req->capacity_range().required_bytes()));
    resp->set_capacity_bytes(size);
    return Status::Ok();
  };
  return Reply(run(), "NodeExpandVolume", req->volume_id());
}

grpc::Status CsiNode::NodeGetCapabilities(grpc::ServerContext*,
                                          const csi::v1::NodeGetCapabilitiesRequest*,
                                          csi::v1::NodeGetCapabilitiesResponse* resp) {
  using T = csi::v1::NodeServiceCapability::RPC;
  for (auto type :
       {T::STAGE_UNSTAGE_VOLUME, T::GET_VOLUME_STATS, T::VOLUME_CONDITION, T::EXPAND_VOLUME}) {
    resp->add_capabilities()->mutable_rpc()->set_type(type);
  }
  return grpc::Status::OK;
}

grpc::Status CsiNode::NodeGetInfo(grpc::ServerContext*, const csi::v1::NodeGetInfoRequest*,
                                  csi::v1::NodeGetInfoResponse* resp) {
  resp->set_node_id(node_id_);
  (*resp->mutable_accessible_topology()->mutable_segments())[kTopologyNodeKey] = node_id_;
  return grpc::Status::OK;
}

Status GrpcRegistryClient::Register(const NodeIdentityInfo& identity) {
  pillar::registry::v1::RegisterNodeRequest req;
  auto* id = req.mutable_identity();
  id->set_node_id(identity.node_id);
  id->set_host_nqn(identity.host_nqn);
  id->set_initiator_iqn(identity.initiator_iqn);
  for (const auto& a : identity.ip_addresses) id->add_ip_addresses(a);
  pillar::registry::v1::RegisterNodeResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (fs_ != nullptr && !token_file_.empty()) {
    ASSIGN_OR_RETURN(std::string token, fs_->ReadFile(token_file_));
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (token.empty())
      return Unauthenticated("ServiceAccount token file " + token_file_ + " is empty");
    ctx.AddMetadata("authorization", "Bearer " + token);
  }
  Status s = FromGrpc(stub_->RegisterNode(&ctx, req, &resp)).Annotate("register node");
  // A failed call may sit on a connection that can never work again (its
  // local address is gone after an IP change): start over on a new one.
  if (!s.ok()) Reconnect();
  return s;
}

void GrpcRegistryClient::Reconnect() {
  stub_ = pillar::registry::v1::NodeRegistry::NewStub(make_channel_());
}

}  // namespace pillar::node
