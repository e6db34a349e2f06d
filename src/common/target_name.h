// Pillar's NVMe-oF subsystem and iSCSI target names, which the agent gives
// its exports and the controller derives on its own from the recorded intent
// (it never takes an agent's word for which target a volume is).
#pragma once

#include <optional>
#include <string>

namespace pillar {

// "<prefix>:<escaped agent volume id>". Bytes outside [a-z0-9.-] become ":xx"
// (lower-case hex), which is injective because ':' never occurs in a volume
// id, and yields a valid NQN and IQN alike.
std::string TargetName(const std::string& prefix, const std::string& agent_volume_id);
// Inverse of TargetName; nullopt when `name` is not one of ours.
std::optional<std::string> AgentVolumeIdFromTarget(const std::string& prefix,
                                                   const std::string& name);

// The prefixes an agent uses unless told otherwise (pillar-agent --nqn-prefix,
// --iqn-prefix; the PillarAgent's spec.nqnPrefix / spec.iqnPrefix then tell
// the controller).
constexpr const char* kDefaultNqnPrefix = "nqn.2026-12.com.bhyoo.pillar-csi";
constexpr const char* kDefaultIqnPrefix = "iqn.2026-12.com.bhyoo.pillar-csi";

}  // namespace pillar
