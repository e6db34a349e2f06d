// The transport side of common/peer_identity.h: a caller's identity read from
// the client certificate gRPC verified, and an RpcPolicy enforced on every
// call a server receives, before any service code runs.
#pragma once

#include <grpcpp/security/auth_context.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <memory>
#include <string>

#include "common/peer_identity.h"

namespace pillar {

// The identity in the peer's verified certificate (its pillar-csi URI SAN);
// UNAUTHENTICATED when the call carries no certificate or no identity.
StatusOr<PeerIdentity> PeerIdentityOf(const grpc::AuthContext& ctx);

// For logs: the peer's identity URI, else its certificate's common name, else
// "unauthenticated".
std::string DescribePeer(const grpc::AuthContext& ctx);

// Admits or refuses each call by `policy`, before the service sees it; every
// refusal is logged with the method and the peer.
std::shared_ptr<grpc::AuthMetadataProcessor> PolicyEnforcer(RpcPolicy policy);

}  // namespace pillar
