#include "agent/agent_core.h"

#include <set>

#include "common/caps.h"
#include "common/log.h"
#include "common/uuid.h"
#include "common/validate.h"
#include "common/version.h"

namespace pillar::agent {
namespace {

Status ValidateFence(const FenceToken& fence) {
  RETURN_IF_ERROR(validate::Uuid("fence.volumeUid", fence.volume_uid));
  if (fence.publication_generation < 0) {
    return InvalidArgument("fence.publicationGeneration " +
                           std::to_string(fence.publication_generation) + " is negative");
  }
  return Status::Ok();
}

Status ValidateParams(Protocol protocol, const ExportParams& params) {
  RETURN_IF_ERROR(validate::IpAddress("spec.bindAddress", params.bind_address));
  RETURN_IF_ERROR(validate::Port("spec.port", params.port));
  if (params.in_capsule_data_size < 0) {
    return InvalidArgument("spec.inCapsuleDataSize " + std::to_string(params.in_capsule_data_size) +
                           " is negative");
  }
  if (params.in_capsule_data_size > 0 && protocol != Protocol::kNvmeofTcp) {
    return InvalidArgument("spec.inCapsuleDataSize applies to NVMe-oF/TCP only");
  }
  if (params.auth != kAuthNone && params.auth != kAuthChap) {
    return InvalidArgument("spec.auth \"" + params.auth + "\" must be none or chap");
  }
  if (params.auth == kAuthChap) {
    if (protocol == Protocol::kNfs) {
      return InvalidArgument("spec.auth=chap applies to NVMe-oF/TCP and iSCSI only");
    }
    if (!params.acl_enabled) {
      return InvalidArgument("spec.auth=chap needs spec.aclEnabled: only listed hosts are asked");
    }
    if (params.auth_digest.empty()) {
      return InvalidArgument("spec.authDigest is required with spec.auth=chap");
    }
  }
  if (!params.root_squash && protocol != Protocol::kNfs) {
    return InvalidArgument("spec.nfsNoRootSquash applies to NFS only");
  }
  return Status::Ok();
}

VolumeMode ModeFor(Protocol protocol) {
  return protocol == Protocol::kNfs ? VolumeMode::kFilesystem : VolumeMode::kBlock;
}

}  // namespace

AgentCore::AgentCore(AgentCoreOptions options, FencingMarks& marks)
    : options_(std::move(options)), marks_(marks), instance_id_(NewUuid()) {}

void AgentCore::AddPool(std::unique_ptr<Backend> backend) {
  std::string name = backend->pool();
  pools_[name] = std::move(backend);
}

void AgentCore::AddExporter(std::unique_ptr<Exporter> exporter) {
  Protocol p = exporter->protocol();
  exporters_[p] = std::move(exporter);
}

StatusOr<AgentCore::Split> AgentCore::SplitId(const std::string& agent_volume_id) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agentVolumeId", agent_volume_id));
  size_t slash = agent_volume_id.rfind('/');
  return Split{agent_volume_id.substr(0, slash), agent_volume_id.substr(slash + 1)};
}

StatusOr<Backend*> AgentCore::FindPool(const std::string& pool) {
  auto it = pools_.find(pool);
  if (it == pools_.end()) {
    return NotFound("pool \"" + pool + "\" is not configured on agent " + options_.node_name);
  }
  return it->second.get();
}

StatusOr<Exporter*> AgentCore::FindExporter(Protocol protocol) {
  auto it = exporters_.find(protocol);
  if (it == exporters_.end()) {
    return FailedPrecondition(std::string("protocol ") + ProtocolName(protocol) +
                              " is not enabled on agent " + options_.node_name);
  }
  return it->second.get();
}

Status AgentCore::ValidateHosts(Protocol protocol, const std::vector<std::string>& hosts) {
  RETURN_IF_ERROR(caps::CheckCount("allowedHosts", "allowed_hosts", hosts.size()));
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::string field = "allowedHosts[" + std::to_string(i) + "]";
    switch (protocol) {
      case Protocol::kNvmeofTcp:
        RETURN_IF_ERROR(validate::Nqn(field, hosts[i]));
        break;
      case Protocol::kIscsi:
        RETURN_IF_ERROR(validate::Iqn(field, hosts[i]));
        break;
      case Protocol::kNfs:
        RETURN_IF_ERROR(validate::IpOrCidr(field, hosts[i]));
        break;
    }
  }
  return Status::Ok();
}

