// CSI Identity + Controller: records intent in the store, drives the agents
// for backend volumes, and confirms every ACL change through the reconciler.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/credentials.h"
#include "common/named_locks.h"
#include "controller/agent_client.h"
#include "controller/leader.h"
#include "controller/reconciler.h"
#include "csi/v1/csi.grpc.pb.h"
#include "store/store.h"

namespace pillar::controller {

class CsiIdentity final : public csi::v1::Identity::Service {
 public:
  explicit CsiIdentity(LeaderGate& leader) : leader_(leader) {}
  grpc::Status GetPluginInfo(grpc::ServerContext*, const csi::v1::GetPluginInfoRequest*,
                             csi::v1::GetPluginInfoResponse* resp) override;
  grpc::Status GetPluginCapabilities(grpc::ServerContext*,
                                     const csi::v1::GetPluginCapabilitiesRequest*,
                                     csi::v1::GetPluginCapabilitiesResponse* resp) override;
  grpc::Status Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                     csi::v1::ProbeResponse* resp) override;

 private:
  LeaderGate& leader_;
};

class CsiController final : public csi::v1::Controller::Service {
 public:
  CsiController(store::Store& store, AgentDirectory& agents, ExportReconciler& reconciler,
                LeaderGate& leader, Clock& clock)
      : store_(store), agents_(agents), reconciler_(reconciler), leader_(leader), clock_(clock) {}

  grpc::Status CreateVolume(grpc::ServerContext*, const csi::v1::CreateVolumeRequest* req,
                            csi::v1::CreateVolumeResponse* resp) override;
  grpc::Status DeleteVolume(grpc::ServerContext*, const csi::v1::DeleteVolumeRequest* req,
                            csi::v1::DeleteVolumeResponse* resp) override;
  grpc::Status ControllerPublishVolume(grpc::ServerContext*,
                                       const csi::v1::ControllerPublishVolumeRequest* req,
                                       csi::v1::ControllerPublishVolumeResponse* resp) override;
  grpc::Status ControllerUnpublishVolume(grpc::ServerContext*,
                                         const csi::v1::ControllerUnpublishVolumeRequest* req,
                                         csi::v1::ControllerUnpublishVolumeResponse* resp) override;
  grpc::Status ValidateVolumeCapabilities(
      grpc::ServerContext*, const csi::v1::ValidateVolumeCapabilitiesRequest* req,
      csi::v1::ValidateVolumeCapabilitiesResponse* resp) override;
  grpc::Status ListVolumes(grpc::ServerContext*, const csi::v1::ListVolumesRequest* req,
                           csi::v1::ListVolumesResponse* resp) override;
  grpc::Status GetCapacity(grpc::ServerContext*, const csi::v1::GetCapacityRequest* req,
                           csi::v1::GetCapacityResponse* resp) override;
  grpc::Status ControllerGetCapabilities(grpc::ServerContext*,
                                         const csi::v1::ControllerGetCapabilitiesRequest*,
                                         csi::v1::ControllerGetCapabilitiesResponse* resp) override;
  grpc::Status ControllerExpandVolume(grpc::ServerContext*,
                                      const csi::v1::ControllerExpandVolumeRequest* req,
                                      csi::v1::ControllerExpandVolumeResponse* resp) override;
  grpc::Status ControllerGetVolume(grpc::ServerContext*,
                                   const csi::v1::ControllerGetVolumeRequest* req,
                                   csi::v1::ControllerGetVolumeResponse* resp) override;

 private:
  Status DoCreate(const csi::v1::CreateVolumeRequest& req, csi::v1::Volume* out);
  Status DoDelete(const std::string& volume_id);
  Status OfferPublishSecrets(const api::VolumeState& v,
                             const google::protobuf::Map<std::string, std::string>& secrets);
  Status DoPublish(const csi::v1::ControllerPublishVolumeRequest& req,
                   csi::v1::ControllerPublishVolumeResponse* resp);
  Status DoUnpublish(const std::string& volume_id, const std::string& node_id);
  Status DoExpand(const csi::v1::ControllerExpandVolumeRequest& req,
                  csi::v1::ControllerExpandVolumeResponse* resp);
  // Applies `mutate` to the pvst status with CAS retries.
  StatusOr<store::Object> MutateStatus(const std::string& volume_id,
                                       const std::function<Status(api::VolumeStatus&)>& mutate);
  StatusOr<std::shared_ptr<AgentClient>> ClientFor(const std::string& agent_ref,
                                                   api::AgentRecord* record = nullptr);
  Status RequireLeader();

