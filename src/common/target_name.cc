#include "common/target_name.h"

#include <cstdio>

namespace pillar {
namespace {

bool Plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string TargetName(const std::string& prefix, const std::string& agent_volume_id) {
  std::string out = prefix + ":";
  for (char c : agent_volume_id) {
    if (Plain(c)) {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), ":%02x", static_cast<unsigned char>(c));
      out += buf;
    }
  }
  return out;
}

std::optional<std::string> AgentVolumeIdFromTarget(const std::string& prefix,
                                                   const std::string& name) {
  if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 ||
      name[prefix.size()] != ':') {
    return std::nullopt;
  }
  std::string out;
  for (size_t i = prefix.size() + 1; i < name.size(); ++i) {
    char c = name[i];
    if (Plain(c)) {
      out += c;
      continue;
    }
    if (c != ':' || i + 2 >= name.size()) return std::nullopt;
    int hi = HexValue(name[i + 1]);
    int lo = HexValue(name[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    char decoded = static_cast<char>(hi * 16 + lo);
    if (Plain(decoded)) return std::nullopt;  // not canonical: not ours
    out += decoded;
    i += 2;
  }
  return out;
}

}  // namespace pillar
