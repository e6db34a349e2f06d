#include "controller/requests.h"

#include <openssl/sha.h>

#include <limits>

#include "common/connection_timing.h"
#include "common/validate.h"

namespace pillar::controller {

using csi::v1::VolumeCapability;

namespace {

constexpr int64_t kDefaultSize = 1LL << 30;
constexpr int64_t kSizeQuantum = 4LL << 20;  // LVM extent and a common zvol block multiple

// parameters.nfsRootMode: 3 or 4 octal digits, as chmod takes them ("770",
// "2770", "1777").
StatusOr<uint32_t> ParseNfsRootMode(const std::string& text) {
  if (text.size() < 3 || text.size() > 4 ||
      text.find_first_not_of("01234567") != std::string::npos) {
    return InvalidArgument("parameters.nfsRootMode \"" + text +
                           "\" must be 3 or 4 octal digits (e.g. \"0770\", \"2775\", \"1777\")");
  }
  return static_cast<uint32_t>(std::stoul(text, nullptr, 8));
}

// parameters.nfsRootOwner: "<uid>:<gid>", decimal, each 0 to 2^32-2 (chown
// takes 2^32-1 for "unchanged").
StatusOr<std::pair<uint32_t, uint32_t>> ParseNfsRootOwner(const std::string& text) {
  auto bad = [&] {
    return InvalidArgument("parameters.nfsRootOwner \"" + text +
                           "\" must be \"<uid>:<gid>\", each a decimal number from 0 to " +
                           std::to_string(UINT32_MAX - 1));
  };
  size_t colon = text.find(':');
  if (colon == std::string::npos) return bad();
  uint32_t ids[2];
  const std::string parts[2] = {text.substr(0, colon), text.substr(colon + 1)};
  for (int i = 0; i < 2; ++i) {
    const std::string& part = parts[i];
    if (part.empty() || part.size() > 10 ||
        part.find_first_not_of("0123456789") != std::string::npos) {
      return bad();
    }
    uint64_t id = std::stoull(part);
    if (id >= UINT32_MAX) return bad();
    ids[i] = static_cast<uint32_t>(id);
  }
  return std::pair{ids[0], ids[1]};
}

}  // namespace

bool IsSingleNode(csi::v1::VolumeCapability::AccessMode::Mode m) {
  return m == VolumeCapability::AccessMode::SINGLE_NODE_WRITER ||
         m == VolumeCapability::AccessMode::SINGLE_NODE_READER_ONLY ||
         m == VolumeCapability::AccessMode::SINGLE_NODE_SINGLE_WRITER ||
         m == VolumeCapability::AccessMode::SINGLE_NODE_MULTI_WRITER;
}

StatusOr<int64_t> PickSize(const csi::v1::CapacityRange& range) {
  int64_t required = range.required_bytes();
  int64_t limit = range.limit_bytes();
  if (required < 0 || limit < 0) {
    return OutOfRange("capacity_range: required_bytes and limit_bytes must be >= 0");
  }
  if (limit > 0 && required > limit) {
    return OutOfRange("capacity_range.required_bytes exceeds capacity_range.limit_bytes");
  }
  int64_t size = required > 0 ? required : kDefaultSize;
  if (limit > 0 && size > limit) size = limit;
  // The rounding below must not overflow; no pool holds such a volume anyway.
  if (size > std::numeric_limits<int64_t>::max() - kSizeQuantum) {
    return OutOfRange("capacity_range: " + std::to_string(size) +
                      " bytes is more than any pool can provide");
  }
  int64_t rounded = (size + kSizeQuantum - 1) / kSizeQuantum * kSizeQuantum;
  if (limit > 0 && rounded > limit) rounded = size;  // exactness beats alignment
  return rounded;
}

const std::set<std::string>& KnownCreateParameters() {
  static const std::set<std::string> kKnown = {
      "agent",         "pool",        "protocol",          "acl",     "port",
      "bindAddress",   "fsType",      "inCapsuleDataSize", "import",  "auth",
      "nfsRootSquash", "nfsRootMode", "nfsRootOwner",      "detached"};
  return kKnown;
}

const std::set<std::string>& KnownSnapshotParameters() {
  static const std::set<std::string> kKnown = {"detached"};
  return kKnown;
}

StatusOr<CreateParams> ParseCreateParameters(
    const google::protobuf::Map<std::string, std::string>& p) {
  CreateParams out;
  auto get = [&](const char* k) -> std::string {
    auto it = p.find(k);
    return it == p.end() ? "" : it->second;
  };
  for (const auto& [k, v] : p) {
    if (KnownCreateParameters().count(k) == 0 && !IsConnectionTimingKey(k) &&
        k.rfind("backend.", 0) != 0 && k.rfind("csi.storage.k8s.io/", 0) != 0) {
      return InvalidArgument("parameters." + k + " is not a pillar parameter");
    }
    if (k.rfind("backend.", 0) == 0) out.backend_params[k.substr(8)] = v;
  }
  out.agent_ref = get("agent");
  if (out.agent_ref.empty()) return InvalidArgument("parameters.agent is required");
  RETURN_IF_ERROR(validate::ObjectName("parameters.agent", out.agent_ref));
  out.pool = get("pool");
  if (out.pool.empty()) return InvalidArgument("parameters.pool is required");
  RETURN_IF_ERROR(validate::PoolName("parameters.pool", out.pool));
  ASSIGN_OR_RETURN(out.protocol, ParseProtocol("parameters.protocol", get("protocol")));
  std::string acl = get("acl");
  if (acl.empty() || acl == "true") {
    out.acl_enabled = true;
  } else if (acl == "false") {
    out.acl_enabled = false;
  } else {
    return InvalidArgument("parameters.acl \"" + acl + "\" must be true or false");
  }
  std::string port = get("port");
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("parameters.port \"" + port + "\" is not a port number");
    }
    out.port = std::stoll(port);
    RETURN_IF_ERROR(validate::Port("parameters.port", out.port));
  }
  out.bind_address = get("bindAddress");
  if (!out.bind_address.empty()) {
    RETURN_IF_ERROR(validate::IpAddress("parameters.bindAddress", out.bind_address));
  }
  out.fs_type = get("fsType");
  if (!out.fs_type.empty() && out.fs_type != "ext4" && out.fs_type != "xfs") {
    return InvalidArgument("parameters.fsType \"" + out.fs_type + "\" must be ext4 or xfs");
  }
  std::string import = get("import");
  if (!import.empty() && import != "true" && import != "false") {
    return InvalidArgument("parameters.import \"" + import + "\" must be true or false");
  }
  out.import_existing = import == "true";
  std::string detached = get("detached");
  if (!detached.empty() && detached != "true" && detached != "false") {
    return InvalidArgument("parameters.detached \"" + detached + "\" must be true or false");
  }
  out.detached = detached == "true";
  std::string ics = get("inCapsuleDataSize");
  if (!ics.empty()) {
    if (out.protocol != Protocol::kNvmeofTcp) {
      return InvalidArgument("parameters.inCapsuleDataSize applies to nvmeof-tcp only");
    }
    if (ics.size() > 9 || ics.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("parameters.inCapsuleDataSize \"" + ics + "\" is not a byte count");
    }
    out.in_capsule_data_size = std::stoll(ics);
  }
  ASSIGN_OR_RETURN(out.auth, ParseAuthMethod("parameters.auth", get("auth")));
  if (out.auth == kAuthChap) {
    if (out.protocol == Protocol::kNfs) {
      return InvalidArgument(
          "parameters.auth: chap applies to nvmeof-tcp and iscsi (nfs has no in-band "
          "authentication here; sec=krb5 is not supported)");
    }
    if (!out.acl_enabled) {
      return InvalidArgument(
          "parameters.auth: chap needs parameters.acl true (the targets authenticate listed "
          "hosts only)");
    }
  }
  std::string squash = get("nfsRootSquash");
  if (!squash.empty()) {
    if (out.protocol != Protocol::kNfs) {
      return InvalidArgument("parameters.nfsRootSquash applies to nfs only");
    }
    if (squash != "true" && squash != "false") {
      return InvalidArgument("parameters.nfsRootSquash \"" + squash + "\" must be true or false");
    }
    out.nfs_root_squash = squash == "true";
  }
  for (const char* key : {"nfsRootMode", "nfsRootOwner"}) {
    if (p.count(key) != 0 && out.protocol != Protocol::kNfs) {
      return InvalidArgument(std::string("parameters.") + key + " applies to nfs only");
    }
  }
  if (p.count("nfsRootMode") != 0) {
    ASSIGN_OR_RETURN(out.nfs_root_mode, ParseNfsRootMode(get("nfsRootMode")));
  }
  if (p.count("nfsRootOwner") != 0) {
    ASSIGN_OR_RETURN(auto owner, ParseNfsRootOwner(get("nfsRootOwner")));
    out.nfs_root_uid = owner.first;
    out.nfs_root_gid = owner.second;
  }
  return out;
}

