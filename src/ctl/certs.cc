#include "ctl/certs.h"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/validate.h"

namespace pillar::ctl {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free_all(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;

Status OpenSslError(const std::string& what) { return Internal(what + " failed (OpenSSL)"); }

StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("generating an EC P-256 key");
  return key;
}

Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return InvalidArgument("certificate extension \"" + value + "\" is invalid");
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? Status::Ok() : OpenSslError("adding a certificate extension");
}

// A certificate for `key` named `cn`, valid from now for `days`, not yet signed.
StatusOr<Cert> NewCert(EVP_PKEY* key, const std::string& cn, int days) {
  if (days < 1 || days > 3650) return InvalidArgument("--days must be 1-3650");
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return OpenSslError("a new certificate");
  std::unique_ptr<BIGNUM, Free> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return OpenSslError("a random serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("setting validity and key");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1) {
    return OpenSslError("setting the subject");
  }
  return cert;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Writes PEM text to `path`, created with `mode`; never replaces a file.
template <typename Writer>
Status WritePem(const std::string& path, mode_t mode, Writer write) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Internal("cannot create " + path + ": " + std::strerror(errno));
  Bio bio(BIO_new_fd(fd, BIO_CLOSE));
  if (!bio) {
    close(fd);
    return OpenSslError("opening " + path);
  }
  if (write(bio.get()) != 1 || BIO_flush(bio.get()) != 1) return OpenSslError("writing " + path);
  return Status::Ok();
}

Status WriteKey(const std::string& path, EVP_PKEY* key) {
  return WritePem(path, 0600, [key](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

Status WriteCert(const std::string& path, X509* cert) {
  return WritePem(path, 0644, [cert](BIO* b) { return PEM_write_bio_X509(b, cert); });
}

template <typename T, typename Reader>
StatusOr<std::unique_ptr<T, Free>> ReadPem(const std::string& path, Reader read) {
  Bio bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return NotFound(path + " cannot be read");
  std::unique_ptr<T, Free> out(read(bio.get()));
  if (!out) return InvalidArgument(path + " is not a PEM " + "certificate or key");
  return out;
}

Status MakeDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Status IssueCa(const std::string& dir, const std::string& common_name, int days) {
  const std::string crt = dir + "/ca.crt", key_path = dir + "/ca.key";
  if (Exists(crt) || Exists(key_path)) {
    return AlreadyExists(dir + " already holds a CA; a CA is never overwritten");
  }
  if (common_name.empty() || common_name.size() > 64) return InvalidArgument("--cn: 1-64 bytes");
  RETURN_IF_ERROR(MakeDir(dir));
  ASSIGN_OR_RETURN(Key key, NewKey());
  ASSIGN_OR_RETURN(Cert cert, NewCert(key.get(), common_name, days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    return OpenSslError("setting the issuer");
  }
  RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return OpenSslError("signing the CA");
  RETURN_IF_ERROR(WriteKey(key_path, key.get()));
  return WriteCert(crt, cert.get());
}

Status IssueLeaf(const std::string& ca_dir, const std::string& dir, const LeafRequest& req) {
  PeerIdentity id{req.role, req.name};
  RETURN_IF_ERROR(ParseIdentityUri(id.Uri()).status());  // the name's grammar
  std::string san = "URI:" + id.Uri();
  for (const auto& d : req.dns_names) {
    RETURN_IF_ERROR(validate::ObjectName("--dns", d));
    san += ",DNS:" + d;
  }
  for (const auto& ip : req.ip_addresses) {
    RETURN_IF_ERROR(validate::IpAddress("--ip", ip));
    san += ",IP:" + ip;
  }
  const std::string crt = dir + "/tls.crt", key_path = dir + "/tls.key";
  if (Exists(crt) || Exists(key_path)) {
    return AlreadyExists(dir + " already holds tls.crt or tls.key; issue into a new directory");
  }
  ASSIGN_OR_RETURN(Cert ca, ReadPem<X509>(ca_dir + "/ca.crt", [](BIO* b) {
                     return PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
                   }));
  ASSIGN_OR_RETURN(Key ca_key, ReadPem<EVP_PKEY>(ca_dir + "/ca.key", [](BIO* b) {
                     return PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
                   }));
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    return InvalidArgument(ca_dir + "/ca.key does not belong to " + ca_dir + "/ca.crt");
  }
  RETURN_IF_ERROR(MakeDir(dir));
  ASSIGN_OR_RETURN(Key key, NewKey());
  ASSIGN_OR_RETURN(Cert cert, NewCert(key.get(), req.name, req.days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get())) != 1) {
    return OpenSslError("setting the issuer");
  }
  RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature"));
  RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_subject_alt_name, san));
  RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_subject_key_identifier, "hash"));
  RETURN_IF_ERROR(AddExt(cert.get(), ca.get(), NID_authority_key_identifier, "keyid"));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
    return OpenSslError("signing the certificate");
  }
  RETURN_IF_ERROR(WriteKey(key_path, key.get()));
  RETURN_IF_ERROR(WriteCert(crt, cert.get()));
  if (!Exists(dir + "/ca.crt")) {
    std::error_code ec;
    std::filesystem::copy_file(ca_dir + "/ca.crt", dir + "/ca.crt", ec);
    if (ec) return Internal("cannot copy the CA to " + dir + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace pillar::ctl
