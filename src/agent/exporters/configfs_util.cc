#include "agent/exporters/configfs_util.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>

namespace pillar::agent::configfs {

std::string TrimValue(std::string value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
    value.pop_back();
  }
  return value;
}

StatusOr<std::string> ReadAttr(Fs& fs, const std::string& path) {
  ASSIGN_OR_RETURN(std::string raw, fs.ReadFile(path));
  return TrimValue(std::move(raw));
}

StatusOr<std::vector<std::string>> ListNames(Fs& fs, const std::string& dir, DirEntry::Type type) {
  std::vector<std::string> out;
  if (!fs.Exists(dir)) return out;
  ASSIGN_OR_RETURN(auto entries, fs.ListDir(dir));
  for (const auto& e : entries) {
    if (e.type == type) out.push_back(e.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<std::string> LinkTargetName(Fs& fs, const std::string& link) {
  ASSIGN_OR_RETURN(std::string target, fs.ReadLink(link));
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  size_t slash = target.rfind('/');
  return slash == std::string::npos ? target : target.substr(slash + 1);
}

std::string ResolveLink(const std::string& link, const std::string& target) {
  std::string joined;
  if (!target.empty() && target[0] == '/') {
    joined = target;
  } else {
    joined = link.substr(0, link.rfind('/')) + "/" + target;
  }
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= joined.size()) {
    size_t next = joined.find('/', pos);
    if (next == std::string::npos) next = joined.size();
    std::string part = joined.substr(pos, next - pos);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    pos = next + 1;
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

Status BackingPath(std::string_view field, std::string_view value) {
  auto bad = [&](const char* rule) {
    std::string shown(value.substr(0, 80));
    for (auto& c : shown) {
      if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
    }
    return InvalidArgument(std::string(field) + " \"" + shown + "\" is invalid: " + rule);
  };
  if (value.empty() || value[0] != '/') return bad("want an absolute device path");
  if (value.size() > 255) return bad("longer than 255 bytes");
  for (char c : value) {
    if (!std::isgraph(static_cast<unsigned char>(c))) {
      return bad("whitespace or control characters are not allowed");
    }
    if (c == ',' || c == '=') return bad("',' and '=' would split LIO control options");
  }
  size_t pos = 1;
  while (pos <= value.size()) {
    size_t next = value.find('/', pos);
    if (next == std::string_view::npos) next = value.size();
    std::string_view part = value.substr(pos, next - pos);
    if (part.empty() || part == "." || part == "..") {
      return bad("empty, \".\" or \"..\" components are not allowed");
    }
    pos = next + 1;
  }
  return Status::Ok();
}

std::string CanonicalIp(const std::string& ip) {
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, ip.c_str(), buf) == 1) {
    return inet_ntop(AF_INET, buf, text, sizeof(text)) != nullptr ? text : "";
  }
  if (inet_pton(AF_INET6, ip.c_str(), buf) == 1) {
    return inet_ntop(AF_INET6, buf, text, sizeof(text)) != nullptr ? text : "";
  }
  return "";
}

bool IsIpv6(const std::string& ip) {
  unsigned char buf[16];
  return inet_pton(AF_INET6, ip.c_str(), buf) == 1;
}

std::string NameUuid(const std::string& name, const std::string& salt) {
  // Two FNV-1a passes with different offsets give 128 well-mixed bits; this
  // is an identity, not a secret.
  auto fnv = [](const std::string& s, uint64_t h) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    return h;
  };
  std::string input = salt + "\n" + name;
  uint64_t hi = fnv(input, 0xcbf29ce484222325ULL);
  uint64_t lo = fnv(input, hi ^ 0x9e3779b97f4a7c15ULL);
  unsigned char b[16];
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<unsigned char>(hi >> (56 - 8 * i));
    b[8 + i] = static_cast<unsigned char>(lo >> (56 - 8 * i));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x80);  // version 8: custom
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char out[37];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

std::optional<std::string> StatDirIdentity(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return std::nullopt;
  // Not ctime: it moves whenever a child group is made. configfs numbers
  // inodes afresh per boot, so the boot id tells two boots apart.
  static const std::string boot_id = [] {
    PosixFs posix;
    auto id = posix.ReadFile("/proc/sys/kernel/random/boot_id");
    return id.ok() ? TrimValue(*id) : std::string("unknown-boot");
  }();
  return boot_id + ":" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

Status ValidateAuth(Protocol protocol, const std::string& auth, bool acl_enabled,
                    const Credentials& credentials, const std::string& why_acl) {
  if (auth == kAuthNone) return Status::Ok();
  if (auth != kAuthChap) return InvalidArgument("auth \"" + auth + "\" must be none or chap");
  if (!acl_enabled) return InvalidArgument("auth=chap needs acl_enabled: " + why_acl);
  return ValidateCredentials(protocol, credentials, "credentials");
}

Status KeepPrivate(Fs& fs, const std::string& path, std::vector<std::string>* changes) {
  ASSIGN_OR_RETURN(mode_t mode, fs.Mode(path));
  if ((mode & 077) == 0) return Status::Ok();
  RETURN_IF_ERROR(fs.Chmod(path, mode & 0700));
  Note(changes, "make " + path + " readable by root only");
  return Status::Ok();
}

}  // namespace pillar::agent::configfs
