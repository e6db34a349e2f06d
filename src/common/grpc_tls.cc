#include "common/grpc_tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/conf.h>
#include <openssl/ssl.h>

#include <fstream>
#include <sstream>

#include "common/grpc_peer.h"
#include "common/log.h"

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

// The server's pillar identity must be `want_`; then gRPC's own host name
// check, as without a custom verifier. Runs after the chain was verified
// against the CA and before the channel carries a request.
class IdentityVerifier : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit IdentityVerifier(ExpectedPeer want)
      : want_(std::move(want)),
        hostname_(std::make_shared<grpc::experimental::HostNameCertificateVerifier>()) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> callback, grpc::Status* sync_status) override {
    std::vector<std::string> uris;
    for (const auto& uri : request->uri_names()) uris.emplace_back(uri.data(), uri.size());
    Status s = CheckExpectedPeer(want_, IdentityFromUris(uris));
    if (!s.ok()) {
      log::Warn(
          "TLS peer refused",
          {{"target", std::string(request->target_name().data(), request->target_name().size())},
           {"error", s.message()}});
      *sync_status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, s.message());
      return true;
    }
    return hostname_->Verify(request, std::move(callback), sync_status);
  }

  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest* request) override {
    hostname_->Cancel(request);
  }

 private:
  ExpectedPeer want_;
  std::shared_ptr<grpc::experimental::CertificateVerifier> hostname_;
};

// "Protocol" sets SSL_OP_NO_* options, which gRPC's later
// SSL_CTX_set_min_proto_version(TLS1_2) leaves in place; MinProtocol alone
// would be overridden by it.
constexpr const char* kTls13Config = R"(
openssl_conf = pillar_init
[pillar_init]
ssl_conf = pillar_ssl
[pillar_ssl]
system_default = pillar_tls
[pillar_tls]
MinProtocol = TLSv1.3
Protocol = -ALL, TLSv1.3
CipherString = DEFAULT@SECLEVEL=2
)";

}  // namespace

Status RequireTls13() {
  // The system configuration first, so a later implicit initialisation does
  // not load it over ours.
  if (OPENSSL_init_ssl(OPENSSL_INIT_LOAD_CONFIG, nullptr) != 1) {
    return Internal("OpenSSL initialisation failed");
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(kTls13Config, -1), &BIO_free);
  std::unique_ptr<CONF, decltype(&NCONF_free)> conf(NCONF_new(nullptr), &NCONF_free);
  long bad_line = 0;
  if (!bio || !conf || NCONF_load_bio(conf.get(), bio.get(), &bad_line) != 1) {
    return Internal("OpenSSL TLS 1.3 policy does not parse (line " + std::to_string(bad_line) +
                    ")");
  }
  if (CONF_modules_load(conf.get(), nullptr, 0) != 1) {
    return Internal("OpenSSL refused the TLS 1.3 policy");
  }
  return Status::Ok();
}

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
    const TlsFiles& files, std::optional<ExpectedPeer> expected) {
  ASSIGN_OR_RETURN(auto provider, WatchFiles(files));
  grpc::experimental::TlsChannelCredentialsOptions opts;
  opts.set_certificate_provider(provider);
  opts.watch_root_certs();
  opts.watch_identity_key_cert_pairs();
  if (expected) {
    opts.set_certificate_verifier(
        grpc::experimental::ExternalCertificateVerifier::Create<IdentityVerifier>(
            std::move(*expected)));
  }
  auto creds = grpc::experimental::TlsCredentials(opts);
  if (creds == nullptr) return Internal("gRPC refused the TLS channel options");
  return creds;
}

}  // namespace pillar
