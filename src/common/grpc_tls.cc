#include "common/grpc_tls.h"

#include <fstream>
#include <sstream>

namespace pillar {
namespace {

StatusOr<std::string> ReadPem(const std::string& what, const std::string& path) {
  if (path.empty()) return InvalidArgument(what + " path is required for TLS");
  std::ifstream in(path);
  if (!in) return NotFound(what + " " + path + " cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos) {
    return InvalidArgument(what + " " + path + " is not PEM");
  }
  return ss.str();
}

struct Pems {
  std::string cert, key, ca;
};

StatusOr<Pems> ReadAll(const TlsFiles& files) {
  Pems p;
  ASSIGN_OR_RETURN(p.cert, ReadPem("certificate", files.cert));
  ASSIGN_OR_RETURN(p.key, ReadPem("private key", files.key));
  ASSIGN_OR_RETURN(p.ca, ReadPem("CA bundle", files.ca));
  return p;
}

}  // namespace

StatusOr<std::shared_ptr<grpc::ServerCredentials>> MutualTlsServerCredentials(
    const TlsFiles& files) {
  ASSIGN_OR_RETURN(Pems p, ReadAll(files));
  grpc::SslServerCredentialsOptions opts(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = p.ca;
  opts.pem_key_cert_pairs.push_back({p.key, p.cert});
  return grpc::SslServerCredentials(opts);
}

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MutualTlsChannelCredentials(
    const TlsFiles& files) {
  ASSIGN_OR_RETURN(Pems p, ReadAll(files));
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = p.ca;
  opts.pem_private_key = p.key;
  opts.pem_cert_chain = p.cert;
  return grpc::SslCredentials(opts);
}

}  // namespace pillar
