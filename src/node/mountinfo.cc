#include "node/mountinfo.h"

#include <charconv>

namespace pillar::node {
namespace {

std::vector<std::string_view> SplitSpaces(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool ParseInt(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

}  // namespace

std::string UnescapeMountField(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && IsOctal(field[i + 1]) &&
        IsOctal(field[i + 2]) && IsOctal(field[i + 3])) {
      int v = (field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0');
      if (v <= 0xff) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

std::vector<MountEntry> ParseMountInfo(std::string_view text) {
  std::vector<MountEntry> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    auto f = SplitSpaces(line);
    // id parent maj:min root mount-point options [optional...] - fstype source super
    if (f.size() < 10) continue;
    size_t sep = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        sep = i;
        break;
      }
    }
    if (sep == 0 || sep + 3 > f.size()) continue;
    MountEntry e;
    if (!ParseInt(f[0], &e.id) || !ParseInt(f[1], &e.parent_id)) continue;
    e.major_minor = std::string(f[2]);
    e.root = UnescapeMountField(f[3]);
    e.mount_point = UnescapeMountField(f[4]);
    e.options = std::string(f[5]);
    e.fs_type = UnescapeMountField(f[sep + 1]);
    e.source = UnescapeMountField(f[sep + 2]);
    if (sep + 3 < f.size()) e.super_options = std::string(f[sep + 3]);
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<MountEntry> FindMountAt(const std::vector<MountEntry>& mounts,
                                      const std::string& path) {
  std::optional<MountEntry> found;
  for (const auto& m : mounts) {
    if (m.mount_point == path) found = m;  // later lines are mounted on top
  }
  return found;
}

int CountMountsAt(const std::vector<MountEntry>& mounts, const std::string& path) {
  int n = 0;
  for (const auto& m : mounts) n += m.mount_point == path ? 1 : 0;
  return n;
}

}  // namespace pillar::node
