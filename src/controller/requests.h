// The CSI Controller's requests checked whole before anything is recorded:
// CreateVolume's parameters (the StorageClass), its capabilities, the size
// to provision, and the volume ID of a CSI name. Pure functions of the
// request; csi_controller.cc acts on what they return.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "common/credentials.h"
#include "common/protocol.h"
#include "common/status.h"
#include "csi/v1/csi.pb.h"

namespace pillar::controller {

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
  // parameters.detached=true: a volume restored or cloned from a source
  // shares nothing with it (a full copy) instead of depending on it.
  bool detached = false;
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

// CreateVolume's volume_content_source: a snapshot or a volume (exactly one).
struct SourceRef {
  std::string snapshot_id;
  std::string volume_id;

  bool operator==(const SourceRef&) const = default;
};

struct CreatePlan {
  std::string volume_id;  // VolumeIdForName(request name)
  CreateParams params;
  std::string access_type;  // "block" or "mount"
  Credentials credentials;  // from the request's secrets when parameters.auth is chap
  int64_t size_bytes = 0;
  nlohmann::json recorded_parameters = nlohmann::json::object();
  std::optional<SourceRef> source;  // absent: an empty volume
};
StatusOr<CreatePlan> ParseCreateRequest(const csi::v1::CreateVolumeRequest& req);
Status ValidateCapability(const csi::v1::VolumeCapability& cap, Protocol protocol,
                          const std::string& field);

// A CreateSnapshot request checked whole: its name (the snapshot ID is
// VolumeIdForName of it, as for volumes), its source and its parameters (the
// VolumeSnapshotClass: `detached`, and the csi.storage.k8s.io/ keys the
// sidecar adds, which are ignored). Anything else is INVALID_ARGUMENT.
struct SnapshotPlan {
  std::string snapshot_id;
  std::string source_volume_id;
  bool detached = false;
  nlohmann::json recorded_parameters = nlohmann::json::object();
};
const std::set<std::string>& KnownSnapshotParameters();
StatusOr<SnapshotPlan> ParseCreateSnapshotRequest(const csi::v1::CreateSnapshotRequest& req);

// The single-node access modes (one node may publish the volume).
bool IsSingleNode(csi::v1::VolumeCapability::AccessMode::Mode m);

// The size to provision for a capacity range: required_bytes (default 1 GiB)
// rounded up to 4 MiB unless that passes limit_bytes; OUT_OF_RANGE for a
// range no size satisfies.
StatusOr<int64_t> PickSize(const csi::v1::CapacityRange& range);

}  // namespace pillar::controller
