#include "common/validate.h"

#include <arpa/inet.h>

#include <cctype>

namespace pillar::validate {
namespace {

constexpr size_t kMaxQualifiedName = 223;

Status Bad(std::string_view field, std::string_view value, std::string_view rule) {
  std::string shown(value.substr(0, 80));
  for (auto& c : shown) {
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  }
  return InvalidArgument(std::string(field) + " \"" + shown + (value.size() > 80 ? "...\"" : "\"") +
                         " is invalid: " + std::string(rule));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLowerAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "yyyy-mm." followed by a reverse domain of labels.
bool DatedDomain(std::string_view s, bool lower_only) {
  if (s.size() < 9) return false;
  for (int i : {0, 1, 2, 3, 5, 6}) {
    if (!IsDigit(s[i])) return false;
  }
  if (s[4] != '-' || s[7] != '.') return false;
  int month = (s[5] - '0') * 10 + (s[6] - '0');
  if (month < 1 || month > 12) return false;
  std::string_view domain = s.substr(8);
  size_t colon = domain.find(':');
  std::string_view labels = domain.substr(0, colon);
  if (labels.empty() || labels.front() == '.' || labels.back() == '.') return false;
  char prev = 0;
  for (char c : labels) {
    bool ok = lower_only ? (IsLowerAlnum(c) || c == '-' || c == '.')
                         : (IsAlnum(c) || c == '-' || c == '.');
    if (!ok || (c == '.' && prev == '.')) return false;
    prev = c;
  }
  if (colon == std::string_view::npos) return true;
  std::string_view rest = domain.substr(colon + 1);
  if (rest.empty()) return false;
  for (char c : rest) {
    bool ok = lower_only ? (IsLowerAlnum(c) || c == '-' || c == '.' || c == ':')
                         : (IsAlnum(c) || c == '-' || c == '.' || c == ':' || c == '_');
    if (!ok) return false;
  }
  return true;
}

bool IsUuid(std::string_view v) {
  if (v.size() != 36) return false;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (v[i] != '-') return false;
    } else if (!IsHex(v[i])) {
      return false;
    }
  }
  return true;
}

bool IsComponent(std::string_view v) {
  if (v.empty() || v.size() > 128 || !IsAlnum(v[0])) return false;
  for (char c : v) {
    if (!(IsAlnum(c) || c == '_' || c == '.' || c == '+' || c == '-')) return false;
  }
  return true;
}

}  // namespace

Status Nqn(std::string_view field, std::string_view value) {
  if (value.size() > kMaxQualifiedName) return Bad(field, value, "longer than 223 bytes");
  constexpr std::string_view kUuidPrefix = "nqn.2014-08.org.nvmexpress:uuid:";
  if (value.substr(0, kUuidPrefix.size()) == kUuidPrefix) {
    if (IsUuid(value.substr(kUuidPrefix.size()))) return Status::Ok();
    return Bad(field, value, "UUID form needs a textual UUID after \"uuid:\"");
  }
  if (value.substr(0, 4) != "nqn." || !DatedDomain(value.substr(4), false)) {
    return Bad(field, value, "want nqn.yyyy-mm.<reverse-domain>[:<string>] with [A-Za-z0-9._:-]");
  }
  return Status::Ok();
}

Status Iqn(std::string_view field, std::string_view value) {
  if (value.size() > kMaxQualifiedName) return Bad(field, value, "longer than 223 bytes");
  auto all_hex = [](std::string_view s) {
    for (char c : s) {
      if (!IsHex(c)) return false;
    }
    return true;
  };
  if (value.substr(0, 4) == "eui.") {
    if (value.size() == 20 && all_hex(value.substr(4))) return Status::Ok();
    return Bad(field, value, "eui. form needs 16 hex digits");
  }
  if (value.substr(0, 4) == "naa.") {
    if ((value.size() == 20 || value.size() == 36) && all_hex(value.substr(4))) {
      return Status::Ok();
    }
    return Bad(field, value, "naa. form needs 16 or 32 hex digits");
  }
  if (value.substr(0, 4) != "iqn." || !DatedDomain(value.substr(4), true)) {
    return Bad(field, value,
               "want iqn.yyyy-mm.<reverse-domain>[:<string>] in lower case [a-z0-9.:-]");
  }
  return Status::Ok();
}

Status VolumeName(std::string_view field, std::string_view value) {
  if (!IsComponent(value)) {
    return Bad(field, value,
               "want 1-128 characters [A-Za-z0-9_.+-] starting with a letter or digit");
  }
  return Status::Ok();
}

