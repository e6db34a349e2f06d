#include "common/credentials.h"

#include <openssl/sha.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace pillar {
namespace {

// Standard base64 with '=' padding, as nvme-cli writes it; nullopt on any
// other byte or a bad length.
std::optional<std::vector<uint8_t>> DecodeBase64(const std::string& in) {
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::vector<uint8_t> out;
  for (size_t i = 0; i < in.size(); i += 4) {
    int pad = 0;
    uint32_t group = 0;
    for (size_t j = 0; j < 4; ++j) {
      char c = in[i + j];
      if (c == '=' && i + 4 == in.size() && j >= 2) {
        ++pad;
        group <<= 6;
        continue;
      }
      int v = value(c);
      if (v < 0 || pad > 0) return std::nullopt;
      group = (group << 6) | static_cast<uint32_t>(v);
    }
    out.push_back(static_cast<uint8_t>(group >> 16));
    if (pad < 2) out.push_back(static_cast<uint8_t>(group >> 8));
    if (pad < 1) out.push_back(static_cast<uint8_t>(group));
  }
  return out;
}

// CRC-32 (IEEE 802.3, reflected, init and final xor ~0): what the kernel's
// nvme_auth_extract_key checks.
uint32_t Crc32(const uint8_t* data, size_t n) {
  uint32_t crc = 0xffffffffU;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320U & (0U - (crc & 1U)));
  }
  return ~crc;
}

// CHAP names and secrets travel through configfs attributes and iscsiadm
// argv: printable ASCII without spaces, 1..255 bytes.
Status ChapToken(const std::string& field, const std::string& value, size_t min_size) {
  if (value.size() < min_size || value.size() > 255) {
    return InvalidArgument(field + " must be " + std::to_string(min_size) + " to 255 bytes long");
  }
  for (char c : value) {
    if (c < 0x21 || c > 0x7e) {
      return InvalidArgument(field + " must be printable ASCII without spaces");
    }
  }
  return Status::Ok();
}

std::string Get(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

}  // namespace

StatusOr<std::string> ParseAuthMethod(const std::string& field, const std::string& value) {
  if (value.empty() || value == kAuthNone) return std::string(kAuthNone);
  if (value == kAuthChap) return std::string(kAuthChap);
  return InvalidArgument(field + " \"" + value + "\" must be none or chap");
}

Status DhchapKey(const std::string& field, const std::string& value) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(field +
                           " is not a DH-HMAC-CHAP key (want DHHC-1:<hh>:<base64>:): " + why);
  };
  const std::string prefix = "DHHC-1:";
  if (value.rfind(prefix, 0) != 0) return bad("no DHHC-1: prefix");
  if (value.size() < prefix.size() + 4 || value.back() != ':' || value[prefix.size() + 2] != ':') {
    return bad("malformed");
  }
  std::string hh = value.substr(prefix.size(), 2);
  if (hh != "00" && hh != "01" && hh != "02" && hh != "03") {
    return bad("transform " + hh + " is not 00, 01, 02 or 03");
  }
  std::string b64 = value.substr(prefix.size() + 3, value.size() - prefix.size() - 4);
  auto raw = DecodeBase64(b64);
  if (!raw) return bad("the key is not base64");
  size_t key_len = raw->size() < 4 ? 0 : raw->size() - 4;
  if (key_len != 32 && key_len != 48 && key_len != 64) {
    return bad("the key is " + std::to_string(key_len) + " bytes, want 32, 48 or 64");
  }
  static const std::map<std::string, size_t> kTransformLen = {{"01", 32}, {"02", 48}, {"03", 64}};
  auto want = kTransformLen.find(hh);
  if (want != kTransformLen.end() && want->second != key_len) {
    return bad("transform " + hh + " needs a " + std::to_string(want->second) + " byte key");
  }
  const uint8_t* crc_bytes = raw->data() + key_len;
  uint32_t stored =
      static_cast<uint32_t>(crc_bytes[0]) | (static_cast<uint32_t>(crc_bytes[1]) << 8) |
      (static_cast<uint32_t>(crc_bytes[2]) << 16) | (static_cast<uint32_t>(crc_bytes[3]) << 24);
  if (stored != Crc32(raw->data(), key_len)) return bad("its CRC-32 does not match");
  return Status::Ok();
}

