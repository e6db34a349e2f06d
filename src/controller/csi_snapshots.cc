// CSI snapshots and the content source of CreateVolume (docs/snapshots.md).
// A snapshot is recorded intent like a volume: its PillarSnapshot is written
// first (Ready False, Creating), then the source volume's agent takes it and
// marks it with the record's uid; an agent that refuses leaves nothing, so
// the record goes too. DeleteSnapshot answers once the agent let go of the
// snapshot, which it does at once even while restored volumes still need its
// data (the agent keeps that hidden and reclaims it itself).
#include <google/protobuf/util/time_util.h>

#include <algorithm>

#include "common/grpc_status.h"
#include "common/log.h"
#include "common/request_caps.h"
#include "common/validate.h"
#include "controller/csi_controller.h"
#include "controller/csi_records.h"
#include "store/retry.h"

namespace pillar::controller {

namespace {

// ListSnapshots' next_token: this, then the name of the page's last snapshot.
constexpr std::string_view kSnapshotListToken = "after-snapshot:";

std::string LockKey(const std::string& snapshot_id) { return "snapshot/" + snapshot_id; }

// "<pool>" of "<pool>/<name>" (pools may hold '/': ZFS datasets).
std::string PoolOf(const std::string& agent_id) {
  size_t slash = agent_id.rfind('/');
  return slash == std::string::npos ? "" : agent_id.substr(0, slash);
}

std::string VolumeModeOf(const api::VolumeSpec& spec) {
  return spec.protocol == Protocol::kNfs ? "filesystem" : "block";
}

StatusOr<api::SnapshotRecord> GetSnapshotRecord(store::Store& st, const std::string& id) {
  ASSIGN_OR_RETURN(store::Object obj,
                   GetRecord(st, api::kKindSnapshot, id, "snapshot " + id + " does not exist"));
  return api::LoadSnapshot(obj);
}

void FillSnapshot(const api::SnapshotRecord& r, csi::v1::Snapshot* out) {
  out->set_snapshot_id(r.meta.name);
  out->set_source_volume_id(r.spec.source_volume_id);
  out->set_size_bytes(r.status.size_bytes);
  out->set_ready_to_use(r.status.ready_to_use);
  *out->mutable_creation_time() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(r.status.creation_time_unix_nanos);
}

}  // namespace

grpc::Status CsiController::CreateSnapshot(grpc::ServerContext*,
                                           const csi::v1::CreateSnapshotRequest* req,
                                           csi::v1::CreateSnapshotResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  return Reply(DoCreateSnapshot(*req, resp->mutable_snapshot()));
}

StatusOr<store::Object> CsiController::MutateSnapshotStatus(
    const std::string& snapshot_id, const std::function<Status(api::SnapshotStatus&)>& mutate) {
  return store::RetryOnConflict("snapshot " + snapshot_id, [&](int) -> StatusOr<store::Object> {
    ASSIGN_OR_RETURN(store::Object obj, store_.Get(api::kKindSnapshot, snapshot_id));
    ASSIGN_OR_RETURN(api::SnapshotStatus status, api::SnapshotStatusFromJson(obj.status));
    RETURN_IF_ERROR(mutate(status));
    obj.status = api::MergeStatus(obj.status, ToJson(status));
    return store_.UpdateStatus(obj);
  });
}

Status CsiController::DoCreateSnapshot(const csi::v1::CreateSnapshotRequest& req,
                                       csi::v1::Snapshot* out) {
  RETURN_IF_ERROR(RequireLeader());
  ASSIGN_OR_RETURN(SnapshotPlan plan, ParseCreateSnapshotRequest(req));
  const std::string& id = plan.snapshot_id;
  auto guard = locks_.Lock(LockKey(id));

  auto existing = store_.Get(api::kKindSnapshot, id);
  if (!existing.ok() && existing.status().code() != Code::kNotFound) return existing.status();
  if (existing.ok()) {
    ASSIGN_OR_RETURN(api::SnapshotRecord have, api::LoadSnapshot(*existing));
    if (have.spec.source_volume_id != plan.source_volume_id) {
      return AlreadyExists("snapshot " + id + " exists with source volume " +
                           have.spec.source_volume_id + ", not " + plan.source_volume_id);
    }
    if (have.spec.parameters != plan.recorded_parameters) {
      return AlreadyExists("snapshot " + id + " exists with other parameters");
    }
    if (have.status.deleting || have.meta.deletion_timestamp) {
      return Aborted("snapshot " + id + " is being deleted");
    }
    if (api::SnapshotConfirmed(have.status)) {
      FillSnapshot(have, out);
      return Status::Ok();
    }
    // A create the agent has not confirmed (cut off, or the agent was
    // unreachable): asked again below with the same uid, which the agent
    // answers with the snapshot it took, or takes it now.
  }

  // The source: a provisioned volume not being deleted. Its lock keeps a
  // DeleteVolume from running between this check and the agent's snapshot.
  auto volume_guard = locks_.Lock(plan.source_volume_id);
  ASSIGN_OR_RETURN(api::VolumeState src, GetProvisionedVolume(store_, plan.source_volume_id));
  if (src.status.deleting || src.meta.deletion_timestamp) {
    return FailedPrecondition("source volume " + plan.source_volume_id + " is being deleted");
  }
  ASSIGN_OR_RETURN(auto client, ClientFor(src.spec.agent_ref));

  store::Object obj;
  if (existing.ok()) {
    obj = *existing;
  } else {
    api::SnapshotSpec spec;
    spec.snapshot_id = id;
    spec.agent_ref = src.spec.agent_ref;
    spec.agent_snapshot_id = PoolOf(src.spec.agent_volume_id) + "/" + id;
    spec.source_volume_id = plan.source_volume_id;
    spec.source_volume_uid = src.meta.uid;
    spec.volume_mode = VolumeModeOf(src.spec);
    spec.parameters = plan.recorded_parameters;
    api::SnapshotStatus first;
    api::SetCondition(first.conditions,
                      {api::kCondSnapshotReady, "False", api::kReasonCreating,
                       "the agent has not confirmed the snapshot yet", "", 0},
                      FormatRfc3339(clock_.Now()));
    store::Object fresh;
    fresh.kind = api::kKindSnapshot;
    fresh.name = id;
    fresh.spec = ToJson(spec);
    fresh.status = ToJson(first);
    ASSIGN_OR_RETURN(obj, store_.Create(fresh));
  }
  ASSIGN_OR_RETURN(api::SnapshotRecord rec, api::LoadSnapshot(obj));
  if (rec.spec.source_volume_uid != src.meta.uid) {
    // The source volume was deleted and made again under the same name: this
    // record's snapshot would be of another lifecycle.
    return AlreadyExists("snapshot " + id + " was taken of an earlier volume named " +
                         plan.source_volume_id);
  }

  agent_api::CreateSnapshotRequest creq;
  creq.source_volume_id = src.spec.agent_volume_id;
  creq.source_volume_uid = src.meta.uid;
  creq.name = rec.spec.agent_snapshot_id.substr(rec.spec.agent_snapshot_id.rfind('/') + 1);
  creq.snapshot_uid = obj.uid;
  creq.detached = plan.detached;
  auto taken = client->CreateSnapshot(creq);
  if (!taken.ok()) {
    // As for volumes: a refusal left nothing of this lifecycle, so the record
    // goes; a failure that may have left a snapshot keeps it for the retry.
    if (AgentRefusedCreate(taken.status()) && !api::SnapshotConfirmed(rec.status)) {
      Status dropped = store_.Delete(api::kKindSnapshot, id, {obj.uid, std::nullopt});
      if (!dropped.ok() && dropped.code() != Code::kNotFound) {
        log::Warn("a refused snapshot's record could not be removed; the resync will",
                  {{"snapshot", id}, {"error", dropped.ToString()}});
      }
    }
    return taken.status().Annotate("snapshot " + id + " of volume " + plan.source_volume_id);
  }
  if (taken->size_bytes <= 0) {
    return Internal("agent reported snapshot " + taken->agent_snapshot_id + " with size " +
                    std::to_string(taken->size_bytes));
  }
  ASSIGN_OR_RETURN(obj, MutateSnapshotStatus(id, [&](api::SnapshotStatus& s) {
                     s.ready_to_use = taken->ready_to_use;
                     s.size_bytes = taken->size_bytes;
                     s.creation_time_unix_nanos = taken->creation_time_unix_nanos;
                     s.used_bytes = taken->used_bytes;
                     s.backend = taken->backend;
                     s.detached = taken->detached;
                     api::SetCondition(s.conditions,
                                       {api::kCondSnapshotReady,
                                        taken->ready_to_use ? "True" : "False", api::kReasonCreated,
                                        taken->ready_to_use ? "the agent holds the snapshot"
                                                            : "the agent is still completing it",
                                        "", obj.generation},
                                       FormatRfc3339(clock_.Now()));
                     return Status::Ok();
                   }));
  ASSIGN_OR_RETURN(rec, api::LoadSnapshot(obj));
  FillSnapshot(rec, out);
  log::Info("snapshot created", {{"snapshot", id},
                                 {"volume", plan.source_volume_id},
                                 {"sizeBytes", rec.status.size_bytes},
                                 {"backend", rec.status.backend}});
  return Status::Ok();
}

grpc::Status CsiController::DeleteSnapshot(grpc::ServerContext*,
                                           const csi::v1::DeleteSnapshotRequest* req,
                                           csi::v1::DeleteSnapshotResponse*) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  return Reply(DoDeleteSnapshot(req->snapshot_id()));
}

