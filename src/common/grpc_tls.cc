#include "common/grpc_tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <fstream>
#include <sstream>

#include "common/grpc_peer.h"

namespace pillar {
namespace {

// The watcher reports unreadable files only in gRPC's own log, at the first
// handshake; reading them once here turns a wrong path into a start failure.
Status CheckPem(const std::string& what, const std::string& path) {
  if (path.empty()) return InvalidArgument(what + " path is required for TLS");
  std::ifstream in(path);
  if (!in) return NotFound(what + " " + path + " cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos) {
    return InvalidArgument(what + " " + path + " is not PEM");
  }
  return Status::Ok();
}

StatusOr<std::shared_ptr<grpc::experimental::CertificateProviderInterface>> WatchFiles(
    const TlsFiles& files) {
  RETURN_IF_ERROR(CheckPem("certificate", files.cert));
  RETURN_IF_ERROR(CheckPem("private key", files.key));
  RETURN_IF_ERROR(CheckPem("CA bundle", files.ca));
  return std::shared_ptr<grpc::experimental::CertificateProviderInterface>(
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          files.key, files.cert, files.ca, std::max(1U, files.reload_seconds)));
}

}  // namespace

StatusOr<std::shared_ptr<grpc::ServerCredentials>> MutualTlsServerCredentials(
    const TlsFiles& files, std::optional<RpcPolicy> policy) {
  ASSIGN_OR_RETURN(auto provider, WatchFiles(files));
  grpc::experimental::TlsServerCredentialsOptions opts(provider);
  opts.watch_root_certs();
  opts.watch_identity_key_cert_pairs();
  opts.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto creds = grpc::experimental::TlsServerCredentials(opts);
  if (creds == nullptr) return Internal("gRPC refused the TLS server options");
  if (policy) creds->SetAuthMetadataProcessor(PolicyEnforcer(std::move(*policy)));
  return creds;
}

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MutualTlsChannelCredentials(
    const TlsFiles& files) {
  ASSIGN_OR_RETURN(auto provider, WatchFiles(files));
  grpc::experimental::TlsChannelCredentialsOptions opts;
  opts.set_certificate_provider(provider);
  opts.watch_root_certs();
  opts.watch_identity_key_cert_pairs();
  auto creds = grpc::experimental::TlsCredentials(opts);
  if (creds == nullptr) return Internal("gRPC refused the TLS channel options");
  return creds;
}

}  // namespace pillar