Status ValidateCapability(const VolumeCapability& cap, Protocol protocol,
                          const std::string& field) {
  if (!cap.has_block() && !cap.has_mount()) {
    return InvalidArgument(field + ": access_type (block or mount) is required");
  }
  auto mode = cap.access_mode().mode();
  if (mode == VolumeCapability::AccessMode::UNKNOWN) {
    return InvalidArgument(field + ".access_mode is required");
  }
  if (protocol == Protocol::kNfs) {
    if (cap.has_block()) return InvalidArgument(field + ": nfs volumes cannot be block volumes");
  } else if (!IsSingleNode(mode) && mode != VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY &&
             !(cap.has_block() && mode == VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER)) {
    return InvalidArgument(field + ": " + ProtocolName(protocol) +
                           " volumes are single-node (or multi-node raw block) only");
  }
  if (cap.has_mount() && !cap.mount().fs_type().empty() && cap.mount().fs_type() != "ext4" &&
      cap.mount().fs_type() != "xfs" && protocol != Protocol::kNfs) {
    return InvalidArgument(field + ".mount.fs_type \"" + cap.mount().fs_type() +
                           "\" must be ext4 or xfs");
  }
  return Status::Ok();
}

StatusOr<SnapshotPlan> ParseCreateSnapshotRequest(const csi::v1::CreateSnapshotRequest& req) {
  if (req.name().empty()) return InvalidArgument("name is required");
  if (req.name().size() > 128) {
    return InvalidArgument("name is " + std::to_string(req.name().size()) +
                           " bytes; CSI names are at most 128");
  }
  if (req.source_volume_id().empty()) return InvalidArgument("source_volume_id is required");
  SnapshotPlan plan;
  plan.source_volume_id = req.source_volume_id();
  for (const auto& [k, v] : req.parameters()) {
    if (k.rfind("csi.storage.k8s.io/", 0) == 0) continue;  // the sidecar's metadata
    if (KnownSnapshotParameters().count(k) == 0) {
      return InvalidArgument("parameters." + k +
                             " is not a pillar snapshot parameter (known: " + "detached)");
    }
    if (k == "detached") {
      if (v != "true" && v != "false") {
        return InvalidArgument("parameters.detached \"" + v + "\" must be true or false");
      }
      plan.detached = v == "true";
    }
    plan.recorded_parameters[k] = v;
  }
  plan.snapshot_id = VolumeIdForName(req.name());
  if (plan.snapshot_id != req.name()) plan.recorded_parameters[kCsiNameParameter] = req.name();
  return plan;
}

