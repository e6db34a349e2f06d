#include "controller/csi_controller.h"

#include <limits>

#include "common/connection_timing.h"
#include "common/credentials.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/request_caps.h"
#include "common/validate.h"
#include "common/version.h"
#include "common/volume_context.h"
#include "controller/csi_records.h"
#include "controller/desired.h"
#include "store/retry.h"

namespace pillar::controller {

namespace {

// ListVolumes' next_token: this, then the name of the page's last volume.
constexpr std::string_view kListToken = "after:";

std::map<std::string, std::string> TimingParameters(const nlohmann::json& recorded) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : recorded.items()) {
    if (IsConnectionTimingKey(k) && v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

// The volume context contract (common/volume_context.h) of a volume, from
// its record; the endpoint is the one the reconciler derived (exportInfo).
VolumeContext ContextOf(const api::VolumeState& v) {
  VolumeContext c;
  c.protocol = v.spec.protocol;
  c.agent_volume_id = v.spec.agent_volume_id;
  c.fs_type = v.spec.fs_type;
  // The node plugin then requires its NodeStage secrets.
  if (v.status.export_spec && v.status.export_spec->auth == kAuthChap) c.auth = kAuthChap;
  // Recorded parameters were validated at CreateVolume; a record from before
  // connection timing existed gets the defaults.
  auto timing = ParseConnectionTiming(TimingParameters(v.spec.parameters), v.spec.protocol,
                                      "parameters.", /*fill_defaults=*/true);
  if (timing.ok()) c.timing = *timing;
  if (v.status.export_info) {
    c.target_id = v.status.export_info->target_id;
    c.address = v.status.export_info->address;
    c.port = static_cast<int>(v.status.export_info->port);
  }
  return c;
}

void FillContext(const VolumeContext& c, google::protobuf::Map<std::string, std::string>* ctx) {
  for (auto& [k, v] : FormatVolumeContext(c)) (*ctx)[k] = v;
}

void FillVolume(const api::VolumeState& v, csi::v1::Volume* out) {
  out->set_volume_id(v.meta.name);
  out->set_capacity_bytes(v.status.capacity_bytes > 0 ? v.status.capacity_bytes
                                                      : v.spec.capacity_bytes);
  FillContext(ContextOf(v), out->mutable_volume_context());
  if (v.spec.content_source) {
    auto* src = out->mutable_content_source();
    if (!v.spec.content_source->snapshot_id.empty()) {
      src->mutable_snapshot()->set_snapshot_id(v.spec.content_source->snapshot_id);
    } else {
      src->mutable_volume()->set_volume_id(v.spec.content_source->volume_id);
    }
  }
}

}  // namespace

grpc::Status CsiIdentity::GetPluginInfo(grpc::ServerContext*, const csi::v1::GetPluginInfoRequest*,
                                        csi::v1::GetPluginInfoResponse* resp) {
  resp->set_name(std::string(kDriverName));
  resp->set_vendor_version(std::string(Version()));
  return grpc::Status::OK;
}

grpc::Status CsiIdentity::GetPluginCapabilities(grpc::ServerContext*,
                                                const csi::v1::GetPluginCapabilitiesRequest*,
                                                csi::v1::GetPluginCapabilitiesResponse* resp) {
  resp->add_capabilities()->mutable_service()->set_type(
      csi::v1::PluginCapability::Service::CONTROLLER_SERVICE);
  resp->add_capabilities()->mutable_volume_expansion()->set_type(
      csi::v1::PluginCapability::VolumeExpansion::ONLINE);
  return grpc::Status::OK;
}

grpc::Status CsiIdentity::Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                                csi::v1::ProbeResponse* resp) {
  resp->mutable_ready()->set_value(leader_.IsLeader());
  return grpc::Status::OK;
}

Status CsiController::RequireLeader() {
  if (!leader_.IsLeader()) return Unavailable("this controller replica is not the leader");
  return Status::Ok();
}

StatusOr<std::shared_ptr<AgentClient>> CsiController::ClientFor(const std::string& agent_ref,
                                                                api::AgentRecord* record) {
  auto obj = GetRecord(store_, api::kKindAgent, agent_ref,
                       "PillarAgent \"" + agent_ref + "\" is not registered");
  // For CreateVolume an unknown agent is a bad parameter, not a missing volume.
  if (obj.status().code() == Code::kNotFound) {
    return InvalidArgument("parameters.agent: " + obj.status().message());
  }
  RETURN_IF_ERROR(obj.status());
  ASSIGN_OR_RETURN(api::AgentRecord rec, api::LoadAgent(*obj));
  if (record != nullptr) *record = rec;
  return agents_.Client(agent_ref, {rec.address, rec.port, rec.tls_server_name});
}

StatusOr<store::Object> CsiController::MutateStatus(
    const std::string& volume_id, const std::function<Status(api::VolumeStatus&)>& mutate) {
  return store::RetryOnConflict("volume " + volume_id, [&](int) -> StatusOr<store::Object> {
    ASSIGN_OR_RETURN(store::Object obj, store_.Get(api::kKindVolume, volume_id));
    ASSIGN_OR_RETURN(api::VolumeStatus status, api::VolumeStatusFromJson(obj.status));
    RETURN_IF_ERROR(mutate(status));
    // Merge into the raw status so fields this code does not model survive.
    nlohmann::json next = api::MergeStatus(obj.status, ToJson(status));
    if (!status.export_spec) next.erase("exportSpec");
    if (!status.export_info) next.erase("exportInfo");
    obj.status = next;
    return store_.UpdateStatus(obj);
  });
}

grpc::Status CsiController::CreateVolume(grpc::ServerContext*,
                                         const csi::v1::CreateVolumeRequest* req,
                                         csi::v1::CreateVolumeResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  return Reply(DoCreate(*req, resp->mutable_volume()));
}

Status CsiController::DoCreate(const csi::v1::CreateVolumeRequest& req, csi::v1::Volume* out) {
  RETURN_IF_ERROR(RequireLeader());
  ASSIGN_OR_RETURN(CreatePlan plan, ParseCreateRequest(req));
  const CreateParams& params = plan.params;
  const std::string& access_type = plan.access_type;
  const nlohmann::json& recorded = plan.recorded_parameters;
  const int64_t size = plan.size_bytes;
  const std::string& volume_id = plan.volume_id;

  auto guard = locks_.Lock(volume_id);
  api::AgentRecord agent_rec;
  ASSIGN_OR_RETURN(auto client, ClientFor(params.agent_ref, &agent_rec));

  api::VolumeSpec spec;
  spec.volume_id = volume_id;
  spec.agent_ref = params.agent_ref;
  spec.agent_volume_id = params.pool + "/" + volume_id;
  spec.protocol = params.protocol;
  spec.capacity_bytes = size;
  spec.access_type = access_type;
  spec.fs_type = params.fs_type;
  spec.parameters = recorded;

  // The export record this request makes: recorded with the object, and the
  // only source an export is ever rebuilt from.
  api::VolumeStatus first_status;
  first_status.export_spec =
      api::ExportSpec{params.bind_address.empty() ? agent_rec.address : params.bind_address,
                      params.port, params.acl_enabled, params.in_capsule_data_size};
  if (params.auth == kAuthChap) {
    first_status.export_spec->auth = kAuthChap;
    first_status.export_spec->auth_digest =
        CredentialsDigest(spec.agent_volume_id, plan.credentials);
  }
  if (params.protocol == Protocol::kNfs) {
    first_status.export_spec->nfs_root_squash = params.nfs_root_squash;
  }
  RETURN_IF_ERROR(validate::IpAddress("bindAddress (PillarAgent address)",
                                      first_status.export_spec->bind_address));
  const std::string now = FormatRfc3339(clock_.Now());
  api::SetCondition(first_status.conditions,
                    {api::kCondProvisioned, "False", api::kReasonCreating,
                     "the agent has not confirmed the backend volume yet", "", 0},
                    now);

  auto existing = store_.Get(api::kKindVolume, volume_id);
  // A restore or clone: its source checked before anything is recorded. A
  // retry of a create that completed needs its source no more (it may be
  // gone since); the agent already holds the volume.
  std::optional<ResolvedSource> source;
  if (plan.source) {
    auto resolved = ResolveSource(plan, access_type, size, req.capacity_range());
    bool completed = existing.ok() && api::IsProvisioned(LoadStatusOrEmpty(*existing)) &&
                     !existing->status.empty();
    if (resolved.ok()) {
      source = *resolved;
      spec.capacity_bytes = resolved->size_bytes;
    } else if (!completed) {
      return resolved.status();
    }
  }
  if (source) spec.content_source = source->recorded;
  store::Object obj;
  if (existing.ok() && existing->status.empty()) {
    // A create cut off between the object and its status (the Kubernetes
    // store writes them in two requests): this retry of the same request
    // records what that create would have. A record that was ever reconciled
    // has a status and is never filled in here.
    ASSIGN_OR_RETURN(api::VolumeState have, api::LoadVolume(*existing));
    if (have.spec.parameters == recorded && have.spec.access_type == access_type) {
      store::Object completed = *existing;
      completed.status = ToJson(first_status);
      ASSIGN_OR_RETURN(obj, store_.UpdateStatus(completed));
      existing = obj;
      log::Warn("volume record completed: its create had not written its status",
                {{"volume", volume_id}});
    }
  }
  if (existing.ok()) {
    ASSIGN_OR_RETURN(api::VolumeState have, api::LoadVolume(*existing));
    if (have.spec.parameters != recorded || have.spec.access_type != access_type) {
      return AlreadyExists("volume " + volume_id +
                           " exists with different parameters or access type");
    }
    auto ids = [](const std::optional<api::ContentSource>& c) {
      return c ? SourceRef{c->snapshot_id, c->volume_id} : SourceRef{};
    };
    if (ids(have.spec.content_source) != (plan.source ? *plan.source : SourceRef{})) {
      return AlreadyExists("volume " + volume_id + " exists with another content source");
    }
    int64_t have_size = std::max(have.status.capacity_bytes, have.spec.capacity_bytes);
    if (have_size < req.capacity_range().required_bytes() ||
        (req.capacity_range().limit_bytes() > 0 &&
         have_size > req.capacity_range().limit_bytes())) {
      return AlreadyExists("volume " + volume_id + " exists with capacity " +
                           std::to_string(have_size) + " outside the requested range");
    }
    if (have.status.deleting || have.meta.deletion_timestamp) {
      return Aborted("volume " + volume_id + " is being deleted");
    }
    if (params.auth == kAuthChap && have.status.export_spec &&
        have.status.export_spec->auth_digest != first_status.export_spec->auth_digest) {
      return AlreadyExists("volume " + volume_id + " exists with other auth credentials");
    }
    obj = *existing;
    spec = have.spec;
  } else if (existing.status().code() == Code::kNotFound) {
    // Record the intent first, exportSpec included.
    store::Object fresh;
    fresh.kind = api::kKindVolume;
    fresh.name = volume_id;
    fresh.spec = ToJson(spec);
    fresh.status = ToJson(first_status);
    ASSIGN_OR_RETURN(obj, store_.Create(fresh));
  } else {
    return existing.status();
  }

  agent_api::CreateVolumeRequest creq;
  creq.pool = params.pool;
  creq.name = volume_id;
  creq.size_bytes = spec.capacity_bytes;
  creq.mode = params.protocol == Protocol::kNfs ? agent_api::VolumeMode::kFilesystem
                                                : agent_api::VolumeMode::kBlock;
  creq.volume_uid = obj.uid;
  creq.import_existing = params.import_existing;
  creq.parameters.insert(params.backend_params.begin(), params.backend_params.end());
  if (params.protocol == Protocol::kNfs) {
    creq.root =
        agent_api::VolumeRoot{params.nfs_root_mode, params.nfs_root_uid, params.nfs_root_gid};
  }
  if (source) creq.source = source->request;
  if (plan.source && !source) {
    // Completed before, its source gone since: the agent's volume stands.
    creq.source.reset();
  }
  auto created = client->CreateVolume(creq);
  if (!created.ok()) {
    // The agent refused: nothing of this lifecycle exists on it (it marks
    // and fences only what it made), so the record goes too and nothing can
    // ever act on it. A failure that may have left storage behind (the agent
    // unreachable, a timeout) keeps the record for the CO's retry, which
    // reuses its uid; until then it is Provisioned=False and left alone.
    if (AgentRefusedCreate(created.status()) && !api::IsProvisioned(LoadStatusOrEmpty(obj))) {
      Status dropped = store_.Delete(api::kKindVolume, volume_id, {obj.uid, std::nullopt});
      if (!dropped.ok() && dropped.code() != Code::kNotFound) {
        log::Warn("a refused create's record could not be removed; the resync will",
                  {{"volume", volume_id}, {"error", dropped.ToString()}});
      }
    }
    return created.status();
  }
  int64_t actual_size = created->size_bytes;
  ASSIGN_OR_RETURN(obj, MutateStatus(volume_id, [&](api::VolumeStatus& s) {
                     s.capacity_bytes = actual_size;
                     s.backend = created->backend;
                     api::SetCondition(s.conditions,
                                       {api::kCondProvisioned, "True", api::kReasonCreated,
                                        "the agent created or imported the backend volume", "", 0},
                                       FormatRfc3339(clock_.Now()));
                     return Status::Ok();
                   }));
  if (params.auth == kAuthChap) reconciler_.OfferCredentials(volume_id, plan.credentials);
  ASSIGN_OR_RETURN(ReconcileOutcome outcome, reconciler_.ReconcileNow(volume_id));
  if (outcome.condition.status != "True") {
    return Unavailable("volume " + volume_id + " was created but its export is not ready: " +
                       outcome.condition.reason + ": " + outcome.condition.message);
  }
  ASSIGN_OR_RETURN(obj, store_.Get(api::kKindVolume, volume_id));
  ASSIGN_OR_RETURN(api::VolumeState v, api::LoadVolume(obj));
  FillVolume(v, out);
  log::Info("volume created", {{"volume", volume_id},
                               {"agent", spec.agent_ref},
                               {"sizeBytes", actual_size},
                               {"protocol", ProtocolName(spec.protocol)}});
  return Status::Ok();
}

grpc::Status CsiController::DeleteVolume(grpc::ServerContext*,
                                         const csi::v1::DeleteVolumeRequest* req,
                                         csi::v1::DeleteVolumeResponse*) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  return Reply(DoDelete(req->volume_id()));
}