Status AgentCore::EnsureTargetLoaded(Exporter& exporter) {
  if (!exporter.StateToken().empty()) return Status::Ok();
  if (options_.load_target) {
    Status s = options_.load_target(exporter.protocol());
    if (!s.ok()) log::Warn("loading the kernel target failed", {{"error", s.ToString()}});
  }
  if (exporter.StateToken().empty()) {
    return Unavailable(std::string(ProtocolName(exporter.protocol())) +
                       " target is not loaded on agent " + options_.node_name);
  }
  CheckTargetState();
  return Status::Ok();
}

StatusOr<ExportReport> AgentCore::Describe(Protocol protocol, ActualExport actual) {
  ExportReport info{protocol, std::move(actual), std::nullopt};
  ASSIGN_OR_RETURN(auto mark, marks_.Get(info.actual.agent_volume_id));
  if (mark) info.fence = FenceToken{mark->volume_uid, mark->generation};
  return info;
}

AgentInfo AgentCore::Info() {
  CheckTargetState();
  AgentInfo info{options_.node_name, std::string(Version()), BootEpoch(), {}, {}};
  for (auto& [name, backend] : pools_) {
    auto cap = backend->Capacity();
    info.pools.push_back(
        {name, backend->kind(), cap.ok() ? *cap : PoolCapacity{}, backend->modes()});
  }
  for (auto& [protocol, exporter] : exporters_) info.protocols.push_back(protocol);
  return info;
}

StatusOr<VolumeInfo> AgentCore::CreateVolume(const CreateVolumeRequest& req) {
  const std::string& pool = req.pool;
  const std::string& name = req.name;
  const int64_t size_bytes = req.size_bytes;
  const VolumeMode mode = req.mode;
  const std::string& volume_uid = req.volume_uid;
  const std::map<std::string, std::string>& params = req.params;
  const bool import_existing = req.import_existing;
  const std::optional<VolumeRoot>& root = req.root;
  const std::optional<VolumeSourceRequest>& source = req.source;
  RETURN_IF_ERROR(validate::PoolName("pool", pool));
  RETURN_IF_ERROR(validate::VolumeName("name", name));
  RETURN_IF_ERROR(validate::Uuid("volumeUid", volume_uid));
  RETURN_IF_ERROR(caps::CheckCount("parameters", "parameters", params.size()));
  if (size_bytes <= 0) {
    return InvalidArgument("sizeBytes " + std::to_string(size_bytes) + " must be positive");
  }
  std::optional<VolumeSource> from;
  if (source) {
    ASSIGN_OR_RETURN(from, ResolveSource(pool, *source));
  }
  if (from && import_existing) {
    return InvalidArgument("importExisting adopts storage as it is; it takes no source");
  }
  ASSIGN_OR_RETURN(Backend * backend, FindPool(pool));
  std::string id = pool + "/" + name;
  auto guard = volume_locks_.Lock(id);
  // A volume copied from another: that one is not deleted meanwhile. Taken
  // after this volume's, and only by a create (whose own volume does not
  // exist yet, so none can be the source of another's create).
  std::optional<NamedLocks::Guard> source_guard;
  if (from && from->kind == VolumeSource::Kind::kVolume) {
    source_guard = volume_locks_.Lock(pool + "/" + from->name);
  }

  ASSIGN_OR_RETURN(auto mark, marks_.Get(id));
  auto existing = backend->Get(name);
  // FAILED_PRECONDITION: something that is no volume holds the name (an LV
  // of another type); backend->Create refuses it below.
  bool taken = existing.ok() || existing.status().code() == Code::kFailedPrecondition;
  if (!taken && existing.status().code() != Code::kNotFound) return existing.status();
  if (mark && mark->volume_uid != volume_uid) {
    if (taken) {
      return AlreadyExists("volume " + id + " exists and belongs to lifecycle " + mark->volume_uid +
                           ", not " + volume_uid);
    }
    // The storage is gone: the mark outlived an interrupted delete.
    RETURN_IF_ERROR(marks_.Remove(id, mark->volume_uid));
    log::Warn("removed stale fencing mark of a deleted volume",
              {{"volume", id}, {"uid", mark->volume_uid}});
    mark.reset();
  }
  if (existing.ok()) {
    if (import_existing && existing->owner_uid.empty()) {
      RETURN_IF_ERROR(backend->SetOwner(name, volume_uid));
      log::Warn("imported existing storage on request (CreateVolume import=true)",
                {{"volume", id}, {"uid", volume_uid}, {"sizeBytes", existing->size_bytes}});
    }
  } else if (import_existing && !taken) {
    return NotFound("volume " + id + " does not exist on agent " + options_.node_name +
                    "; import=true adopts existing storage and never creates any");
  }
  // Refuses (ALREADY_EXISTS) an existing object that is not volume_uid's.
  ASSIGN_OR_RETURN(
      BackendVolume vol,
      from ? backend->CreateFrom(name, size_bytes, mode, params, volume_uid, root, *from)
           : backend->Create(name, size_bytes, mode, params, volume_uid, root));
  RETURN_IF_ERROR(marks_.Reset(id, volume_uid));
  log::Info("volume ready",
            {{"volume", id}, {"sizeBytes", vol.size_bytes}, {"origin", vol.origin}});
  return VolumeInfo{id, pool, backend->kind(), std::move(vol), volume_uid};
}

