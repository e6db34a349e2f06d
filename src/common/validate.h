// Strict grammars for every name that reaches a path or a command line.
// Each validator returns INVALID_ARGUMENT naming the field and the rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pillar::validate {

// NVMe Qualified Name: "nqn.yyyy-mm.<reverse domain>[:<string>]" or the
// UUID form, at most 223 bytes, characters [A-Za-z0-9._:-] only.
Status Nqn(std::string_view field, std::string_view value);

// iSCSI name: "iqn.yyyy-mm.<reverse domain>[:<string>]" in lower case,
// "eui." + 16 hex digits or "naa." + 16/32 hex digits; at most 223 bytes.
Status Iqn(std::string_view field, std::string_view value);

// One path component for a backend volume or export: starts with an
// alphanumeric, then [A-Za-z0-9_.+-], 1..128 characters.
Status VolumeName(std::string_view field, std::string_view value);

// A pool: a ZFS pool or dataset path ("tank" or "tank/pillar"), an LVM
// volume group, or a file-backend pool name. Components as VolumeName,
// separated by single '/', no leading or trailing '/'.
Status PoolName(std::string_view field, std::string_view value);

// "<pool>/<volume>" as recorded in spec.agentVolumeID.
Status AgentVolumeId(std::string_view field, std::string_view value);

// Numeric IPv4 or IPv6 address (no host names, no zone ids).
Status IpAddress(std::string_view field, std::string_view value);

// An address or an address/prefix.
Status IpOrCidr(std::string_view field, std::string_view value);

// A TCP port, 1..65535.
Status Port(std::string_view field, int64_t value);

// An RFC 4122 textual UUID (lifecycle identities).
Status Uuid(std::string_view field, std::string_view value);

// A Kubernetes-style object name / CSI node id: [a-z0-9]([-a-z0-9.]*[a-z0-9])?,
// at most 253 characters.
Status ObjectName(std::string_view field, std::string_view value);

// An absolute path with no empty, "." or ".." component and no trailing '/',
// at most 4095 bytes, no NUL or newline.
Status CleanPath(std::string_view field, std::string_view path);

// An exported NFS path: a clean path of [A-Za-z0-9_.+/-] only, so it cannot
// carry a second mount source or an option.
Status ExportPath(std::string_view field, std::string_view value);

}  // namespace pillar::validate