Status CsiController::DoDelete(const std::string& volume_id) {
  RETURN_IF_ERROR(RequireLeader());
  if (volume_id.empty()) return InvalidArgument("volume_id is required");
  auto guard = locks_.Lock(volume_id);
  auto obj = GetVolume(store_, volume_id);
  if (obj.status().code() == Code::kNotFound) return Status::Ok();  // never existed or gone
  RETURN_IF_ERROR(obj.status());
  ASSIGN_OR_RETURN(api::VolumeState v, api::LoadVolume(*obj));
  for (const auto& n : v.status.published_nodes) {
    if (!n.revoking) {
      return FailedPrecondition("volume " + volume_id + " is still published to node " + n.node_id);
    }
  }
  // From here the reconciler leaves the volume alone.
  ASSIGN_OR_RETURN(store::Object marked, MutateStatus(volume_id, [](api::VolumeStatus& s) {
                     s.deleting = true;
                     s.publication_generation++;
                     return Status::Ok();
                   }));
  ASSIGN_OR_RETURN(api::VolumeState cur, api::LoadVolume(marked));
  ASSIGN_OR_RETURN(auto client, ClientFor(v.spec.agent_ref));
  auto unexported = client->UnexportVolume(
      {v.spec.agent_volume_id, v.spec.protocol, {cur.meta.uid, cur.status.publication_generation}});
  if (!unexported.ok() && unexported.status().code() != Code::kNotFound) {
    return unexported.status().Annotate("unexport " + volume_id);
  }
  Status deleted = client->DeleteVolume({v.spec.agent_volume_id, cur.meta.uid});
  // A create that never completed may have nothing of its lifecycle on the
  // agent, and the name may be held by storage that is not pillar's (the
  // agent refuses to touch it): the record goes, the storage stays.
  if (!deleted.ok() && !NothingOfThisLifecycleLeft(deleted, api::IsProvisioned(v.status))) {
    return deleted.Annotate("delete backend volume of " + volume_id);
  }
  Status s = store_.Delete(api::kKindVolume, volume_id, {cur.meta.uid, std::nullopt});
  if (!s.ok() && s.code() != Code::kNotFound) return s;
  log::Info("volume deleted", {{"volume", volume_id}});
  return Status::Ok();
}