  store::Store& store_;
  AgentDirectory& agents_;
  ExportReconciler& reconciler_;
  LeaderGate& leader_;
  Clock& clock_;
  NamedLocks locks_;  // one CSI operation per volume at a time
};

// World-writable, as NFS provisioners commonly make a volume: under
// root_squash a pod's root is nobody, and it must still be able to write.
constexpr uint32_t kDefaultNfsRootMode = 0777;

// Exposed for unit tests: the checks CreateVolume applies to its request.
struct CreateParams {
  std::string agent_ref;
  std::string pool;
  Protocol protocol = Protocol::kNvmeofTcp;
  bool acl_enabled = true;
  int64_t port = 0;
  std::string bind_address;  // empty: the agent's address
  std::string fs_type;
  std::optional<int64_t> in_capsule_data_size;
  std::map<std::string, std::string> backend_params;
  // parameters.import=true: adopt existing, unmarked storage of the volume's
  // name on the agent instead of creating it (recorded in spec.parameters).
  bool import_existing = false;
  std::string auth = kAuthNone;         // parameters.auth
  std::optional<bool> nfs_root_squash;  // parameters.nfsRootSquash (absent: true)
  // NFS: the new volume's root directory, from parameters.nfsRootMode
  // (absent: kDefaultNfsRootMode) and parameters.nfsRootOwner ("uid:gid",
  // absent: 0:0). Given to the agent once, at creation.
  uint32_t nfs_root_mode = kDefaultNfsRootMode;
  uint32_t nfs_root_uid = 0;
  uint32_t nfs_root_gid = 0;
};
// The StorageClass parameters pillar knows besides the backend.* and
// csi.storage.k8s.io/* prefixes; README, the chart's schema and
// docs/in-band-auth.md are checked against it (tests/controller/desired_test.cc).
const std::set<std::string>& KnownCreateParameters();
StatusOr<CreateParams> ParseCreateParameters(
    const google::protobuf::Map<std::string, std::string>& p);

// A CreateVolume request checked whole before anything is recorded: its
// parameters, the one access type of its capabilities, the size to provision
// and the parameters as recorded in spec.parameters (for idempotency).
// The volume ID (the record's name and the backend volume's) of a CSI volume
// name: the name itself when it already is one (a lowercase DNS-1123 name
// pillar's backends accept, as Kubernetes' "pvc-<uid>" is); any other name
// (upper case, '_', up to the CSI limit of 128 bytes) folded to [a-z0-9-],
// cut to 40 characters, plus '-' and 16 hex digits of its SHA-256, so the same
// name always maps to the same ID. Such a volume records its CSI name in its
// parameters (kCsiNameParameter): a create whose name maps to an ID held by
// another name finds other parameters there and is ALREADY_EXISTS.
std::string VolumeIdForName(const std::string& name);
constexpr const char* kCsiNameParameter = "pillar-csi.bhyoo.com/csi-name";

struct CreatePlan {
  std::string volume_id;  // VolumeIdForName(request name)
  CreateParams params;
  std::string access_type;  // "block" or "mount"
  Credentials credentials;  // from the request's secrets when parameters.auth is chap
  int64_t size_bytes = 0;
  nlohmann::json recorded_parameters = nlohmann::json::object();
};
StatusOr<CreatePlan> ParseCreateRequest(const csi::v1::CreateVolumeRequest& req);
Status ValidateCapability(const csi::v1::VolumeCapability& cap, Protocol protocol,
                          const std::string& field);

}  // namespace pillar::controller
