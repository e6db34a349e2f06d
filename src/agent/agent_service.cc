#include "agent/agent_service.h"

#include "agent/agent_metrics.h"
#include "common/grpc_status.h"
#include "common/protocol_proto.h"

namespace pillar::agent {
namespace {

StatusOr<VolumeMode> ModeFromProto(v1::VolumeMode m) {
  switch (m) {
    case v1::VOLUME_MODE_BLOCK:
      return VolumeMode::kBlock;
    case v1::VOLUME_MODE_FILESYSTEM:
      return VolumeMode::kFilesystem;
    default:
      return InvalidArgument("mode is unspecified or unknown");
  }
}

v1::VolumeMode ModeToProto(VolumeMode m) {
  return m == VolumeMode::kBlock ? v1::VOLUME_MODE_BLOCK : v1::VOLUME_MODE_FILESYSTEM;
}

void FillVolume(const VolumeInfo& in, v1::Volume* out) {
  out->set_agent_volume_id(in.agent_volume_id);
  out->set_pool(in.pool);
  out->set_name(in.volume.name);
  out->set_size_bytes(in.volume.size_bytes);
  out->set_mode(ModeToProto(in.volume.mode));
  out->set_backend(in.backend);
  out->set_device_path(in.volume.device_path);
  out->set_export_path(in.volume.export_path);
  out->set_volume_uid(in.volume_uid);
  out->set_owner_uid(in.volume.owner_uid);
  out->set_pending(in.volume.pending);
  out->set_origin(in.volume.origin);
}

void FillSnapshot(const SnapshotInfo& in, v1::Snapshot* out) {
  out->set_agent_snapshot_id(in.agent_snapshot_id);
  out->set_pool(in.pool);
  out->set_name(in.snapshot.name);
  out->set_source_volume_id(in.SourceVolumeId());
  out->set_size_bytes(in.snapshot.size_bytes);
  out->set_creation_time_unix_nanos(in.snapshot.creation_time_unix_nanos);
  out->set_backend(in.backend);
  out->set_owner_uid(in.snapshot.owner_uid);
  // Every snapshot a backend lists is complete: each is made in one step.
  out->set_ready_to_use(true);
  out->set_used_bytes(in.snapshot.used_bytes);
  out->set_detached(in.snapshot.detached);
}

void FillPool(const PoolInfo& in, v1::Pool* out) {
  out->set_name(in.name);
  out->set_backend(in.backend);
  out->set_total_bytes(in.capacity.total_bytes);
  out->set_available_bytes(in.capacity.available_bytes);
  for (VolumeMode m : in.modes) out->add_modes(ModeToProto(m));
}

void FillExport(const ExportReport& in, v1::Export* out) {
  out->set_agent_volume_id(in.actual.agent_volume_id);
  out->set_protocol(pillar::ToProto(in.protocol));
  out->set_target_id(in.actual.target_id);
  auto* spec = out->mutable_spec();
  spec->set_bind_address(in.actual.params.bind_address);
  spec->set_port(in.actual.params.port);
  spec->set_acl_enabled(in.actual.params.acl_enabled);
  spec->set_in_capsule_data_size(in.actual.params.in_capsule_data_size);
  spec->set_auth(in.actual.params.auth);
  spec->set_auth_digest(in.actual.params.auth_digest);
  spec->set_nfs_no_root_squash(!in.actual.params.root_squash);
  for (const auto& h : in.actual.allowed_hosts) out->add_allowed_hosts(h);
  out->set_backing(in.actual.backing);
  out->set_enabled(in.actual.enabled);
  if (in.fence) {
    out->mutable_fence()->set_volume_uid(in.fence->volume_uid);
    out->mutable_fence()->set_publication_generation(in.fence->publication_generation);
  }
}

FenceToken FenceFromProto(const v1::Fence& f) {
  return {f.volume_uid(), f.publication_generation()};
}

// Fencing refusals carry a machine-readable reason beside code ABORTED.
grpc::Status Reply(grpc::ServerContext* ctx, const Status& s) {
  if (s.code() == Code::kAborted) {
    ctx->AddTrailingMetadata("pillar-reason", "StaleGeneration");
    AgentMetrics::Get().fencing_refusals.Increment();
  }
  return ToGrpc(s);
}

// ApplyExport's request as the core takes it; INVALID_ARGUMENT names the field.
StatusOr<ApplyExportRequest> ApplyFromProto(const v1::ApplyExportRequest& req) {
  ASSIGN_OR_RETURN(Protocol protocol, pillar::FromProto("protocol", req.protocol()));
  if (!req.has_spec()) return InvalidArgument("spec is required");
  if (!req.has_fence()) return InvalidArgument("fence is required");
  ApplyExportRequest apply;
  apply.agent_volume_id = req.agent_volume_id();
  apply.protocol = protocol;
  apply.params = ExportParams{req.spec().bind_address(), req.spec().port(),
                              req.spec().acl_enabled(), req.spec().in_capsule_data_size()};
  apply.params.auth = req.spec().auth().empty() ? kAuthNone : req.spec().auth();
  apply.params.auth_digest = req.spec().auth_digest();
  apply.params.root_squash = !req.spec().nfs_no_root_squash();
  if (req.has_credentials()) {
    const auto& c = req.credentials();
    apply.credentials =
        Credentials{c.username(), c.secret(), c.mutual_username(), c.mutual_secret()};
  }
  apply.fence = FenceFromProto(req.fence());
  apply.allowed_hosts.assign(req.allowed_hosts().begin(), req.allowed_hosts().end());
  return apply;
}

}  // namespace

grpc::Status AgentService::GetInfo(grpc::ServerContext* /*ctx*/, const v1::GetInfoRequest* /*req*/,
                                   v1::GetInfoResponse* resp) {
  AgentInfo info = core_.Info();
  resp->set_node_name(info.node_name);
  resp->set_agent_version(info.version);
  resp->set_boot_epoch(info.boot_epoch);
  for (const auto& p : info.pools) FillPool(p, resp->add_pools());
  for (Protocol p : info.protocols) resp->add_protocols(pillar::ToProto(p));
  return grpc::Status::OK;
}

grpc::Status AgentService::CreateVolume(grpc::ServerContext* ctx,
                                        const v1::CreateVolumeRequest* req,
                                        v1::CreateVolumeResponse* resp) {
  auto mode = ModeFromProto(req->mode());
  if (!mode.ok()) return Reply(ctx, mode.status());
  CreateVolumeRequest create;
  create.pool = req->pool();
  create.name = req->name();
  create.size_bytes = req->size_bytes();
  create.mode = *mode;
  create.volume_uid = req->volume_uid();
  create.params.insert(req->parameters().begin(), req->parameters().end());
  create.import_existing = req->import_existing();
  if (req->has_root()) {
    create.root = VolumeRoot{req->root().mode(), req->root().uid(), req->root().gid()};
  }
  if (req->has_source()) {
    const auto& src = req->source();
    create.source = VolumeSourceRequest{src.agent_snapshot_id(), src.agent_volume_id(),
                                        src.source_uid(), src.detached()};
  }
  auto vol = core_.CreateVolume(create);
  if (!vol.ok()) return Reply(ctx, vol.status());
  FillVolume(*vol, resp->mutable_volume());
  return grpc::Status::OK;
}

grpc::Status AgentService::ExpandVolume(grpc::ServerContext* ctx,
                                        const v1::ExpandVolumeRequest* req,
                                        v1::ExpandVolumeResponse* resp) {
  auto vol = core_.ExpandVolume(req->agent_volume_id(), req->size_bytes(), req->volume_uid());
  if (!vol.ok()) return Reply(ctx, vol.status());
  FillVolume(*vol, resp->mutable_volume());
  return grpc::Status::OK;
}

grpc::Status AgentService::DeleteVolume(grpc::ServerContext* ctx,
                                        const v1::DeleteVolumeRequest* req,
                                        v1::DeleteVolumeResponse* /*resp*/) {
  return Reply(ctx, core_.DeleteVolume(req->agent_volume_id(), req->volume_uid()));
}

grpc::Status AgentService::ListVolumes(grpc::ServerContext* ctx, const v1::ListVolumesRequest* req,
                                       v1::ListVolumesResponse* resp) {
  auto vols = core_.ListVolumes(req->pool());
  if (!vols.ok()) return Reply(ctx, vols.status());
  for (const auto& v : *vols) FillVolume(v, resp->add_volumes());
  return grpc::Status::OK;
}

grpc::Status AgentService::GetCapacity(grpc::ServerContext* ctx, const v1::GetCapacityRequest* req,
                                       v1::GetCapacityResponse* resp) {
  auto pools = core_.Capacity(req->pool());
  if (!pools.ok()) return Reply(ctx, pools.status());
  for (const auto& p : *pools) FillPool(p, resp->add_pools());
  return grpc::Status::OK;
}

grpc::Status AgentService::ApplyExport(grpc::ServerContext* ctx, const v1::ApplyExportRequest* req,
                                       v1::ApplyExportResponse* resp) {
  auto apply = ApplyFromProto(*req);
  if (!apply.ok()) return Reply(ctx, apply.status());
  std::vector<std::string> changes;
  auto exp = core_.ApplyExport(*apply, &changes);
  if (!exp.ok()) return Reply(ctx, exp.status());
  FillExport(*exp, resp->mutable_export_());
  for (auto& c : changes) resp->add_changes(std::move(c));
  return grpc::Status::OK;
}

grpc::Status AgentService::ApplyExports(grpc::ServerContext* ctx,
                                        const v1::ApplyExportsRequest* req,
                                        v1::ApplyExportsResponse* resp) {
  if (req->exports_size() > kMaxApplyExports) {
    return Reply(
        ctx, InvalidArgument("exports has " + std::to_string(req->exports_size()) +
                             " items; at most " + std::to_string(kMaxApplyExports) + " per call"));
  }
  // A malformed item answers for itself; the others are still applied.
  std::vector<ApplyExportRequest> items;
  std::vector<int> item_of;  // index into items per request item, -1 when malformed
  std::vector<Status> malformed(req->exports_size());
  for (int i = 0; i < req->exports_size(); ++i) {
    auto apply = ApplyFromProto(req->exports(i));
    if (!apply.ok()) {
      malformed[i] = apply.status().Annotate("exports[" + std::to_string(i) + "]");
      item_of.push_back(-1);
      continue;
    }
    item_of.push_back(static_cast<int>(items.size()));
    items.push_back(std::move(*apply));
  }
  auto outcomes = core_.ApplyExports(items);
  for (int i = 0; i < req->exports_size(); ++i) {
    v1::ApplyExportResult* r = resp->add_results();
    r->set_agent_volume_id(req->exports(i).agent_volume_id());
    Status status = item_of[i] < 0 ? malformed[i] : outcomes[item_of[i]].status;
    if (status.code() == Code::kAborted) AgentMetrics::Get().fencing_refusals.Increment();
    r->set_code(static_cast<int32_t>(status.code()));
    r->set_message(status.message());
    if (item_of[i] < 0) continue;
    ApplyExportOutcome& o = outcomes[item_of[i]];
    if (o.report) FillExport(*o.report, r->mutable_export_());
    for (auto& c : o.changes) r->add_changes(std::move(c));
  }
  return grpc::Status::OK;
}

grpc::Status AgentService::GetExport(grpc::ServerContext* ctx, const v1::GetExportRequest* req,
                                     v1::GetExportResponse* resp) {
  auto protocol = pillar::FromProto("protocol", req->protocol());
  if (!protocol.ok()) return Reply(ctx, protocol.status());
  auto exp = core_.GetExport(req->agent_volume_id(), *protocol);
  if (!exp.ok()) return Reply(ctx, exp.status());
  FillExport(*exp, resp->mutable_export_());
  return grpc::Status::OK;
}

grpc::Status AgentService::ListExports(grpc::ServerContext* ctx,
                                       const v1::ListExportsRequest* /*req*/,
                                       v1::ListExportsResponse* resp) {
  auto list = core_.ListExports();
  if (!list.ok()) return Reply(ctx, list.status());
  for (const auto& e : *list) FillExport(e, resp->add_exports());
  return grpc::Status::OK;
}

grpc::Status AgentService::UnexportVolume(grpc::ServerContext* ctx,
                                          const v1::UnexportVolumeRequest* req,
                                          v1::UnexportVolumeResponse* resp) {
  auto protocol = pillar::FromProto("protocol", req->protocol());
  if (!protocol.ok()) return Reply(ctx, protocol.status());
  if (!req->has_fence()) return Reply(ctx, InvalidArgument("fence is required"));
  std::vector<std::string> changes;
  Status s = core_.UnexportVolume(req->agent_volume_id(), *protocol, FenceFromProto(req->fence()),
                                  &changes);
  if (!s.ok()) return Reply(ctx, s);
  for (auto& c : changes) resp->add_changes(std::move(c));
  return grpc::Status::OK;
}

grpc::Status AgentService::CreateSnapshot(grpc::ServerContext* ctx,
                                          const v1::CreateSnapshotRequest* req,
                                          v1::CreateSnapshotResponse* resp) {
  auto snap = core_.CreateSnapshot({req->source_volume_id(), req->source_volume_uid(), req->name(),
                                    req->snapshot_uid(), req->detached()});
  if (!snap.ok()) return Reply(ctx, snap.status());
  FillSnapshot(*snap, resp->mutable_snapshot());
  return grpc::Status::OK;
}

grpc::Status AgentService::DeleteSnapshot(grpc::ServerContext* ctx,
                                          const v1::DeleteSnapshotRequest* req,
                                          v1::DeleteSnapshotResponse* /*resp*/) {
  return Reply(ctx, core_.DeleteSnapshot(req->agent_snapshot_id(), req->snapshot_uid()));
}

grpc::Status AgentService::ListSnapshots(grpc::ServerContext* ctx,
                                         const v1::ListSnapshotsRequest* req,
                                         v1::ListSnapshotsResponse* resp) {
  auto snaps = core_.ListSnapshots(req->pool());
  if (!snaps.ok()) return Reply(ctx, snaps.status());
  for (const auto& s : *snaps) FillSnapshot(s, resp->add_snapshots());
  return grpc::Status::OK;
}

}  // namespace pillar::agent
