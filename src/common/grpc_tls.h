// Mutual-TLS credentials for pillar's gRPC APIs, from PEM files that are
// watched: a certificate, key or CA replaced on disk is used by the next
// handshake, without a restart (rotation by cert-manager or pillarctl certs).
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>
#include <string>

#include "common/peer_identity.h"
#include "common/status.h"

namespace pillar {

struct TlsFiles {
  std::string cert;  // this side's certificate chain
  std::string key;   // this side's private key
  std::string ca;    // CA bundle that the peer's certificate must chain to
  // How often the files are re-read. Replace them atomically (rename, or a
  // symlinked directory as Kubernetes Secrets are), the key and certificate
  // together.
  unsigned reload_seconds = 10;
};

// TLS 1.3 or nothing, for every TLS connection this process makes or accepts
// (gRPC's and libcurl's). gRPC 1.51 has no minimum-version option, so this
// sets OpenSSL's process-wide defaults (its "system_default" section), which
// every new TLS context inherits and gRPC's own TLS 1.2 floor does not undo.
// Call first thing in main, before any thread or TLS context exists.
Status RequireTls13();

// Server side: requires and verifies a client certificate; with `policy`,
// every call is admitted or refused by the caller's role first.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> MutualTlsServerCredentials(
    const TlsFiles& files, std::optional<RpcPolicy> policy = std::nullopt);
// Client side: presents a certificate and verifies the server against `ca`
// and the target's host name (or GRPC_SSL_TARGET_NAME_OVERRIDE_ARG); with
// `expected`, the handshake also fails unless the server's certificate carries
// that pillar identity (checked before any request is sent, so nothing, a
// CHAP key least of all, reaches an impostor).
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MutualTlsChannelCredentials(
    const TlsFiles& files, std::optional<ExpectedPeer> expected = std::nullopt);

}  // namespace pillar