grpc::Status CsiController::ControllerPublishVolume(
    grpc::ServerContext*, const csi::v1::ControllerPublishVolumeRequest* req,
    csi::v1::ControllerPublishVolumeResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  return Reply(DoPublish(*req, resp));
}

Status CsiController::DoPublish(const csi::v1::ControllerPublishVolumeRequest& req,
                                csi::v1::ControllerPublishVolumeResponse* resp) {
  RETURN_IF_ERROR(RequireLeader());
  if (req.volume_id().empty()) return InvalidArgument("volume_id is required");
  if (req.node_id().empty()) return InvalidArgument("node_id is required");
  if (!req.has_volume_capability()) return InvalidArgument("volume_capability is required");
  auto guard = locks_.Lock(req.volume_id());
  ASSIGN_OR_RETURN(api::VolumeState v, GetProvisionedVolume(store_, req.volume_id()));
  if (v.status.deleting)
    return FailedPrecondition("volume " + req.volume_id() + " is being deleted");
  RETURN_IF_ERROR(
      ValidateCapability(req.volume_capability(), v.spec.protocol, "volume_capability"));
  std::string want_type = req.volume_capability().has_block() ? "block" : "mount";
  if (!v.spec.access_type.empty() && want_type != v.spec.access_type) {
    return InvalidArgument("volume_capability: volume " + req.volume_id() + " was created for " +
                           v.spec.access_type + " access");
  }
  RETURN_IF_ERROR(GetRecord(store_, api::kKindNode, req.node_id(),
                            "node " + req.node_id() + " is not registered (no PillarNode)")
                      .status());
  // Published to this node already (under this volume's lock): the same
  // readonly flag is idempotent, another one is ALREADY_EXISTS (CSI).
  for (const auto& n : v.status.published_nodes) {
    if (n.node_id == req.node_id() && !n.revoking && n.read_only != req.readonly()) {
      return AlreadyExists("volume " + req.volume_id() + " is published to node " + req.node_id() +
                           " with readonly=" + (n.read_only ? "true" : "false"));
    }
  }
  RETURN_IF_ERROR(OfferPublishSecrets(v, req.secrets()));
  bool single = IsSingleNode(req.volume_capability().access_mode().mode());
  ASSIGN_OR_RETURN(store::Object written, MutateStatus(req.volume_id(), [&](api::VolumeStatus& s) {
                     bool present = false;
                     for (auto& n : s.published_nodes) {
                       if (n.node_id == req.node_id()) {
                         present = true;
                         if (n.revoking) {
                           n.revoking = false;
                           n.read_only = req.readonly();
                           s.publication_generation++;
                         }
                       } else if (single && !n.revoking) {
                         return FailedPrecondition("volume " + req.volume_id() +
                                                   " is published to node " + n.node_id +
                                                   " and its access mode is single-node");
                       }
                     }
                     if (!present) {
                       s.published_nodes.push_back({req.node_id(), false, req.readonly()});
                       s.publication_generation++;
                     }
                     return Status::Ok();
                   }));
  (void)written;
  ASSIGN_OR_RETURN(ReconcileOutcome outcome, reconciler_.ReconcileNow(req.volume_id()));
  if (outcome.condition.status != "True") {
    Code code = outcome.condition.reason == std::string(api::kReasonAgentUnavailable)
                    ? Code::kUnavailable
                    : Code::kInternal;
    return {code, "publish of " + req.volume_id() + " to " + req.node_id() +
                      " is recorded but not yet applied: " + outcome.condition.reason + ": " +
                      outcome.condition.message};
  }
  ASSIGN_OR_RETURN(store::Object now, store_.Get(api::kKindVolume, req.volume_id()));
  ASSIGN_OR_RETURN(api::VolumeState cur, api::LoadVolume(now));
  VolumeContext published = ContextOf(cur);
  published.read_only = req.readonly();
  FillContext(published, resp->mutable_publish_context());
  log::Info("volume published", {{"volume", req.volume_id()},
                                 {"node", req.node_id()},
                                 {"generation", cur.status.publication_generation}});
  return Status::Ok();
}