Status CsiController::DoDeleteSnapshot(const std::string& snapshot_id) {
  RETURN_IF_ERROR(RequireLeader());
  if (snapshot_id.empty()) return InvalidArgument("snapshot_id is required");
  auto guard = locks_.Lock(LockKey(snapshot_id));
  auto rec = GetSnapshotRecord(store_, snapshot_id);
  if (rec.status().code() == Code::kNotFound) return Status::Ok();  // never existed or gone
  RETURN_IF_ERROR(rec.status());
  // From here a restore refuses it, and the reconciler finishes the delete
  // should this call not.
  ASSIGN_OR_RETURN(store::Object marked, MutateSnapshotStatus(snapshot_id, [](auto& s) {
                     s.deleting = true;
                     s.ready_to_use = false;
                     return Status::Ok();
                   }));
  ASSIGN_OR_RETURN(auto client, ClientFor(rec->spec.agent_ref));
  Status deleted = client->DeleteSnapshot({rec->spec.agent_snapshot_id, marked.uid});
  // A create that never completed may have nothing on the agent, and the
  // name may be held by a snapshot that is not of this lifecycle (the agent
  // refuses to touch it): the record goes, the storage stays.
  bool unconfirmed = !api::SnapshotConfirmed(rec->status);
  if (!deleted.ok() && !(unconfirmed && AgentRefusedCreate(deleted))) {
    return deleted.Annotate("delete snapshot " + snapshot_id);
  }
  Status s = store_.Delete(api::kKindSnapshot, snapshot_id, {marked.uid, std::nullopt});
  if (!s.ok() && s.code() != Code::kNotFound) return s;
  log::Info("snapshot deleted", {{"snapshot", snapshot_id}});
  return Status::Ok();
}