Status ValidateCredentials(Protocol protocol, const Credentials& c, const std::string& field) {
  switch (protocol) {
    case Protocol::kNvmeofTcp:
      RETURN_IF_ERROR(DhchapKey(field + "." + kSecretDhchapKey, c.secret));
      if (!c.mutual_secret.empty()) {
        RETURN_IF_ERROR(DhchapKey(field + "." + kSecretDhchapCtrlKey, c.mutual_secret));
        if (c.mutual_secret == c.secret) {
          return InvalidArgument(field + "." + kSecretDhchapCtrlKey + " must differ from " +
                                 kSecretDhchapKey);
        }
      }
      if (!c.username.empty() || !c.mutual_username.empty()) {
        return InvalidArgument(field + ": DH-HMAC-CHAP takes no user names");
      }
      return Status::Ok();
    case Protocol::kIscsi:
      RETURN_IF_ERROR(ChapToken(field + "." + kSecretChapUsername, c.username, 1));
      // RFC 3720 section 8.2.1: CHAP secrets of at least 12 bytes (96 bits).
      RETURN_IF_ERROR(ChapToken(field + "." + kSecretChapPassword, c.secret, 12));
      if (c.mutual_username.empty() != c.mutual_secret.empty()) {
        return InvalidArgument(field + "." + kSecretChapMutualUsername + " and " +
                               kSecretChapMutualPassword + " go together");
      }
      if (!c.mutual_secret.empty()) {
        RETURN_IF_ERROR(ChapToken(field + "." + kSecretChapMutualUsername, c.mutual_username, 1));
        RETURN_IF_ERROR(ChapToken(field + "." + kSecretChapMutualPassword, c.mutual_secret, 12));
        if (c.mutual_secret == c.secret) {
          return InvalidArgument(field + "." + kSecretChapMutualPassword + " must differ from " +
                                 kSecretChapPassword);
        }
      }
      return Status::Ok();
    case Protocol::kNfs:
      break;
  }
  return InvalidArgument(field + ": nfs has no in-band authentication (sec=krb5 is not supported)");
}

StatusOr<Credentials> CredentialsFromSecrets(Protocol protocol,
                                             const std::map<std::string, std::string>& secrets,
                                             const std::string& field) {
  Credentials c;
  if (protocol == Protocol::kNvmeofTcp) {
    c.secret = Get(secrets, kSecretDhchapKey);
    c.mutual_secret = Get(secrets, kSecretDhchapCtrlKey);
    if (c.secret.empty()) {
      return InvalidArgument(field + "." + kSecretDhchapKey + " is required with auth=chap");
    }
  } else if (protocol == Protocol::kIscsi) {
    c.username = Get(secrets, kSecretChapUsername);
    c.secret = Get(secrets, kSecretChapPassword);
    c.mutual_username = Get(secrets, kSecretChapMutualUsername);
    c.mutual_secret = Get(secrets, kSecretChapMutualPassword);
    if (c.username.empty() || c.secret.empty()) {
      return InvalidArgument(field + "." + kSecretChapUsername + " and " + field + "." +
                             kSecretChapPassword + " are required with auth=chap");
    }
  }
  RETURN_IF_ERROR(ValidateCredentials(protocol, c, field));
  return c;
}

std::string CredentialsDigest(const std::string& agent_volume_id, const Credentials& c) {
  std::string input = "pillar-auth-v1";
  for (const std::string* part :
       {&agent_volume_id, &c.username, &c.secret, &c.mutual_username, &c.mutual_secret}) {
    input += '\0';
    input += std::to_string(part->size());
    input += ':';
    input += *part;
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string RedactSecrets(std::string text, const Credentials& c) {
  for (const std::string* secret : {&c.secret, &c.mutual_secret}) {
    if (secret->empty()) continue;
    for (size_t at = text.find(*secret); at != std::string::npos; at = text.find(*secret, at)) {
      text.replace(at, secret->size(), "<secret>");
    }
  }
  return text;
}

}  // namespace pillar