StatusOr<VolumeInfo> AgentCore::ExpandVolume(const std::string& agent_volume_id, int64_t size_bytes,
                                             const std::string& volume_uid) {
  ASSIGN_OR_RETURN(Split split, SplitId(agent_volume_id));
  RETURN_IF_ERROR(validate::Uuid("volumeUid", volume_uid));
  if (size_bytes <= 0) {
    return InvalidArgument("sizeBytes " + std::to_string(size_bytes) + " must be positive");
  }
  ASSIGN_OR_RETURN(Backend * backend, FindPool(split.pool));
  auto guard = volume_locks_.Lock(agent_volume_id);
  ASSIGN_OR_RETURN(auto mark, marks_.Get(agent_volume_id));
  if (mark && mark->volume_uid != volume_uid) {
    return FailedPrecondition("volume " + agent_volume_id + " belongs to lifecycle " +
                              mark->volume_uid + "; refusing to expand it for " + volume_uid);
  }
  // Refuses (FAILED_PRECONDITION) storage that is not volume_uid's.
  ASSIGN_OR_RETURN(BackendVolume vol, backend->Expand(split.name, size_bytes, volume_uid));
  return VolumeInfo{agent_volume_id, split.pool, backend->kind(), std::move(vol), volume_uid};
}

Status AgentCore::DeleteVolume(const std::string& agent_volume_id, const std::string& volume_uid) {
  ASSIGN_OR_RETURN(Split split, SplitId(agent_volume_id));
  RETURN_IF_ERROR(validate::Uuid("volumeUid", volume_uid));
  ASSIGN_OR_RETURN(Backend * backend, FindPool(split.pool));
  auto guard = volume_locks_.Lock(agent_volume_id);
  ASSIGN_OR_RETURN(auto mark, marks_.Get(agent_volume_id));
  if (mark && mark->volume_uid != volume_uid) {
    return Aborted("volume " + agent_volume_id + " belongs to lifecycle " + mark->volume_uid +
                   "; refusing to delete it for " + volume_uid);
  }
  auto existing = backend->Get(split.name);
  if (!existing.ok() && existing.status().code() != Code::kNotFound) return existing.status();
  if (existing.ok()) {
    // Checked before anything else, so a refusal leaves the exports alone too.
    // A fencing mark never stands in for ownership: the controller's writes
    // plant those, whatever the storage is.
    if (existing->owner_uid != volume_uid) {
      return FailedPrecondition(
          "volume " + agent_volume_id + " is " +
          (existing->owner_uid.empty() ? std::string("not pillar's (no ownership mark)")
                                       : "lifecycle " + existing->owner_uid + "'s") +
          "; refusing to delete it for lifecycle " + volume_uid + ", nothing was changed");
    }
  }
  for (auto& [protocol, exporter] : exporters_) {
    ASSIGN_OR_RETURN(auto actual, exporter->Get(agent_volume_id));
    if (actual) {
      return FailedPrecondition("volume " + agent_volume_id + " is still exported over " +
                                ProtocolName(protocol) + "; unexport it first");
    }
  }
  RETURN_IF_ERROR(backend->Unexpose(split.name));
  // Refuses (FAILED_PRECONDITION) storage that is not volume_uid's.
  RETURN_IF_ERROR(backend->Delete(split.name, volume_uid));
  if (options_.credentials != nullptr) {
    RETURN_IF_ERROR(options_.credentials->Remove(agent_volume_id));
  }
  if (mark) RETURN_IF_ERROR(marks_.Remove(agent_volume_id, volume_uid));
  log::Info("volume deleted", {{"volume", agent_volume_id}});
  return Status::Ok();
}

