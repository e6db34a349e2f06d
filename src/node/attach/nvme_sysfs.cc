#include "node/attach/nvme_sysfs.h"

#include <algorithm>
#include <charconv>

namespace pillar::node {
namespace {

bool IsControllerName(std::string_view name) {
  return name.size() > 4 && name.substr(0, 4) == "nvme" && AllDigits(name.substr(4));
}

}  // namespace

std::map<std::string, std::string> ParseNvmeAddress(std::string_view text) {
  std::map<std::string, std::string> out;
  std::string t = TrimSpace(text);
  size_t pos = 0;
  while (pos <= t.size()) {
    size_t end = t.find(',', pos);
    if (end == std::string::npos) end = t.size();
    std::string item = t.substr(pos, end - pos);
    size_t eq = item.find('=');
    if (eq != std::string::npos && eq > 0) out[item.substr(0, eq)] = item.substr(eq + 1);
    pos = end + 1;
  }
  return out;
}

bool IsNvmeNamespaceDevice(std::string_view name) {
  // nvme<digits>n<digits>, nothing else.
  if (name.size() < 7 || name.substr(0, 4) != "nvme") return false;
  size_t i = 4;
  size_t start = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == start || i >= name.size() || name[i] != 'n') return false;
  return AllDigits(name.substr(i + 1));
}

std::optional<NvmeController> NvmeSysfs::ReadController(const std::string& name) {
  if (!IsControllerName(name)) return std::nullopt;
  std::string dir = JoinPath(root_, "class/nvme/" + name);
  if (!fs_.IsDir(dir)) return std::nullopt;
  NvmeController c;
  c.name = name;
  c.subsysnqn = Attr(JoinPath(dir, "subsysnqn")).value_or("");
  c.transport = Attr(JoinPath(dir, "transport")).value_or("");
  c.state = Attr(JoinPath(dir, "state")).value_or("");
  auto addr = ParseNvmeAddress(Attr(JoinPath(dir, "address")).value_or(""));
  c.traddr = addr["traddr"];
  c.trsvcid = addr["trsvcid"];
  return c;
}

std::optional<NvmeSubsystem> NvmeSysfs::FindSubsystem(const std::string& nqn) {
  std::string cls = JoinPath(root_, "class/nvme-subsystem");
  auto entries = fs_.ListDir(cls);
  if (!entries.ok()) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& e : *entries) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    std::string dir = JoinPath(cls, name);
    if (Attr(JoinPath(dir, "subsysnqn")).value_or("") != nqn) continue;
    NvmeSubsystem s;
    s.name = name;
    s.nqn = nqn;
    auto children = fs_.ListDir(dir);
    if (children.ok()) {
      std::vector<std::string> ctrls;
      for (const auto& c : *children) {
        if (IsControllerName(c.name)) ctrls.push_back(c.name);
      }
      std::sort(ctrls.begin(), ctrls.end());
      for (const auto& c : ctrls) {
        if (auto ctrl = ReadController(c)) s.controllers.push_back(std::move(*ctrl));
      }
    }
    return s;
  }
  return std::nullopt;
}

std::optional<std::string> NvmeSysfs::FindNamespaceDevice(const std::string& nqn, int64_t nsid) {
  std::string block = JoinPath(root_, "block");
  auto entries = fs_.ListDir(block);
  if (!entries.ok()) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& e : *entries) {
    if (IsNvmeNamespaceDevice(e.name)) names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    std::string dir = JoinPath(block, name);
    auto id = Attr(JoinPath(dir, "nsid"));
    int64_t value = -1;
    if (!id || !AllDigits(*id)) continue;
    std::from_chars(id->data(), id->data() + id->size(), value);
    if (value != nsid) continue;
    // device -> the subsystem (native multipath) or the controller; both
    // carry subsysnqn.
    if (Attr(JoinPath(dir, "device/subsysnqn")).value_or("") == nqn) return name;
  }
  return std::nullopt;
}

}  // namespace pillar::node
