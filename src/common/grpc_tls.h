// Mutual-TLS credentials for the agent API, from PEM files.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace pillar {

struct TlsFiles {
  std::string cert;  // this side's certificate chain
  std::string key;   // this side's private key
  std::string ca;    // CA bundle that the peer's certificate must chain to
};

// Server side: requires and verifies a client certificate.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> MutualTlsServerCredentials(
    const TlsFiles& files);
// Client side: presents a certificate and verifies the server against `ca`.
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MutualTlsChannelCredentials(
    const TlsFiles& files);

}  // namespace pillar