StatusOr<std::vector<VolumeInfo>> AgentCore::ListVolumes(const std::string& pool) {
  std::vector<VolumeInfo> out;
  for (auto& [name, backend] : pools_) {
    if (!pool.empty() && name != pool) continue;
    ASSIGN_OR_RETURN(auto vols, backend->List());
    for (auto& v : vols) {
      std::string id = name + "/" + v.name;
      ASSIGN_OR_RETURN(auto mark, marks_.Get(id));
      out.push_back({id, name, backend->kind(), std::move(v), mark ? mark->volume_uid : ""});
    }
  }
  if (!pool.empty() && out.empty() && pools_.count(pool) == 0) {
    return NotFound("pool \"" + pool + "\" is not configured on agent " + options_.node_name);
  }
  return out;
}

StatusOr<VolumeSource> AgentCore::ResolveSource(const std::string& pool,
                                                const VolumeSourceRequest& source) {
  bool by_snapshot = !source.agent_snapshot_id.empty();
  if (by_snapshot == !source.agent_volume_id.empty()) {
    return InvalidArgument(
        "source needs exactly one of source.agentSnapshotId and source.agentVolumeId");
  }
  const char* field = by_snapshot ? "source.agentSnapshotId" : "source.agentVolumeId";
  const std::string& id = by_snapshot ? source.agent_snapshot_id : source.agent_volume_id;
  RETURN_IF_ERROR(validate::AgentVolumeId(field, id));
  RETURN_IF_ERROR(validate::Uuid("source.sourceUid", source.source_uid));
  size_t slash = id.rfind('/');
  if (id.substr(0, slash) != pool) {
    return InvalidArgument(std::string(field) + " \"" + id + "\" is in pool " +
                           id.substr(0, slash) + ", not " + pool +
                           "; a volume is made only from a source in its own pool");
  }
  return VolumeSource{by_snapshot ? VolumeSource::Kind::kSnapshot : VolumeSource::Kind::kVolume,
                      id.substr(slash + 1), source.source_uid, source.detached};
}

StatusOr<SnapshotInfo> AgentCore::CreateSnapshot(const CreateSnapshotRequest& req) {
  const std::string& source_volume_id = req.source_volume_id;
  const std::string& source_volume_uid = req.source_volume_uid;
  const std::string& name = req.name;
  const std::string& snapshot_uid = req.snapshot_uid;
  const bool detached = req.detached;
  RETURN_IF_ERROR(validate::AgentVolumeId("sourceVolumeId", source_volume_id));
  RETURN_IF_ERROR(validate::Uuid("sourceVolumeUid", source_volume_uid));
  RETURN_IF_ERROR(validate::VolumeName("name", name));
  RETURN_IF_ERROR(validate::Uuid("snapshotUid", snapshot_uid));
  ASSIGN_OR_RETURN(Split split, SplitId(source_volume_id));
  ASSIGN_OR_RETURN(Backend * backend, FindPool(split.pool));
  // No delete or expand of the source in between.
  auto guard = volume_locks_.Lock(source_volume_id);
  ASSIGN_OR_RETURN(BackendSnapshot snap, backend->CreateSnapshot(split.name, source_volume_uid,
                                                                 name, snapshot_uid, detached));
  std::string id = split.pool + "/" + snap.name;
  log::Info("snapshot ready",
            {{"snapshot", id}, {"of", source_volume_id}, {"sizeBytes", snap.size_bytes}});
  return SnapshotInfo{id, split.pool, backend->kind(), std::move(snap)};
}

Status AgentCore::DeleteSnapshot(const std::string& agent_snapshot_id,
                                 const std::string& snapshot_uid) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agentSnapshotId", agent_snapshot_id));
  RETURN_IF_ERROR(validate::Uuid("snapshotUid", snapshot_uid));
  ASSIGN_OR_RETURN(Split split, SplitId(agent_snapshot_id));
  ASSIGN_OR_RETURN(Backend * backend, FindPool(split.pool));
  RETURN_IF_ERROR(backend->DeleteSnapshot(split.name, snapshot_uid));
  log::Info("snapshot deleted", {{"snapshot", agent_snapshot_id}});
  return Status::Ok();
}