// ControllerPublish secrets (csi.storage.k8s.io/controller-publish-secret-*)
// give the agent an auth=chap volume's credentials again, e.g. after its
// state directory was lost; optional, but when given they must match.
Status CsiController::OfferPublishSecrets(
    const api::VolumeState& v, const google::protobuf::Map<std::string, std::string>& secrets) {
  if (secrets.empty() || !v.status.export_spec || v.status.export_spec->auth != kAuthChap) {
    return Status::Ok();
  }
  std::map<std::string, std::string> m(secrets.begin(), secrets.end());
  ASSIGN_OR_RETURN(Credentials c, CredentialsFromSecrets(v.spec.protocol, m, "secrets"));
  if (CredentialsDigest(v.spec.agent_volume_id, c) != v.status.export_spec->auth_digest) {
    return InvalidArgument("secrets: the credentials differ from those volume " + v.meta.name +
                           " was created with (its recorded authDigest)");
  }
  reconciler_.OfferCredentials(v.meta.name, std::move(c));
  return Status::Ok();
}

grpc::Status CsiController::ControllerUnpublishVolume(
    grpc::ServerContext*, const csi::v1::ControllerUnpublishVolumeRequest* req,
    csi::v1::ControllerUnpublishVolumeResponse*) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  return Reply(DoUnpublish(req->volume_id(), req->node_id()));
}

