#include "node/attach/sysfs_util.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace pillar::node {

std::string TrimSpace(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::string> ReadAttr(Fs& fs, const std::string& path) {
  auto content = fs.ReadFile(path);
  if (!content.ok()) return std::nullopt;
  return TrimSpace(*content);
}

std::optional<int64_t> BlockDeviceSizeBytes(Fs& fs, const std::string& sysfs_root,
                                            const std::string& name) {
  auto size = ReadAttr(fs, JoinPath(sysfs_root, "block/" + name + "/size"));
  if (!size || !AllDigits(*size) || size->size() > 16) return std::nullopt;
  int64_t sectors = 0;
  std::from_chars(size->data(), size->data() + size->size(), sectors);
  return sectors * 512;
}

std::string CanonicalIp(const std::string& ip) {
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, ip.c_str(), buf) == 1 &&
      inet_ntop(AF_INET, buf, text, sizeof(text)) != nullptr) {
    return text;
  }
  if (inet_pton(AF_INET6, ip.c_str(), buf) == 1 &&
      inet_ntop(AF_INET6, buf, text, sizeof(text)) != nullptr) {
    return text;
  }
  return ip;
}

}  // namespace pillar::node