StatusOr<std::vector<SnapshotInfo>> AgentCore::ListSnapshots(const std::string& pool) {
  if (!pool.empty()) RETURN_IF_ERROR(FindPool(pool).status());
  std::vector<SnapshotInfo> out;
  for (auto& [name, backend] : pools_) {
    if (!pool.empty() && name != pool) continue;
    ASSIGN_OR_RETURN(auto snaps, backend->ListSnapshots());
    for (auto& snap : snaps) {
      std::string id = name + "/" + snap.name;
      out.push_back({id, name, backend->kind(), std::move(snap)});
    }
  }
  return out;
}

StatusOr<std::vector<PoolInfo>> AgentCore::Capacity(const std::string& pool) {
  std::vector<PoolInfo> out;
  if (!pool.empty()) RETURN_IF_ERROR(FindPool(pool).status());
  for (auto& [name, backend] : pools_) {
    if (!pool.empty() && name != pool) continue;
    ASSIGN_OR_RETURN(PoolCapacity cap, backend->Capacity());
    out.push_back({name, backend->kind(), cap, backend->modes()});
  }
  return out;
}

StatusOr<Credentials> AgentCore::ResolveCredentials(const std::string& agent_volume_id,
                                                    Protocol protocol, const ExportParams& params,
                                                    const std::optional<Credentials>& given) {
  if (params.auth != kAuthChap) {
    if (given && !given->empty()) {
      return InvalidArgument("credentials are given but spec.auth is " + params.auth);
    }
    return Credentials{};
  }
  if (options_.credentials == nullptr) {
    return FailedPrecondition("agent " + options_.node_name +
                              " keeps no credential store; auth=chap is unavailable");
  }
  if (given && !given->empty()) {
    RETURN_IF_ERROR(ValidateCredentials(protocol, *given, "credentials"));
    if (CredentialsDigest(agent_volume_id, *given) != params.auth_digest) {
      return InvalidArgument("credentials do not match spec.authDigest of volume " +
                             agent_volume_id);
    }
    return *given;
  }
  ASSIGN_OR_RETURN(auto kept, options_.credentials->Get(agent_volume_id, protocol));
  if (!kept) {
    return FailedPrecondition("agent " + options_.node_name + " holds no credentials for volume " +
                              agent_volume_id +
                              "; they come with CreateVolume or ControllerPublish secrets");
  }
  if (CredentialsDigest(agent_volume_id, *kept) != params.auth_digest) {
    return FailedPrecondition("the credentials agent " + options_.node_name + " holds for volume " +
                              agent_volume_id +
                              " do not match spec.authDigest (the secret changed?); they come "
                              "with CreateVolume or ControllerPublish secrets");
  }
  return *kept;
}

StatusOr<Credentials> AgentCore::CheckApplyRequest(const ApplyExportRequest& req) {
  ASSIGN_OR_RETURN(Split split, SplitId(req.agent_volume_id));
  RETURN_IF_ERROR(ValidateFence(req.fence));
  RETURN_IF_ERROR(ValidateParams(req.protocol, req.params));
  RETURN_IF_ERROR(ValidateHosts(req.protocol, req.allowed_hosts));
  ASSIGN_OR_RETURN(Credentials creds, ResolveCredentials(req.agent_volume_id, req.protocol,
                                                         req.params, req.credentials));
  RETURN_IF_ERROR(FindPool(split.pool).status());
  RETURN_IF_ERROR(FindExporter(req.protocol).status());
  return creds;
}

StatusOr<ExportReport> AgentCore::ApplyExport(const ApplyExportRequest& req,
                                              std::vector<std::string>* changes) {
  ASSIGN_OR_RETURN(Credentials creds, CheckApplyRequest(req));
  {
    auto guard = volume_locks_.Lock(req.agent_volume_id);
    std::vector<LockedApply> one(1);
    one[0] = LockedApply{req.agent_volume_id, req.protocol,     req.params, req.fence,
                         req.allowed_hosts,   std::move(creds), changes,    Status::Ok()};
    ApplyManyLocked(one);
    RETURN_IF_ERROR(one[0].status);
  }
  return ReadBack(req.agent_volume_id, req.protocol);
}

StatusOr<ExportReport> AgentCore::ReadBack(const std::string& agent_volume_id, Protocol protocol) {
  ASSIGN_OR_RETURN(Exporter * exporter, FindExporter(protocol));
  ASSIGN_OR_RETURN(auto actual, exporter->Get(agent_volume_id));
  if (!actual) return Internal("export " + agent_volume_id + " vanished right after apply");
  return Describe(protocol, std::move(*actual));
}