Status CsiController::DoUnpublish(const std::string& volume_id, const std::string& node_id) {
  RETURN_IF_ERROR(RequireLeader());
  if (volume_id.empty()) return InvalidArgument("volume_id is required");
  auto guard = locks_.Lock(volume_id);
  auto obj = GetVolume(store_, volume_id);
  // Nothing is published from a volume that does not exist.
  if (obj.status().code() == Code::kNotFound) return Status::Ok();
  RETURN_IF_ERROR(obj.status());
  ASSIGN_OR_RETURN(api::VolumeState v, api::LoadVolume(*obj));
  std::vector<std::string> targets;
  for (const auto& n : v.status.published_nodes) {
    if (node_id.empty() || n.node_id == node_id) targets.push_back(n.node_id);
  }
  for (const auto& target : targets) {
    // Phase 1: revoking. Only this node's entry leaves the desired ACL.
    RETURN_IF_ERROR(MutateStatus(volume_id, [&](api::VolumeStatus& s) {
                      for (auto& n : s.published_nodes) {
                        if (n.node_id == target && !n.revoking) {
                          n.revoking = true;
                          s.publication_generation++;
                        }
                      }
                      return Status::Ok();
                    }).status());
    ASSIGN_OR_RETURN(ReconcileOutcome outcome, reconciler_.ReconcileNow(volume_id));
    bool confirmed = outcome.condition.status == "True" ||
                     outcome.condition.reason == std::string(api::kReasonExportSpecMissing);
    if (!confirmed) {
      Code code = outcome.condition.reason == std::string(api::kReasonAgentUnavailable)
                      ? Code::kUnavailable
                      : Code::kInternal;
      return {code, "unpublish of " + volume_id + " from " + target +
                        " is recorded (revoking) but not yet confirmed: " +
                        outcome.condition.reason + ": " + outcome.condition.message};
    }
    // Phase 2: confirmed gone from the target; drop the publication.
    RETURN_IF_ERROR(MutateStatus(volume_id, [&](api::VolumeStatus& s) {
                      auto& list = s.published_nodes;
                      auto it = std::remove_if(
                          list.begin(), list.end(),
                          [&](const api::PublishedNode& n) { return n.node_id == target; });
                      if (it != list.end()) {
                        list.erase(it, list.end());
                        s.publication_generation++;
                      }
                      return Status::Ok();
                    }).status());
    auto final_pass = reconciler_.ReconcileNow(volume_id);  // advances the fence mark
    if (!final_pass.ok())
      log::Warn("post-unpublish reconcile", {{"error", final_pass.status().ToString()}});
    log::Info("volume unpublished", {{"volume", volume_id}, {"node", target}});
  }
  return Status::Ok();
}

