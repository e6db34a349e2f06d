#include "controller/agent_proto.h"

#include "common/protocol_proto.h"

namespace pillar::controller {

namespace av1 = pillar::agent::v1;

namespace {

av1::VolumeMode ModeToProto(agent_api::VolumeMode m) {
  return m == agent_api::VolumeMode::kFilesystem ? av1::VOLUME_MODE_FILESYSTEM
                                                 : av1::VOLUME_MODE_BLOCK;
}

std::optional<agent_api::VolumeMode> ModeFromProto(int m) {
  switch (m) {
    case av1::VOLUME_MODE_BLOCK:
      return agent_api::VolumeMode::kBlock;
    case av1::VOLUME_MODE_FILESYSTEM:
      return agent_api::VolumeMode::kFilesystem;
    default:
      return std::nullopt;
  }
}

std::optional<Protocol> ProtocolFromProto(int p) {
  auto known = pillar::FromProto("protocol", static_cast<av1::Protocol>(p));
  if (!known.ok()) return std::nullopt;
  return *known;
}

// The values of a repeated enum field that this controller knows, in order.
template <typename From>
auto KnownValues(const google::protobuf::RepeatedField<int>& in, From from) {
  std::vector<typename decltype(from(0))::value_type> out;
  for (int v : in) {
    if (auto known = from(v)) out.push_back(*known);
  }
  return out;
}

// Each message of a repeated field, converted.
template <typename M>
auto FromEach(const google::protobuf::RepeatedPtrField<M>& in) {
  std::vector<decltype(FromProto(in.Get(0)))> out;
  for (const auto& m : in) out.push_back(FromProto(m));
  return out;
}

void FillSpec(const agent_api::ExportSpec& in, av1::ExportSpec* out) {
  out->set_bind_address(in.bind_address);
  out->set_port(in.port);
  out->set_acl_enabled(in.acl_enabled);
  out->set_in_capsule_data_size(in.in_capsule_data_size);
  out->set_auth(in.auth);
  out->set_auth_digest(in.auth_digest);
  out->set_nfs_no_root_squash(in.nfs_no_root_squash);
}

agent_api::ExportSpec SpecFromProto(const av1::ExportSpec& m) {
  return {.bind_address = m.bind_address(),
          .port = m.port(),
          .acl_enabled = m.acl_enabled(),
          .in_capsule_data_size = m.in_capsule_data_size(),
          .auth = m.auth(),
          .auth_digest = m.auth_digest(),
          .nfs_no_root_squash = m.nfs_no_root_squash()};
}

void FillFence(const agent_api::Fence& in, av1::Fence* out) {
  out->set_volume_uid(in.volume_uid);
  out->set_publication_generation(in.publication_generation);
}

}  // namespace

av1::CreateVolumeRequest ToProto(const agent_api::CreateVolumeRequest& r) {
  av1::CreateVolumeRequest m;
  m.set_pool(r.pool);
  m.set_name(r.name);
  m.set_size_bytes(r.size_bytes);
  m.set_mode(ModeToProto(r.mode));
  m.set_volume_uid(r.volume_uid);
  m.mutable_parameters()->insert(r.parameters.begin(), r.parameters.end());
  m.set_import_existing(r.import_existing);
  if (r.root) {
    m.mutable_root()->set_mode(r.root->mode);
    m.mutable_root()->set_uid(r.root->uid);
    m.mutable_root()->set_gid(r.root->gid);
  }
  if (r.source) {
    auto* src = m.mutable_source();
    if (!r.source->agent_snapshot_id.empty()) {
      src->set_agent_snapshot_id(r.source->agent_snapshot_id);
    } else {
      src->set_agent_volume_id(r.source->agent_volume_id);
    }
    src->set_source_uid(r.source->source_uid);
    src->set_detached(r.source->detached);
  }
  return m;
}

av1::CreateSnapshotRequest ToProto(const agent_api::CreateSnapshotRequest& r) {
  av1::CreateSnapshotRequest m;
  m.set_source_volume_id(r.source_volume_id);
  m.set_source_volume_uid(r.source_volume_uid);
  m.set_name(r.name);
  m.set_snapshot_uid(r.snapshot_uid);
  m.set_detached(r.detached);
  return m;
}

av1::DeleteSnapshotRequest ToProto(const agent_api::DeleteSnapshotRequest& r) {
  av1::DeleteSnapshotRequest m;
  m.set_agent_snapshot_id(r.agent_snapshot_id);
  m.set_snapshot_uid(r.snapshot_uid);
  return m;
}

av1::ListSnapshotsRequest ListSnapshotsRequestProto(const std::string& pool) {
  av1::ListSnapshotsRequest m;
  m.set_pool(pool);
  return m;
}

av1::ExpandVolumeRequest ToProto(const agent_api::ExpandVolumeRequest& r) {
  av1::ExpandVolumeRequest m;
  m.set_agent_volume_id(r.agent_volume_id);
  m.set_size_bytes(r.size_bytes);
  m.set_volume_uid(r.volume_uid);
  return m;
}

av1::DeleteVolumeRequest ToProto(const agent_api::DeleteVolumeRequest& r) {
  av1::DeleteVolumeRequest m;
  m.set_agent_volume_id(r.agent_volume_id);
  m.set_volume_uid(r.volume_uid);
  return m;
}

av1::ApplyExportRequest ToProto(const agent_api::ApplyExportRequest& r) {
  av1::ApplyExportRequest m;
  m.set_agent_volume_id(r.agent_volume_id);
  m.set_protocol(pillar::ToProto(r.protocol));
  FillSpec(r.spec, m.mutable_spec());
  FillFence(r.fence, m.mutable_fence());
  for (const auto& h : r.allowed_hosts) m.add_allowed_hosts(h);
  if (r.credentials) {
    auto* c = m.mutable_credentials();
    c->set_username(r.credentials->username);
    c->set_secret(r.credentials->secret);
    c->set_mutual_username(r.credentials->mutual_username);
    c->set_mutual_secret(r.credentials->mutual_secret);
  }
  return m;
}

av1::UnexportVolumeRequest ToProto(const agent_api::UnexportVolumeRequest& r) {
  av1::UnexportVolumeRequest m;
  m.set_agent_volume_id(r.agent_volume_id);
  m.set_protocol(pillar::ToProto(r.protocol));
  FillFence(r.fence, m.mutable_fence());
  return m;
}

av1::GetCapacityRequest GetCapacityRequestProto(const std::string& pool) {
  av1::GetCapacityRequest m;
  m.set_pool(pool);
  return m;
}

av1::GetExportRequest GetExportRequestProto(const std::string& agent_volume_id, Protocol protocol) {
  av1::GetExportRequest m;
  m.set_agent_volume_id(agent_volume_id);
  m.set_protocol(pillar::ToProto(protocol));
  return m;
}

agent_api::Info FromProto(const av1::GetInfoResponse& m) {
  return {.node_name = m.node_name(),
          .agent_version = m.agent_version(),
          .boot_epoch = m.boot_epoch(),
          .pools = FromEach(m.pools()),
          .protocols = KnownValues(m.protocols(), ProtocolFromProto)};
}

agent_api::Volume FromProto(const av1::Volume& m) {
  return {.agent_volume_id = m.agent_volume_id(),
          .pool = m.pool(),
          .name = m.name(),
          .size_bytes = m.size_bytes(),
          .mode = ModeFromProto(m.mode()),
          .backend = m.backend(),
          .device_path = m.device_path(),
          .export_path = m.export_path(),
          .volume_uid = m.volume_uid(),
          .owner_uid = m.owner_uid(),
          .pending = m.pending(),
          .origin = m.origin()};
}

agent_api::Snapshot FromProto(const av1::Snapshot& m) {
  return {.agent_snapshot_id = m.agent_snapshot_id(),
          .pool = m.pool(),
          .name = m.name(),
          .source_volume_id = m.source_volume_id(),
          .size_bytes = m.size_bytes(),
          .creation_time_unix_nanos = m.creation_time_unix_nanos(),
          .backend = m.backend(),
          .owner_uid = m.owner_uid(),
          .ready_to_use = m.ready_to_use(),
          .used_bytes = m.used_bytes(),
          .detached = m.detached()};
}

std::vector<agent_api::Snapshot> FromProto(const av1::ListSnapshotsResponse& m) {
  return FromEach(m.snapshots());
}

agent_api::Pool FromProto(const av1::Pool& m) {
  return {.name = m.name(),
          .backend = m.backend(),
          .total_bytes = m.total_bytes(),
          .available_bytes = m.available_bytes(),
          .modes = KnownValues(m.modes(), ModeFromProto)};
}

agent_api::Export FromProto(const av1::Export& m) {
  std::optional<agent_api::Fence> fence;
  if (m.has_fence()) fence = {m.fence().volume_uid(), m.fence().publication_generation()};
  return {.agent_volume_id = m.agent_volume_id(),
          .protocol = ProtocolFromProto(m.protocol()),
          .target_id = m.target_id(),
          .spec = SpecFromProto(m.spec()),
          .allowed_hosts = {m.allowed_hosts().begin(), m.allowed_hosts().end()},
          .backing = m.backing(),
          .enabled = m.enabled(),
          .fence = fence};
}

agent_api::ApplyExportResult FromProto(const av1::ApplyExportResponse& m) {
  return {FromProto(m.export_()), {m.changes().begin(), m.changes().end()}};
}

av1::ApplyExportsRequest ToProto(const std::vector<agent_api::ApplyExportRequest>& rs) {
  av1::ApplyExportsRequest m;
  for (const auto& r : rs) *m.add_exports() = ToProto(r);
  return m;
}

StatusOr<std::vector<agent_api::ApplyExportItem>> FromProto(const av1::ApplyExportsResponse& m,
                                                            size_t asked) {
  if (static_cast<size_t>(m.results_size()) != asked) {
    return Internal("ApplyExports answered " + std::to_string(m.results_size()) + " results for " +
                    std::to_string(asked) + " items");
  }
  std::vector<agent_api::ApplyExportItem> out;
  out.reserve(asked);
  for (const auto& r : m.results()) {
    agent_api::ApplyExportItem item;
    if (r.code() != 0) {
      // A code outside google.rpc.Code is no answer to act on (no ABORTED).
      bool known = r.code() > 0 && r.code() <= static_cast<int>(Code::kUnauthenticated);
      item.status = Status(known ? static_cast<Code>(r.code()) : Code::kUnknown,
                           r.message().empty() ? "item failed" : r.message());
    } else {
      item.result = {FromProto(r.export_()), {r.changes().begin(), r.changes().end()}};
    }
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<agent_api::Pool> FromProto(const av1::GetCapacityResponse& m) {
  return FromEach(m.pools());
}

std::vector<agent_api::Export> FromProto(const av1::ListExportsResponse& m) {
  return FromEach(m.exports());
}

std::vector<std::string> FromProto(const av1::UnexportVolumeResponse& m) {
  return {m.changes().begin(), m.changes().end()};
}

}  // namespace pillar::controller
