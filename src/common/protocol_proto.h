// The one mapping between pillar::Protocol and the agent API's enum, used by
// both ends of the agent's gRPC edge (agent service, controller's client).
#pragma once

#include "common/protocol.h"
#include "common/status.h"
#include "pillar/agent/v1/agent.pb.h"

namespace pillar {

pillar::agent::v1::Protocol ToProto(Protocol p);
// INVALID_ARGUMENT naming `field` for PROTOCOL_UNSPECIFIED or an unknown value.
StatusOr<Protocol> FromProto(std::string_view field, pillar::agent::v1::Protocol p);

}  // namespace pillar