std::string VolumeIdForName(const std::string& name) {
  if (validate::VolumeName("name", name).ok() && validate::ObjectName("name", name).ok()) {
    return name;
  }
  std::string folded;
  for (char c : name) {
    if (folded.size() >= 40) break;
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (ok) {
      folded += l;
    } else if (!folded.empty() && folded.back() != '-') {
      folded += '-';
    }
  }
  while (!folded.empty() && folded.back() == '-') folded.pop_back();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(name.data()), name.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hash;
  for (int i = 0; i < 8; ++i) {
    hash += kHex[digest[i] >> 4];
    hash += kHex[digest[i] & 15];
  }
  return folded.empty() ? "vol-" + hash : folded + "-" + hash;
}

StatusOr<CreatePlan> ParseCreateRequest(const csi::v1::CreateVolumeRequest& req) {
  if (req.name().empty()) return InvalidArgument("name is required");
  if (req.name().size() > 128) {
    return InvalidArgument("name is " + std::to_string(req.name().size()) +
                           " bytes; CSI names are at most 128");
  }
  if (req.volume_capabilities().empty()) {
    return InvalidArgument("volume_capabilities must name at least one capability");
  }
  CreatePlan plan;
  if (req.has_volume_content_source()) {
    const auto& src = req.volume_content_source();
    SourceRef ref;
    if (src.has_snapshot()) {
      ref.snapshot_id = src.snapshot().snapshot_id();
      if (ref.snapshot_id.empty()) {
        return InvalidArgument("volume_content_source.snapshot.snapshot_id is required");
      }
    } else if (src.has_volume()) {
      ref.volume_id = src.volume().volume_id();
      if (ref.volume_id.empty()) {
        return InvalidArgument("volume_content_source.volume.volume_id is required");
      }
    } else {
      return InvalidArgument("volume_content_source must name a snapshot or a volume");
    }
    plan.source = ref;
  }
  ASSIGN_OR_RETURN(plan.params, ParseCreateParameters(req.parameters()));
  RETURN_IF_ERROR(ParseConnectionTiming({req.parameters().begin(), req.parameters().end()},
                                        plan.params.protocol, "parameters.", true)
                      .status());
  CreateParams& params = plan.params;
  for (int i = 0; i < req.volume_capabilities_size(); ++i) {
    const auto& cap = req.volume_capabilities(i);
    RETURN_IF_ERROR(
        ValidateCapability(cap, params.protocol, "volume_capabilities[" + std::to_string(i) + "]"));
    std::string t = cap.has_block() ? "block" : "mount";
    if (!plan.access_type.empty() && plan.access_type != t) {
      return InvalidArgument("volume_capabilities mix block and mount access");
    }
    plan.access_type = t;
    if (cap.has_mount() && !cap.mount().fs_type().empty() && params.fs_type.empty()) {
      params.fs_type = cap.mount().fs_type();
    }
  }
  if (plan.access_type == "mount" && params.protocol != Protocol::kNfs && params.fs_type.empty()) {
    params.fs_type = "ext4";
  }
  if (params.auth == kAuthChap) {
    std::map<std::string, std::string> secrets(req.secrets().begin(), req.secrets().end());
    ASSIGN_OR_RETURN(plan.credentials, CredentialsFromSecrets(params.protocol, secrets, "secrets"));
  }
  ASSIGN_OR_RETURN(plan.size_bytes, PickSize(req.capacity_range()));
  for (const auto& [k, v] : req.parameters()) plan.recorded_parameters[k] = v;
  plan.volume_id = VolumeIdForName(req.name());
  if (plan.volume_id != req.name()) plan.recorded_parameters[kCsiNameParameter] = req.name();
  return plan;
}

}  // namespace pillar::controller