grpc::Status CsiController::ListSnapshots(grpc::ServerContext*,
                                          const csi::v1::ListSnapshotsRequest* req,
                                          csi::v1::ListSnapshotsResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  if (req->max_entries() < 0) return Reply(InvalidArgument("max_entries must be >= 0"));
  auto listed = reconciler_.ReadAll(api::kKindSnapshot);
  if (!listed.ok()) return Reply(listed.status());
  std::vector<api::SnapshotRecord> items;  // sorted by name, as listed
  for (const auto& o : *listed) {
    auto r = api::LoadSnapshot(o);
    // Only snapshots the agent confirmed and nobody is deleting: a snapshot
    // whose delete was answered is gone from every listing at once.
    if (!r.ok() || r->status.deleting || !api::SnapshotConfirmed(r->status)) continue;
    if (!req->snapshot_id().empty() && r->meta.name != req->snapshot_id()) continue;
    if (!req->source_volume_id().empty() && r->spec.source_volume_id != req->source_volume_id()) {
      continue;
    }
    items.push_back(std::move(*r));
  }
  size_t start = 0;
  if (!req->starting_token().empty()) {
    const std::string& token = req->starting_token();
    const std::string after = token.substr(std::min(token.size(), kSnapshotListToken.size()));
    if (token.compare(0, kSnapshotListToken.size(), kSnapshotListToken) != 0 ||
        !validate::ObjectName("starting_token", after).ok()) {
      return Reply(Aborted("starting_token \"" + token + "\" is not a token of this driver"));
    }
    auto it = std::upper_bound(
        items.begin(), items.end(), after,
        [](const std::string& name, const api::SnapshotRecord& r) { return name < r.meta.name; });
    start = static_cast<size_t>(it - items.begin());
  }
  size_t limit = req->max_entries() > 0 ? static_cast<size_t>(req->max_entries()) : items.size();
  size_t i = start;
  for (; i < items.size() && static_cast<size_t>(resp->entries_size()) < limit; ++i) {
    FillSnapshot(items[i], resp->add_entries()->mutable_snapshot());
  }
  if (i < items.size()) {
    resp->set_next_token(std::string(kSnapshotListToken) + items[i - 1].meta.name);
  }
  return grpc::Status::OK;
}