StatusOr<KernelExport> AgentCore::PrepareExportLocked(const LockedApply& item) {
  const std::string& agent_volume_id = item.agent_volume_id;
  const FenceToken& fence = item.fence;
  ASSIGN_OR_RETURN(Split split, SplitId(agent_volume_id));
  ASSIGN_OR_RETURN(Backend * backend, FindPool(split.pool));
  ASSIGN_OR_RETURN(Exporter * exporter, FindExporter(item.protocol));
  // A stale writer learns nothing and changes nothing.
  RETURN_IF_ERROR(marks_.Check(agent_volume_id, fence.volume_uid, fence.publication_generation));
  auto vol = backend->Get(split.name);
  if (vol.status().code() == Code::kNotFound) {
    return NotFound("backend volume " + agent_volume_id + " does not exist on agent " +
                    options_.node_name + "; an export is never a reason to create storage");
  }
  if (!vol.ok()) return vol.status();
  // Only storage marked as this lifecycle's is ever exported: storage pillar
  // did not make (no mark) is refused like another lifecycle's, before any
  // fencing mark is planted.
  if (vol->owner_uid != fence.volume_uid) {
    return FailedPrecondition("volume " + agent_volume_id + " is " +
                              (vol->owner_uid.empty()
                                   ? std::string("not pillar's (no ownership mark)")
                                   : "marked as lifecycle " + vol->owner_uid + "'s") +
                              "; refusing to export it for " + fence.volume_uid);
  }
  if (vol->mode != ModeFor(item.protocol)) {
    return FailedPrecondition("volume " + agent_volume_id + " is a " + VolumeModeName(vol->mode) +
                              " volume; " + ProtocolName(item.protocol) + " serves " +
                              VolumeModeName(ModeFor(item.protocol)) + " volumes");
  }
  RETURN_IF_ERROR(EnsureTargetLoaded(*exporter));
  RETURN_IF_ERROR(marks_.Advance(agent_volume_id, fence.volume_uid, fence.publication_generation));
  // Kept before they are used, so the export can be rebuilt without the
  // controller; a stale writer was refused above and stores nothing.
  if (item.params.auth == kAuthChap && options_.credentials != nullptr) {
    ASSIGN_OR_RETURN(bool wrote,
                     options_.credentials->Put(agent_volume_id, item.protocol, item.creds));
    if (wrote) log::Info("credentials kept", {{"volume", agent_volume_id}});
  }
  ASSIGN_OR_RETURN(std::string backing, backend->Expose(split.name, vol->mode));

  KernelExport want;
  want.agent_volume_id = agent_volume_id;
  want.backing = backing;
  want.params = item.params;
  want.allowed_hosts.insert(item.hosts.begin(), item.hosts.end());
  want.credentials = item.creds;
  switch (item.protocol) {
    case Protocol::kNvmeofTcp:
      want.target_id = TargetName(options_.nqn_prefix, agent_volume_id);
      break;
    case Protocol::kIscsi:
      want.target_id = TargetName(options_.iqn_prefix, agent_volume_id);
      break;
    case Protocol::kNfs:
      want.target_id = backing;
      break;
  }
  return want;
}

void AgentCore::ApplyManyLocked(std::vector<LockedApply>& items) {
  // Each volume's own checks first (fence, ownership, mode, backing), then
  // one ApplyMany per exporter: exportfs rewrites its whole table per run,
  // so a batch of NFS volumes costs one run, not one per volume.
  std::vector<std::vector<std::string>> local(items.size());
  std::vector<KernelExport> wants(items.size());
  std::vector<size_t> before(items.size(), 0);
  std::map<Protocol, std::vector<size_t>> by_protocol;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].changes == nullptr) items[i].changes = &local[i];
    before[i] = items[i].changes->size();
    auto want = PrepareExportLocked(items[i]);
    if (!want.ok()) {
      items[i].status = want.status();
      continue;
    }
    wants[i] = std::move(*want);
    by_protocol[items[i].protocol].push_back(i);
  }
  for (auto& [protocol, indices] : by_protocol) {
    Exporter* exporter = *FindExporter(protocol);  // found by PrepareExportLocked
    std::vector<ApplyItem> batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(ApplyItem{&wants[i], items[i].changes, Status::Ok()});
    exporter->ApplyMany(batch);
    for (size_t k = 0; k < indices.size(); ++k) {
      LockedApply& item = items[indices[k]];
      if (!batch[k].status.ok()) {
        item.status = batch[k].status.Annotate("export " + item.agent_volume_id);
        continue;
      }
      item.status = Status::Ok();
      const std::vector<std::string>& out = *item.changes;
      if (out.size() != before[indices[k]]) {
        log::Info(
            "export converged",
            {{"volume", item.agent_volume_id},
             {"protocol", ProtocolName(protocol)},
             {"generation", item.fence.publication_generation},
             {"changes", std::vector<std::string>(
                             out.begin() + static_cast<long>(before[indices[k]]), out.end())}});
      }
      // Remembered only once applied: a repair rebuilds what the kernel had.
      std::lock_guard<std::mutex> lock(applied_mu_);
      applied_[item.agent_volume_id] = AppliedExport{protocol, item.params, item.fence, item.hosts};
    }
  }
}

