// The one protocol type: every layer names a protocol with this enum, and the
// strings ("nvmeof-tcp", "iscsi", "nfs") exist only in ProtocolName/ParseProtocol.
// The gRPC enums are mapped at the edges (agent service, agent client).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pillar {

enum class Protocol { kNvmeofTcp, kIscsi, kNfs };

inline constexpr std::array<Protocol, 3> kAllProtocols = {Protocol::kNvmeofTcp, Protocol::kIscsi,
                                                          Protocol::kNfs};

// "nvmeof-tcp", "iscsi", "nfs".
const char* ProtocolName(Protocol p);

// INVALID_ARGUMENT naming `field` when `name` is not one of the names above.
StatusOr<Protocol> ParseProtocol(std::string_view field, std::string_view name);

// The port a protocol listens on when the recorded intent leaves it at 0:
// 4420 (NVMe/TCP), 3260 (iSCSI), 2049 (NFS).
int DefaultPort(Protocol p);

}  // namespace pillar