grpc::Status CsiController::ValidateVolumeCapabilities(
    grpc::ServerContext*, const csi::v1::ValidateVolumeCapabilitiesRequest* req,
    csi::v1::ValidateVolumeCapabilitiesResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  if (req->volume_id().empty()) return Reply(InvalidArgument("volume_id is required"));
  if (req->volume_capabilities().empty()) {
    return Reply(InvalidArgument("volume_capabilities is required"));
  }
  auto v = GetProvisionedVolume(store_, req->volume_id());
  if (!v.ok()) return Reply(v.status());
  for (int i = 0; i < req->volume_capabilities_size(); ++i) {
    const auto& cap = req->volume_capabilities(i);
    Status s =
        ValidateCapability(cap, v->spec.protocol, "volume_capabilities[" + std::to_string(i) + "]");
    std::string t = cap.has_block() ? "block" : "mount";
    if (s.ok() && !v->spec.access_type.empty() && t != v->spec.access_type) {
      s = InvalidArgument("volume was created for " + v->spec.access_type + " access");
    }
    if (!s.ok()) {
      resp->set_message(s.message());
      return grpc::Status::OK;
    }
  }
  auto* confirmed = resp->mutable_confirmed();
  *confirmed->mutable_volume_capabilities() = req->volume_capabilities();
  *confirmed->mutable_volume_context() = req->volume_context();
  *confirmed->mutable_parameters() = req->parameters();
  return grpc::Status::OK;
}

