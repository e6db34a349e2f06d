// In-band authentication credentials of one volume (DH-HMAC-CHAP for
// NVMe-oF/TCP, CHAP for iSCSI), their grammars, and the salted digest that the
// controller records instead of the credentials themselves. Values of
// Credentials are secrets: never log them, never put them in a Status message.
#pragma once

#include <map>
#include <string>

#include "common/protocol.h"
#include "common/status.h"

namespace pillar {

// "none" (or empty) and "chap": the StorageClass parameter `auth`.
constexpr const char* kAuthNone = "none";
constexpr const char* kAuthChap = "chap";

// Keys of the CSI `secrets` maps (filled by the external-provisioner,
// -attacher and kubelet from the StorageClass's csi.storage.k8s.io/*-secret-*).
constexpr const char* kSecretDhchapKey = "dhchapKey";          // DHHC-1 host key
constexpr const char* kSecretDhchapCtrlKey = "dhchapCtrlKey";  // optional, bidirectional
constexpr const char* kSecretChapUsername = "chapUsername";
constexpr const char* kSecretChapPassword = "chapPassword";
constexpr const char* kSecretChapMutualUsername = "chapMutualUsername";  // optional pair
constexpr const char* kSecretChapMutualPassword = "chapMutualPassword";

struct Credentials {
  // NVMe-oF: secret = the host's DH-HMAC-CHAP key, mutual_secret = the
  // controller's key (bidirectional), usernames unused.
  // iSCSI: CHAP user name / password, and the target's pair for mutual CHAP.
  std::string username;
  std::string secret;
  std::string mutual_username;
  std::string mutual_secret;

  bool empty() const { return secret.empty(); }
  bool operator==(const Credentials&) const = default;
};

// "none" or "chap"; anything else is INVALID_ARGUMENT naming `field`.
StatusOr<std::string> ParseAuthMethod(const std::string& field, const std::string& value);

// A DH-HMAC-CHAP secret in the NVMe representation "DHHC-1:<hh>:<base64>:"
// (hh 00 = no transform, 01/02/03 = SHA-256/384/512; the base64 payload is a
// 32, 48 or 64 byte key followed by its CRC-32, little-endian). The message
// names `field` and the rule, never the value.
Status DhchapKey(const std::string& field, const std::string& value);

// Credentials for `protocol` from a CSI secrets map; every rule is checked and
// a failure is INVALID_ARGUMENT naming "<field>.<key>" (never the value).
// NFS has no in-band authentication here: INVALID_ARGUMENT.
StatusOr<Credentials> CredentialsFromSecrets(Protocol protocol,
                                             const std::map<std::string, std::string>& secrets,
                                             const std::string& field);

// Checks credentials the agent received or loaded (same rules as above).
Status ValidateCredentials(Protocol protocol, const Credentials& c, const std::string& field);

// `text` with every secret of `c` replaced by "<secret>": for messages of
// commands that carried one in their argv (a timeout names the command).
std::string RedactSecrets(std::string text, const Credentials& c);

// "sha256:<hex>" of the credentials salted with the agent volume id, so equal
// secrets of two volumes give different digests. What the controller records.
std::string CredentialsDigest(const std::string& agent_volume_id, const Credentials& c);

}  // namespace pillar
