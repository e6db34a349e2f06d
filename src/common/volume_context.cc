#include "common/volume_context.h"

#include <charconv>

#include "common/credentials.h"
#include "common/validate.h"

namespace pillar {
namespace {

constexpr const char* kProtocol = "protocol";
constexpr const char* kAgentVolumeId = "agentVolumeID";
constexpr const char* kFsType = "fsType";
constexpr const char* kAuth = "auth";
constexpr const char* kTargetId = "targetID";
constexpr const char* kAddress = "address";
constexpr const char* kPort = "port";
constexpr const char* kReadOnly = "readonly";

std::string Get(const ContextMap& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

std::string Field(const char* key) { return std::string("volume context ") + key; }

}  // namespace

ContextMap FormatVolumeContext(const VolumeContext& c) {
  ContextMap m;
  m[kProtocol] = ProtocolName(c.protocol);
  if (!c.agent_volume_id.empty()) m[kAgentVolumeId] = c.agent_volume_id;
  if (!c.fs_type.empty()) m[kFsType] = c.fs_type;
  if (!c.auth.empty()) m[kAuth] = c.auth;
  if (!c.target_id.empty()) m[kTargetId] = c.target_id;
  if (!c.address.empty()) m[kAddress] = c.address;
  if (c.port != 0) m[kPort] = std::to_string(c.port);
  if (c.read_only) m[kReadOnly] = "true";
  FormatConnectionTiming(c.timing, &m);
  return m;
}

StatusOr<VolumeContext> ParseVolumeContext(const ContextMap& m) {
  VolumeContext c;
  ASSIGN_OR_RETURN(c.protocol, ParseProtocol(Field(kProtocol), Get(m, kProtocol)));
  c.agent_volume_id = Get(m, kAgentVolumeId);
  if (!c.agent_volume_id.empty()) {
    RETURN_IF_ERROR(validate::AgentVolumeId(Field(kAgentVolumeId), c.agent_volume_id));
  }
  c.fs_type = Get(m, kFsType);
  if (!c.fs_type.empty() && c.fs_type != "ext4" && c.fs_type != "xfs" && c.fs_type != "ext3") {
    return InvalidArgument(Field(kFsType) + " \"" + c.fs_type + "\" is not ext4, ext3 or xfs");
  }
  if (std::string auth = Get(m, kAuth); !auth.empty()) {
    ASSIGN_OR_RETURN(auth, ParseAuthMethod(Field(kAuth), auth));
    if (auth == kAuthChap) c.auth = kAuthChap;
  }
  if (std::string ro = Get(m, kReadOnly); !ro.empty()) {
    if (ro != "true" && ro != "false") {
      return InvalidArgument(Field(kReadOnly) + " \"" + ro + "\" must be true or false");
    }
    c.read_only = ro == "true";
  }
  c.target_id = Get(m, kTargetId);
  c.address = Get(m, kAddress);
  std::string port = Get(m, kPort);
  if (c.target_id.empty()) return InvalidArgument(Field(kTargetId) + " is required");
  if (c.address.empty()) return InvalidArgument(Field(kAddress) + " is required");
  RETURN_IF_ERROR(validate::IpAddress(Field(kAddress), c.address));
  if (port.empty() && c.protocol != Protocol::kNfs) {
    return InvalidArgument(Field(kPort) + " is required");
  }
  if (!port.empty()) {
    int value = -1;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || port.size() > 5) {
      return InvalidArgument(Field(kPort) + " \"" + port + "\" is not a port number");
    }
    // Port 0 of an NFS export is the protocol's own (2049).
    if (value != 0 || c.protocol != Protocol::kNfs)
      RETURN_IF_ERROR(validate::Port(Field(kPort), value));
    c.port = value;
  }
  ASSIGN_OR_RETURN(c.timing, ParseConnectionTiming(m, c.protocol, "volume context ",
                                                   /*fill_defaults=*/false));
  switch (c.protocol) {
    case Protocol::kNvmeofTcp:
      RETURN_IF_ERROR(validate::Nqn(Field(kTargetId), c.target_id));
      break;
    case Protocol::kIscsi:
      RETURN_IF_ERROR(validate::Iqn(Field(kTargetId), c.target_id));
      break;
    case Protocol::kNfs:
      RETURN_IF_ERROR(validate::ExportPath(Field(kTargetId), c.target_id));
      break;
  }
  return c;
}

}  // namespace pillar