std::vector<ApplyExportOutcome> AgentCore::ApplyExports(
    const std::vector<ApplyExportRequest>& reqs) {
  std::vector<ApplyExportOutcome> out(reqs.size());
  std::vector<LockedApply> batch;
  std::vector<size_t> index;  // batch[k] answers reqs[index[k]]
  std::set<std::string> ids;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ApplyExportRequest& req = reqs[i];
    auto creds = CheckApplyRequest(req);
    if (!creds.ok()) {
      out[i].status = creds.status();
      continue;
    }
    if (!ids.insert(req.agent_volume_id).second) {
      out[i].status =
          InvalidArgument("exports[" + std::to_string(i) + "]: agent volume id " +
                          req.agent_volume_id + " appears more than once in one ApplyExports call");
      continue;
    }
    batch.push_back(LockedApply{req.agent_volume_id, req.protocol, req.params, req.fence,
                                req.allowed_hosts, std::move(*creds), &out[i].changes,
                                Status::Ok()});
    index.push_back(i);
  }
  {
    // Every volume's lock, taken in the order of their ids so two batches
    // (or a batch and a repair) never wait on each other in a circle.
    std::vector<NamedLocks::Guard> guards;
    guards.reserve(ids.size());
    for (const auto& id : ids) guards.push_back(volume_locks_.Lock(id));
    ApplyManyLocked(batch);
  }
  for (size_t k = 0; k < batch.size(); ++k) out[index[k]].status = batch[k].status;
  // Read back once all are applied: an exporter that reads its whole table
  // to answer (exportfs -v) reads it once for the batch, not once per item.
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (!out[i].status.ok()) continue;
    auto r = ReadBack(reqs[i].agent_volume_id, reqs[i].protocol);
    if (r.ok()) {
      out[i].report = std::move(*r);
    } else {
      out[i].status = r.status();
    }
  }
  return out;
}

int AgentCore::RepairExports(Protocol protocol) {
  std::map<std::string, AppliedExport> remembered;
  {
    std::lock_guard<std::mutex> lock(applied_mu_);
    for (const auto& [id, a] : applied_) {
      if (a.protocol == protocol) remembered.emplace(id, a);
    }
  }
  std::vector<LockedApply> batch;
  std::vector<std::vector<std::string>> changes(remembered.size());
  for (const auto& [id, a] : remembered) {
    auto creds = ResolveCredentials(id, protocol, a.params, std::nullopt);
    if (!creds.ok()) {
      log::Warn("export not repaired", {{"volume", id}, {"error", creds.status().ToString()}});
      continue;
    }
    batch.push_back(LockedApply{id, protocol, a.params, a.fence, a.hosts, std::move(*creds),
                                &changes[batch.size()], Status::Ok()});
  }
  // Locks in id order (the map's), as ApplyExports takes them.
  std::vector<NamedLocks::Guard> guards;
  guards.reserve(batch.size());
  std::vector<LockedApply> current;
  for (auto& item : batch) {
    guards.push_back(volume_locks_.Lock(item.agent_volume_id));
    // Withdrawn (unexported) or re-applied since the snapshot: the
    // controller's newer word stands, never this memory.
    std::lock_guard<std::mutex> lock(applied_mu_);
    auto it = applied_.find(item.agent_volume_id);
    if (it == applied_.end() || !(it->second == remembered.at(item.agent_volume_id))) continue;
    current.push_back(std::move(item));
  }
  ApplyManyLocked(current);
  guards.clear();
  int repaired = 0;
  for (const auto& item : current) {
    if (!item.status.ok()) {
      // A fenced generation (ABORTED) ends here too: nothing is applied.
      log::Warn("export not repaired",
                {{"volume", item.agent_volume_id}, {"error", item.status.ToString()}});
      continue;
    }
    if (!item.changes->empty()) ++repaired;
  }
  if (repaired > 0) {
    log::Info("exports repaired on a kernel event",
              {{"protocol", ProtocolName(protocol)}, {"volumes", repaired}});
  }
  return repaired;
}

