// The one contract between the controller and the node plugin: the keys the
// controller writes into a volume's volume_context (CreateVolume) and
// publish_context (ControllerPublishVolume), which the CO hands to NodeStage
// and NodePublish. One struct, one Format, one Parse; docs/architecture.md
// ("The volume context") lists the keys.
#pragma once

#include <map>
#include <string>

#include "common/connection_timing.h"
#include "common/protocol.h"
#include "common/status.h"

namespace pillar {

struct VolumeContext {
  Protocol protocol = Protocol::kNvmeofTcp;  // "protocol"
  std::string agent_volume_id;               // "agentVolumeID": <pool>/<volume>
  std::string fs_type;                       // "fsType": ext4 or xfs; empty for nfs and block
  std::string auth;                          // "auth": "chap" or empty (none)
  // The endpoint, derived by the controller from the recorded intent
  // (status.exportInfo); empty until the volume was first exported.
  std::string target_id;   // "targetID": subsystem NQN, target IQN or export path
  std::string address;     // "address": numeric IP
  int port = 0;            // "port": 0 for NFS means 2049
  bool read_only = false;  // "readonly": ControllerPublishVolume's flag (publish context)
  // The StorageClass's connection timing (common/connection_timing.h, keys
  // "nvmeReconnectDelay" ... "iscsiNoopOutTimeout"), the protocol's defaults
  // filled in by the controller; unset fields leave the kernel's own.
  ConnectionTiming timing;

  bool operator==(const VolumeContext&) const = default;
};

using ContextMap = std::map<std::string, std::string>;

// Writes every set field; empty strings, port 0 and read_only false are left
// out.
ContextMap FormatVolumeContext(const VolumeContext& context);

// Reads what FormatVolumeContext wrote, validating each key it finds
// (INVALID_ARGUMENT "volume context <key> ..."). The endpoint must be whole:
// targetID, address and (except for NFS) port together, each checked by its
// protocol's grammar; timing keys are checked by ParseConnectionTiming (no
// defaults filled). Keys it does not know (the CO's own) are ignored.
StatusOr<VolumeContext> ParseVolumeContext(const ContextMap& map);

}  // namespace pillar