grpc::Status CsiController::ListVolumes(grpc::ServerContext*,
                                        const csi::v1::ListVolumesRequest* req,
                                        csi::v1::ListVolumesResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  if (req->max_entries() < 0) return Reply(InvalidArgument("max_entries must be >= 0"));
  // From the reconciler's watch-fed cache once it runs: listing every volume
  // costs the store nothing. Single-volume reads go to the store (read your
  // own writes).
  auto listed = reconciler_.ReadAll(api::kKindVolume);
  if (!listed.ok()) return Reply(listed.status());
  const std::vector<store::Object>& items = *listed;  // sorted by name
  size_t start = 0;
  if (!req->starting_token().empty()) {
    // A token is kListToken and the name of the last volume of a page; one
    // of another form was never ours (ABORTED, as CSI says). A volume
    // deleted since still resumes the listing after its name.
    const std::string& token = req->starting_token();
    const std::string after = token.substr(std::min(token.size(), kListToken.size()));
    if (token.compare(0, kListToken.size(), kListToken) != 0 ||
        !validate::ObjectName("starting_token", after).ok()) {
      return Reply(Aborted("starting_token \"" + token + "\" is not a token of this driver"));
    }
    auto it = std::upper_bound(
        items.begin(), items.end(), after,
        [](const std::string& name, const store::Object& o) { return name < o.name; });
    start = static_cast<size_t>(it - items.begin());
  }
  size_t limit = req->max_entries() > 0 ? static_cast<size_t>(req->max_entries()) : items.size();
  size_t i = start;
  for (; i < items.size() && resp->entries_size() < static_cast<int>(limit); ++i) {
    auto v = api::LoadVolume(items[i]);
    if (!v.ok() || !api::IsProvisioned(v->status)) continue;
    auto* e = resp->add_entries();
    FillVolume(*v, e->mutable_volume());
    for (const auto& n : v->status.published_nodes) {
      if (!n.revoking) e->mutable_status()->add_published_node_ids(n.node_id);
    }
    const api::Condition* c = api::FindCondition(v->status.conditions, api::kCondExportReconciled);
    if (c != nullptr) {
      e->mutable_status()->mutable_volume_condition()->set_abnormal(c->status != "True");
      e->mutable_status()->mutable_volume_condition()->set_message(c->reason + ": " + c->message);
    }
  }
  if (i < items.size()) resp->set_next_token(std::string(kListToken) + items[i - 1].name);
  return grpc::Status::OK;
}

grpc::Status CsiController::ControllerGetVolume(grpc::ServerContext*,
                                                const csi::v1::ControllerGetVolumeRequest* req,
                                                csi::v1::ControllerGetVolumeResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  if (req->volume_id().empty()) return Reply(InvalidArgument("volume_id is required"));
  auto v = GetProvisionedVolume(store_, req->volume_id());
  if (!v.ok()) return Reply(v.status());
  FillVolume(*v, resp->mutable_volume());
  for (const auto& n : v->status.published_nodes) {
    if (!n.revoking) resp->mutable_status()->add_published_node_ids(n.node_id);
  }
  const api::Condition* c = api::FindCondition(v->status.conditions, api::kCondExportReconciled);
  auto* vc = resp->mutable_status()->mutable_volume_condition();
  vc->set_abnormal(c == nullptr || c->status != "True");
  vc->set_message(c == nullptr ? "not reconciled yet" : c->reason + ": " + c->message);
  return grpc::Status::OK;
}