StatusOr<ExportReport> AgentCore::GetExport(const std::string& agent_volume_id, Protocol protocol) {
  RETURN_IF_ERROR(SplitId(agent_volume_id).status());
  ASSIGN_OR_RETURN(Exporter * exporter, FindExporter(protocol));
  ASSIGN_OR_RETURN(auto actual, exporter->Get(agent_volume_id));
  if (!actual) {
    return NotFound("volume " + agent_volume_id + " has no " + ProtocolName(protocol) +
                    " export on agent " + options_.node_name);
  }
  return Describe(protocol, std::move(*actual));
}

StatusOr<std::vector<ExportReport>> AgentCore::ListExports() {
  std::vector<ExportReport> out;
  for (auto& [protocol, exporter] : exporters_) {
    if (exporter->StateToken().empty()) continue;  // not loaded: nothing exported
    ASSIGN_OR_RETURN(auto list, exporter->List());
    for (auto& actual : list) {
      ASSIGN_OR_RETURN(ExportReport info, Describe(protocol, std::move(actual)));
      out.push_back(std::move(info));
    }
  }
  return out;
}

Status AgentCore::UnexportVolume(const std::string& agent_volume_id, Protocol protocol,
                                 const FenceToken& fence, std::vector<std::string>* changes) {
  ASSIGN_OR_RETURN(Split split, SplitId(agent_volume_id));
  RETURN_IF_ERROR(ValidateFence(fence));
  ASSIGN_OR_RETURN(Backend * backend, FindPool(split.pool));
  ASSIGN_OR_RETURN(Exporter * exporter, FindExporter(protocol));
  auto guard = volume_locks_.Lock(agent_volume_id);
  // A mark exists for every volume this agent created or exported; without
  // one there is nothing of this lifecycle to unexport, and none is planted
  // (a mark for storage that does not exist, or is not pillar's, would later
  // look like a claim on it).
  ASSIGN_OR_RETURN(auto mark, marks_.Get(agent_volume_id));
  if (!mark) {
    ASSIGN_OR_RETURN(auto actual, exporter->StateToken().empty()
                                      ? StatusOr<std::optional<ActualExport>>(std::nullopt)
                                      : exporter->Get(agent_volume_id));
    if (actual) {
      return FailedPrecondition(
          "volume " + agent_volume_id + " is exported over " + ProtocolName(protocol) +
          " but carries no fencing mark; refusing to act for " + fence.volume_uid);
    }
    return Status::Ok();
  }
  RETURN_IF_ERROR(marks_.Advance(agent_volume_id, fence.volume_uid, fence.publication_generation));
  {
    // Withdrawn: no repair may bring it back.
    std::lock_guard<std::mutex> lock(applied_mu_);
    applied_.erase(agent_volume_id);
  }
  std::vector<std::string> local;
  std::vector<std::string>* out = changes != nullptr ? changes : &local;
  if (!exporter->StateToken().empty()) {
    RETURN_IF_ERROR(exporter->Remove(agent_volume_id, out));
  }
  for (auto& [other, other_exporter] : exporters_) {
    if (other == protocol || other_exporter->StateToken().empty()) continue;
    ASSIGN_OR_RETURN(auto actual, other_exporter->Get(agent_volume_id));
    if (actual) return Status::Ok();  // still served over another protocol
  }
  return backend->Unexpose(split.name);
}

void AgentCore::CheckTargetState() {
  std::lock_guard<std::mutex> lock(epoch_mu_);
  bool changed = false;
  for (auto& [protocol, exporter] : exporters_) {
    std::string token = exporter->StateToken();
    auto it = last_tokens_.find(protocol);
    if (it != last_tokens_.end() && it->second != token) {
      changed = true;
      log::Warn("kernel target state changed under the agent",
                {{"protocol", ProtocolName(protocol)}, {"was", it->second}, {"now", token}});
    }
    last_tokens_[protocol] = token;
  }
  if (changed) ++epoch_counter_;
}

std::string AgentCore::BootEpoch() {
  std::lock_guard<std::mutex> lock(epoch_mu_);
  return instance_id_ + "-" + std::to_string(epoch_counter_);
}

}  // namespace pillar::agent