Status PoolName(std::string_view field, std::string_view value) {
  if (value.empty() || value.size() > 255) return Bad(field, value, "want 1-255 characters");
  size_t start = 0;
  while (true) {
    size_t slash = value.find('/', start);
    std::string_view part = value.substr(start, slash - start);
    if (!IsComponent(part)) {
      return Bad(field, value,
                 "each '/'-separated component wants [A-Za-z0-9_.+-] starting "
                 "with a letter or digit");
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::Ok();
}

Status AgentVolumeId(std::string_view field, std::string_view value) {
  size_t slash = value.rfind('/');
  if (slash == std::string_view::npos) return Bad(field, value, "want <pool>/<volume>");
  RETURN_IF_ERROR(PoolName(field, value.substr(0, slash)));
  return VolumeName(field, value.substr(slash + 1));
}

Status IpAddress(std::string_view field, std::string_view value) {
  // inet_pton stops at a NUL: check the characters first, or "::\0junk" passes.
  for (char c : value) {
    if (!(IsHex(c) || c == ':' || c == '.')) {
      return Bad(field, value, "want a numeric IPv4 or IPv6 address");
    }
  }
  std::string s(value);
  unsigned char buf[16];
  if (s.size() <= 45 &&
      (inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1)) {
    return Status::Ok();
  }
  return Bad(field, value, "want a numeric IPv4 or IPv6 address");
}

Status IpOrCidr(std::string_view field, std::string_view value) {
  size_t slash = value.find('/');
  if (slash == std::string_view::npos) return IpAddress(field, value);
  std::string_view addr = value.substr(0, slash);
  std::string_view prefix = value.substr(slash + 1);
  RETURN_IF_ERROR(IpAddress(field, addr));
  bool v6 = addr.find(':') != std::string_view::npos;
  if (prefix.empty() || prefix.size() > 3) return Bad(field, value, "bad prefix length");
  int bits = 0;
  for (char c : prefix) {
    if (!IsDigit(c)) return Bad(field, value, "bad prefix length");
    bits = bits * 10 + (c - '0');
  }
  if (bits > (v6 ? 128 : 32)) return Bad(field, value, "prefix length out of range");
  return Status::Ok();
}

Status Port(std::string_view field, int64_t value) {
  if (value < 1 || value > 65535) {
    return InvalidArgument(std::string(field) + " " + std::to_string(value) +
                           " is invalid: want a TCP port 1-65535");
  }
  return Status::Ok();
}

Status Uuid(std::string_view field, std::string_view value) {
  if (!IsUuid(value)) return Bad(field, value, "want a textual UUID");
  return Status::Ok();
}

Status ObjectName(std::string_view field, std::string_view value) {
  if (value.empty() || value.size() > 253) return Bad(field, value, "want 1-253 characters");
  if (!IsLowerAlnum(value.front()) || !IsLowerAlnum(value.back())) {
    return Bad(field, value, "must start and end with [a-z0-9]");
  }
  for (char c : value) {
    if (!(IsLowerAlnum(c) || c == '-' || c == '.')) {
      return Bad(field, value, "want [a-z0-9.-] only");
    }
  }
  return Status::Ok();
}

Status CleanPath(std::string_view field, std::string_view path) {
  std::string f(field);
  if (path.empty()) return InvalidArgument(f + " is required");
  if (path.size() > 4095) return InvalidArgument(f + " is too long");
  if (path[0] != '/') return InvalidArgument(f + " \"" + std::string(path) + "\" must be absolute");
  if (path.size() > 1 && path.back() == '/') {
    return InvalidArgument(f + " \"" + std::string(path) + "\" must not end in '/'");
  }
  for (char c : path) {
    if (c == '\0' || c == '\n') return InvalidArgument(f + " contains a NUL or newline");
  }
  size_t pos = 1;
  while (pos <= path.size() && path.size() > 1) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view comp = path.substr(pos, end - pos);
    if (comp.empty() || comp == "." || comp == "..") {
      return InvalidArgument(f + " \"" + std::string(path) +
                             "\" is not clean (no '.', '..', '//')");
    }
    pos = end + 1;
  }
  return Status::Ok();
}

Status ExportPath(std::string_view field, std::string_view value) {
  RETURN_IF_ERROR(CleanPath(field, value));
  for (char c : value) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '+' || c == '/' || c == '-';
    if (!ok) return InvalidArgument(std::string(field) + " has a forbidden character");
  }
  return Status::Ok();
}

}  // namespace pillar::validate