grpc::Status CsiController::GetCapacity(grpc::ServerContext*,
                                        const csi::v1::GetCapacityRequest* req,
                                        csi::v1::GetCapacityResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  auto agent = req->parameters().find("agent");
  auto pool = req->parameters().find("pool");
  if (agent == req->parameters().end() && pool == req->parameters().end()) {
    // No parameters: what every agent's pools have together. An agent that
    // cannot answer makes the answer UNAVAILABLE, never counted as empty.
    auto agents = reconciler_.ReadAll(api::kKindAgent);
    if (!agents.ok()) return Reply(agents.status());
    int64_t total = 0, largest = 0;
    for (const auto& a : *agents) {
      auto client = ClientFor(a.name);
      if (!client.ok()) return Reply(client.status());
      auto pools = (*client)->GetCapacity("");
      if (!pools.ok()) return Reply(pools.status().Annotate("capacity of agent " + a.name));
      for (const auto& p : *pools) {
        total += p.available_bytes;
        largest = std::max(largest, p.available_bytes);
      }
    }
    resp->set_available_capacity(total);
    resp->mutable_maximum_volume_size()->set_value(largest);
    return grpc::Status::OK;
  }
  if (agent == req->parameters().end() || pool == req->parameters().end()) {
    return Reply(InvalidArgument("parameters.agent and parameters.pool go together"));
  }
  auto client = ClientFor(agent->second);
  if (!client.ok()) return Reply(client.status());
  auto pools = (*client)->GetCapacity(pool->second);
  if (!pools.ok()) return Reply(pools.status());
  for (const auto& p : *pools) {
    if (p.name == pool->second) {
      resp->set_available_capacity(p.available_bytes);
      resp->mutable_maximum_volume_size()->set_value(p.available_bytes);
    }
  }
  return grpc::Status::OK;
}

grpc::Status CsiController::ControllerGetCapabilities(
    grpc::ServerContext*, const csi::v1::ControllerGetCapabilitiesRequest*,
    csi::v1::ControllerGetCapabilitiesResponse* resp) {
  using T = csi::v1::ControllerServiceCapability::RPC;
  for (auto t :
       {T::CREATE_DELETE_VOLUME, T::PUBLISH_UNPUBLISH_VOLUME, T::LIST_VOLUMES, T::GET_CAPACITY,
        T::PUBLISH_READONLY, T::EXPAND_VOLUME, T::LIST_VOLUMES_PUBLISHED_NODES, T::VOLUME_CONDITION,
        T::GET_VOLUME, T::CREATE_DELETE_SNAPSHOT, T::LIST_SNAPSHOTS, T::CLONE_VOLUME}) {
    resp->add_capabilities()->mutable_rpc()->set_type(t);
  }
  return grpc::Status::OK;
}

grpc::Status CsiController::ControllerExpandVolume(
    grpc::ServerContext*, const csi::v1::ControllerExpandVolumeRequest* req,
    csi::v1::ControllerExpandVolumeResponse* resp) {
  if (Status caps = CheckRequestCaps(*req); !caps.ok()) return ToGrpc(caps);
  return Reply(DoExpand(*req, resp));
}

Status CsiController::DoExpand(const csi::v1::ControllerExpandVolumeRequest& req,
                               csi::v1::ControllerExpandVolumeResponse* resp) {
  RETURN_IF_ERROR(RequireLeader());
  if (req.volume_id().empty()) return InvalidArgument("volume_id is required");
  if (!req.has_capacity_range()) return InvalidArgument("capacity_range is required");
  ASSIGN_OR_RETURN(int64_t size, PickSize(req.capacity_range()));
  auto guard = locks_.Lock(req.volume_id());
  ASSIGN_OR_RETURN(api::VolumeState v, GetProvisionedVolume(store_, req.volume_id()));
  ASSIGN_OR_RETURN(auto client, ClientFor(v.spec.agent_ref));
  int64_t have = std::max(v.status.capacity_bytes, v.spec.capacity_bytes);
  int64_t actual = have;
  if (size > have) {
    ASSIGN_OR_RETURN(auto expanded,
                     client->ExpandVolume({v.spec.agent_volume_id, size, v.meta.uid}));
    actual = expanded.size_bytes;
    RETURN_IF_ERROR(MutateStatus(req.volume_id(), [&](api::VolumeStatus& s) {
                      s.capacity_bytes = actual;
                      return Status::Ok();
                    }).status());
  }
  resp->set_capacity_bytes(actual);
  resp->set_node_expansion_required(v.spec.access_type == "mount" &&
                                    v.spec.protocol != Protocol::kNfs);
  return Status::Ok();
}

}  // namespace pillar::controller