StatusOr<CsiController::ResolvedSource> CsiController::ResolveSource(
    const CreatePlan& plan, const std::string& access_type, int64_t size_bytes,
    const csi::v1::CapacityRange& range) {
  const SourceRef& ref = *plan.source;
  const CreateParams& params = plan.params;
  const std::string want_mode = params.protocol == Protocol::kNfs ? "filesystem" : "block";
  ResolvedSource out;
  out.recorded.detached = params.detached;
  out.request.detached = params.detached;
  std::string what, agent_ref, agent_id, mode;
  int64_t source_size = 0;
  if (!ref.snapshot_id.empty()) {
    what = "snapshot " + ref.snapshot_id;
    ASSIGN_OR_RETURN(api::SnapshotRecord snap, GetSnapshotRecord(store_, ref.snapshot_id));
    if (snap.status.deleting || snap.meta.deletion_timestamp) {
      return NotFound(what + " is being deleted");
    }
    if (!api::SnapshotConfirmed(snap.status)) {
      return Unavailable(what + " is not taken yet: the agent has not confirmed it");
    }
    if (!snap.status.ready_to_use) {
      const api::Condition* c = api::FindCondition(snap.status.conditions, api::kCondSnapshotReady);
      std::string why =
          c == nullptr ? std::string("no condition yet") : c->reason + ": " + c->message;
      // Gone from the storage: no retry brings it back.
      if (c != nullptr && c->reason == api::kReasonSnapshotMissing) {
        return NotFound(what + " is not on its agent any more: " + why);
      }
      return Unavailable(what + " is not ready to use: " + why);
    }
    agent_ref = snap.spec.agent_ref;
    agent_id = snap.spec.agent_snapshot_id;
    mode = snap.spec.volume_mode;
    source_size = snap.status.size_bytes;
    out.recorded.snapshot_id = ref.snapshot_id;
    out.recorded.uid = snap.meta.uid;
    out.request.agent_snapshot_id = agent_id;
  } else {
    what = "volume " + ref.volume_id;
    ASSIGN_OR_RETURN(api::VolumeState src, GetProvisionedVolume(store_, ref.volume_id));
    if (src.status.deleting || src.meta.deletion_timestamp) {
      return NotFound(what + " is being deleted");
    }
    agent_ref = src.spec.agent_ref;
    agent_id = src.spec.agent_volume_id;
    mode = VolumeModeOf(src.spec);
    source_size = std::max(src.status.capacity_bytes, src.spec.capacity_bytes);
    if (src.spec.access_type != access_type) {
      return InvalidArgument("volume_content_source: " + what + " was created for " +
                             src.spec.access_type + " access, this volume for " + access_type);
    }
    out.recorded.volume_id = ref.volume_id;
    out.recorded.uid = src.meta.uid;
    out.request.agent_volume_id = agent_id;
  }
  out.request.source_uid = out.recorded.uid;
  if (agent_ref != params.agent_ref || PoolOf(agent_id) != params.pool) {
    return InvalidArgument("volume_content_source: " + what + " is on agent " + agent_ref +
                           " pool " + PoolOf(agent_id) + "; this StorageClass creates on agent " +
                           params.agent_ref + " pool " + params.pool +
                           " (a restore or clone stays in its source's pool)");
  }
  if (!mode.empty() && mode != want_mode) {
    return InvalidArgument("volume_content_source: " + what + " holds a " + mode +
                           " volume; protocol " + ProtocolName(params.protocol) + " needs " +
                           want_mode);
  }
  out.size_bytes = std::max(size_bytes, source_size);
  if (range.limit_bytes() > 0 && out.size_bytes > range.limit_bytes()) {
    return OutOfRange("capacity_range.limit_bytes " + std::to_string(range.limit_bytes()) +
                      " is below the size of " + what + " (" + std::to_string(source_size) +
                      " bytes)");
  }
  return out;
}

}  // namespace pillar::controller
