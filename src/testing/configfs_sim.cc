#include "testing/configfs_sim.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "agent/exporters/configfs_util.h"

namespace pillar::testing {
namespace {

namespace configfs = agent::configfs;
using configfs_layout::Access;
using configfs_layout::AllDigits;
using configfs_layout::AttrSpec;
using configfs_layout::DefaultGroup;
using configfs_layout::FindAttr;
using configfs_layout::KindSpec;
using configfs_layout::NumberIn;
using configfs_layout::Spec;

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

Status Denied(const std::string& what) {
  return {Code::kPermissionDenied, what + " (simulated configfs)"};
}

// kstrtobool as the kernel applies it to boolean attributes.
std::optional<bool> ParseBool(const std::string& v) {
  if (v == "1" || v == "y" || v == "Y" || v == "on") return true;
  if (v == "0" || v == "n" || v == "N" || v == "off") return false;
  return std::nullopt;
}

bool ParseInt(const std::string& v) {
  if (v.empty()) return false;
  size_t i = (v[0] == '-') ? 1 : 0;
  return i < v.size() && AllDigits(v.substr(i));
}

// The info attribute of an iblock/fileio device, in the kernel's layout.
std::string DeviceInfo(bool active, const std::string& udev_path, bool readonly) {
  std::string out = std::string("Status: ") + (active ? "ACTIVATED" : "DEACTIVATED") +
                    "  Max Queue Depth: 0  SectorSize: 512  HwMaxSectors: 1024\n        ";
  if (!udev_path.empty()) out += "UDEV PATH: " + udev_path + "  ";
  out += std::string("readonly: ") + (readonly ? "1" : "0") + "\n        Major: 0 Minor: 0";
  return out;
}

std::string InfoField(const std::string& info, const std::string& key) {
  size_t at = info.find(key + ": ");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  size_t end = info.find_first_of(" \n", at);
  return info.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

ConfigfsSim::ConfigfsSim(const std::string& root, Fs* tree)
    : tree_(tree != nullptr ? *tree : own_tree_) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(root, ec);
  root_ = configfs::ResolveLink("/x", ec ? root : abs.string());
}

ConfigfsSim::Rel ConfigfsSim::Relative(const std::string& path) const {
  Rel rel;
  std::string norm = configfs::ResolveLink("/x", path);
  if (norm == root_) {
    rel.inside = true;
    return rel;
  }
  std::string prefix = root_ == "/" ? "/" : root_ + "/";
  if (norm.compare(0, prefix.size(), prefix) != 0) return rel;
  rel.inside = true;
  std::string rest = norm.substr(prefix.size());
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t next = rest.find('/', pos);
    if (next == std::string::npos) next = rest.size();
    if (next > pos) rel.parts.push_back(rest.substr(pos, next - pos));
    pos = next + 1;
  }
  return rel;
}

std::string ConfigfsSim::Abs(const std::vector<std::string>& parts) const {
  return parts.empty() ? root_ : JoinPath(root_, Joined(parts));
}

ConfigfsSim::Kind ConfigfsSim::Classify(const std::vector<std::string>& parts) const {
  Kind kind = Kind::kRoot;
  for (const auto& name : parts) {
    if (auto def = DefaultGroup(kind, name)) {
      kind = *def;
    } else if (Spec(kind).made != Kind::kNone) {
      kind = Spec(kind).made;
    } else {
      return Kind::kNone;
    }
  }
  return kind;
}

Status ConfigfsSim::CreateGroup(const std::string& path, Kind kind) {
  RETURN_IF_ERROR(tree_.MakeDir(path));
  std::string name = path.substr(path.rfind('/') + 1);
  for (const auto& a : Spec(kind).attrs) {
    std::string value = a.value;
    unsigned long id = next_id_++;
    if (value.find("{name}") != std::string::npos) {
      value.replace(value.find("{name}"), 6, name);
    }
    if (value.find("{serial}") != std::string::npos) {
      char serial[17];
      std::snprintf(serial, sizeof(serial), "%016lx", id * 0x9e3779b97f4a7c15UL);
      value.replace(value.find("{serial}"), 8, serial);
    }
    if (value.find("{uuid}") != std::string::npos) {
      value.replace(value.find("{uuid}"), 6,
                    configfs::NameUuid(path + "#" + std::to_string(id), "configfs-sim"));
    }
    if (kind == Kind::kDevice && std::string(a.name) == "info") {
      value = DeviceInfo(false, "", false);
    }
    RETURN_IF_ERROR(
        tree_.WriteFile(JoinPath(path, a.name), a.access == Access::kWo ? "" : value + "\n"));
  }
  for (const auto& [n, k] : Spec(kind).defaults) {
    RETURN_IF_ERROR(CreateGroup(JoinPath(path, n), k));
  }
  return Status::Ok();
}

StatusOr<std::string> ConfigfsSim::Attr(const std::vector<std::string>& dir,
                                        const std::string& attr) {
  return configfs::ReadAttr(tree_, JoinPath(Abs(dir), attr));
}

Status ConfigfsSim::SetAttr(const std::vector<std::string>& dir, const std::string& attr,
                            const std::string& value) {
  return tree_.WriteFile(JoinPath(Abs(dir), attr), value + "\n");
}

bool ConfigfsSim::HasLinks(const std::string& dir) {
  auto links = configfs::ListNames(tree_, dir, DirEntry::Type::kSymlink);
  return links.ok() && !links->empty();
}

StatusOr<ConfigfsSim::LinkIndex*> ConfigfsSim::LinksOf(const std::string& dir) {
  auto it = links_.find(dir);
  if (it != links_.end()) return &it->second;
  LinkIndex index;
  ASSIGN_OR_RETURN(auto names, configfs::ListNames(tree_, dir, DirEntry::Type::kSymlink));
  for (const auto& name : names) {
    auto target = tree_.ReadLink(JoinPath(dir, name));
    if (!target.ok()) continue;
    std::string key = Joined(Relative(configfs::ResolveLink(JoinPath(dir, name), *target)).parts);
    index.by_target[key] = name;
    index.by_name[name] = key;
  }
  return &links_.emplace(dir, std::move(index)).first->second;
}

bool ConfigfsSim::LinkStillThere(const std::string& dir, const std::string& name,
                                 const std::string& target) {
  auto existing = tree_.ReadLink(JoinPath(dir, name));
  return existing.ok() &&
         Joined(Relative(configfs::ResolveLink(JoinPath(dir, name), *existing)).parts) == target;
}

void ConfigfsSim::ForgetLinks(const std::string& path) {
  std::lock_guard<std::mutex> lock(links_mu_);
  links_.erase(path);
  for (auto it = links_.lower_bound(path + "/");
       it != links_.end() && it->first.compare(0, path.size() + 1, path + "/") == 0;) {
    it = links_.erase(it);
  }
}

Status ConfigfsSim::LoadModuleTree(const std::string& name, Kind kind) {
  std::string path = JoinPath(root_, name);
  if (tree_.IsDir(path)) return Status::Ok();
  RETURN_IF_ERROR(CreateGroup(path, kind));
  // The unloaded tree was kept until now only so this one gets a new inode.
  std::error_code ec;
  std::filesystem::remove_all(path + ".unloaded", ec);
  return Status::Ok();
}

Status ConfigfsSim::LoadNvmet() { return LoadModuleTree("nvmet", Kind::kNvmet); }

Status ConfigfsSim::LoadLio() {
  RETURN_IF_ERROR(LoadModuleTree("target", Kind::kTarget));
  std::string iscsi = JoinPath(root_, "target/iscsi");
  if (tree_.IsDir(iscsi)) return Status::Ok();
  return CreateGroup(iscsi, Kind::kIscsi);
}

namespace {

// Moves a tree aside before deleting it, so that a directory created at the
// same path afterwards cannot reuse its inode: the kernel gives a reloaded
// module's root group a new identity, and StateToken relies on that.
Status DropTree(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::Ok();
  std::string aside = path + ".unloaded";
  std::filesystem::remove_all(aside, ec);
  std::filesystem::rename(path, aside, ec);
  if (ec) return Internal("unload " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Status ConfigfsSim::UnloadNvmet() {
  ForgetLinks(JoinPath(root_, "nvmet"));
  return DropTree(JoinPath(root_, "nvmet"));
}
Status ConfigfsSim::UnloadLio() {
  ForgetLinks(JoinPath(root_, "target"));
  return DropTree(JoinPath(root_, "target"));
}

Status ConfigfsSim::LoadTarget(Protocol protocol) {
  switch (protocol) {
    case Protocol::kNvmeofTcp:
      return LoadNvmet();
    case Protocol::kIscsi:
      return LoadLio();
    case Protocol::kNfs:
      break;
  }
  return Unavailable(std::string(ProtocolName(protocol)) + " has no simulated target");
}

StatusOr<std::string> ConfigfsSim::ReadFile(const std::string& path) {
  return tree_.ReadFile(path);
}

Status ConfigfsSim::WriteFile(const std::string& path, const std::string& content) {
  Rel rel = Relative(path);
  if (!rel.inside) return tree_.WriteFile(path, content);
  if (rel.parts.empty()) return Denied("write " + path + ": is the configfs root");
  std::vector<std::string> dir(rel.parts.begin(), rel.parts.end() - 1);
  const std::string& attr = rel.parts.back();
  Kind kind = Classify(dir);
  const AttrSpec* spec = FindAttr(kind, attr);
  struct stat st {};
  bool is_file = lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  if (spec == nullptr || !is_file) {
    return Denied("write " + path + ": no such attribute; configfs cannot create files");
  }
  if (spec->access == Access::kRo) return Denied("write " + path + ": attribute is read-only");
  std::string value = content;
  while (!value.empty() && value.back() == '\n') value.pop_back();
  RETURN_IF_ERROR(OnWrite(dir, kind, attr, &value).Annotate("write " + path));
  if (spec->access == Access::kWo) return Status::Ok();
  return tree_.WriteFile(path, value + "\n");
}

// The attribute semantics the exporters' write order depends on.
Status ConfigfsSim::OnWrite(const std::vector<std::string>& dir, Kind kind, const std::string& attr,
                            std::string* value) {
  auto boolean = [&]() -> StatusOr<bool> {
    auto b = ParseBool(*value);
    if (!b) return InvalidArgument("\"" + *value + "\" is not a boolean");
    *value = *b ? "1" : "0";
    return *b;
  };
  switch (kind) {
    case Kind::kNvmetSubsys:
      if (attr == "attr_allow_any_host") {
        ASSIGN_OR_RETURN(bool allow, boolean());
        if (allow && HasLinks(JoinPath(Abs(dir), "allowed_hosts"))) {
          return InvalidArgument("can't set allow_any_host when explicit hosts are set");
        }
      }
      return Status::Ok();
    case Kind::kNvmetNs: {
      ASSIGN_OR_RETURN(std::string enabled, Attr(dir, "enable"));
      if (attr == "enable") {
        ASSIGN_OR_RETURN(bool on, boolean());
        ASSIGN_OR_RETURN(std::string device, Attr(dir, "device_path"));
        if (on && (device.empty() || device == "(null)")) {
          return InvalidArgument("namespace has no device_path to enable");
        }
        return Status::Ok();
      }
      if (enabled == "1" && (attr == "device_path" || attr == "device_uuid" ||
                             attr == "device_nguid" || attr == "buffered_io")) {
        return FailedPrecondition(attr + " cannot change while the namespace is enabled (EBUSY)");
      }
      if (attr == "device_path" && value->empty()) return InvalidArgument("empty device_path");
      if (attr == "revalidate_size" && enabled != "1") {
        return InvalidArgument("enable the namespace before revalidate_size");
      }
      return Status::Ok();
    }
    case Kind::kNvmetPort: {
      if (HasLinks(JoinPath(Abs(dir), "subsystems"))) {
        return {Code::kPermissionDenied,
                "port is enabled (subsystems linked): disable it before changing " + attr};
      }
      static const std::set<std::string> kTrtypes = {"rdma", "fc", "tcp", "pci", "loop"};
      static const std::set<std::string> kAdrfams = {"pcie", "ipv4", "ipv6", "ib",
                                                     "fc",   "pci",  "loop"};
      if (attr == "addr_trtype" && kTrtypes.count(*value) == 0) {
        return InvalidArgument("invalid trtype \"" + *value + "\"");
      }
      if (attr == "addr_adrfam" && kAdrfams.count(*value) == 0) {
        return InvalidArgument("invalid adrfam \"" + *value + "\"");
      }
      if (attr.rfind("param_", 0) == 0 && attr != "param_pi_enable" && !ParseInt(*value)) {
        return InvalidArgument("\"" + *value + "\" is not an integer");
      }
      return Status::Ok();
    }
    case Kind::kDevice: {
      ASSIGN_OR_RETURN(std::string info, Attr(dir, "info"));
      ASSIGN_OR_RETURN(std::string enabled, Attr(dir, "enable"));
      std::string udev = InfoField(info, "UDEV PATH");
      bool readonly = InfoField(info, "readonly") == "1";
      if (attr == "control") {
        // Options separated by ',' or newlines, as iblock/fileio parse them.
        size_t pos = 0;
        while (pos <= value->size()) {
          size_t next = value->find_first_of(",\n", pos);
          if (next == std::string::npos) next = value->size();
          std::string opt = value->substr(pos, next - pos);
          if (opt.rfind("udev_path=", 0) == 0 || opt.rfind("fd_dev_name=", 0) == 0) {
            if (enabled == "1") {
              return AlreadyExists("cannot set udev_path while the device is configured");
            }
            udev = opt.substr(opt.find('=') + 1);
          } else if (opt.rfind("readonly=", 0) == 0) {
            readonly = opt.substr(9) == "1";
          }
          pos = next + 1;
        }
        return SetAttr(dir, "info", DeviceInfo(enabled == "1", udev, readonly));
      }
      if (attr == "enable") {
        if (value->find('1') == std::string::npos) {
          return InvalidArgument("for dev_enable ops, only valid value is \"1\"");
        }
        if (enabled == "1") return AlreadyExists("device is already configured");
        const std::string& hba = dir[dir.size() - 2];
        bool needs_path = hba.rfind("iblock_", 0) == 0 || hba.rfind("fileio_", 0) == 0 ||
                          hba.rfind("pscsi_", 0) == 0;
        if (needs_path && udev.empty()) {
          return InvalidArgument("missing udev_path= parameters (write control first)");
        }
        *value = "1";
        return SetAttr(dir, "info", DeviceInfo(true, udev, readonly));
      }
      if (attr == "udev_path" && value->size() > 511) return InvalidArgument("udev_path too long");
      return Status::Ok();
    }
    case Kind::kDevWwn:
      if (attr == "vpd_unit_serial") *value = "T10 VPD Unit Serial Number: " + *value;
      return Status::Ok();
    case Kind::kTpg:
      if (attr == "enable") return boolean().status();
      return Status::Ok();
    case Kind::kTpgAttrib: {
      if (!AllDigits(*value)) return InvalidArgument("\"" + *value + "\" is not a number");
      static const std::set<std::string> kFlags = {
          "authentication",          "generate_node_acls",      "cache_dynamic_acls",
          "demo_mode_write_protect", "prod_mode_write_protect", "demo_mode_discovery",
          "tpg_enabled_sendtargets", "login_keys_workaround"};
      if (kFlags.count(attr) > 0 && *value != "0" && *value != "1") {
        return InvalidArgument("illegal value " + *value + " for " + attr);
      }
      // iscsit_ta_generate_node_acls: demo mode needs cached dynamic ACLs.
      if (attr == "generate_node_acls" && *value == "1") {
        RETURN_IF_ERROR(SetAttr(dir, "cache_dynamic_acls", "1"));
      }
      return Status::Ok();
    }
    case Kind::kMappedLun:
    case Kind::kNp:
      if (!AllDigits(*value) || (*value != "0" && *value != "1")) {
        return InvalidArgument("illegal value " + *value + " for " + attr);
      }
      return Status::Ok();
    default:
      return Status::Ok();
  }
}

Status ConfigfsSim::WriteFileAtomic(const std::string& path, const std::string& content) {
  if (Relative(path).inside) {
    return Denied("write " + path + ": configfs has no temporary files or rename");
  }
  return tree_.WriteFileAtomic(path, content);
}

Status ConfigfsSim::MakeDir(const std::string& path) {
  Rel rel = Relative(path);
  if (!rel.inside) return tree_.MakeDir(path);
  if (tree_.IsDir(path)) return Status::Ok();
  if (rel.parts.empty()) return NotFound("mkdir " + path + ": configfs root is missing");
  std::vector<std::string> parent(rel.parts.begin(), rel.parts.end() - 1);
  const std::string& name = rel.parts.back();
  if (!tree_.IsDir(Abs(parent))) return NotFound("mkdir " + path + ": parent does not exist");
  Kind parent_kind = Classify(parent);
  if (DefaultGroup(parent_kind, name)) {
    return Denied("mkdir " + path + ": a default group appears only when its module loads");
  }
  const KindSpec& spec = Spec(parent_kind);
  if (spec.made == Kind::kNone) {
    return Denied("mkdir " + path + ": " + (parent.empty() ? "configfs root" : parent.back()) +
                  " does not accept new groups");
  }
  if (spec.made_name != nullptr && !spec.made_name(name)) {
    return InvalidArgument("mkdir " + path + ": want " + spec.made_rule);
  }
  return CreateGroup(path, spec.made);
}

Status ConfigfsSim::MakeDirs(const std::string& path) {
  Rel rel = Relative(path);
  if (!rel.inside) return tree_.MakeDirs(path);
  if (!tree_.IsDir(root_)) return NotFound("mkdir " + path + ": configfs root is missing");
  std::vector<std::string> cur;
  for (const auto& p : rel.parts) {
    cur.push_back(p);
    RETURN_IF_ERROR(MakeDir(Abs(cur)));
  }
  return Status::Ok();
}

Status ConfigfsSim::CheckRemovable(const std::string& path, Kind kind) {
  ASSIGN_OR_RETURN(auto entries, tree_.ListDir(path));
  for (const auto& e : entries) {
    std::string child = JoinPath(path, e.name);
    if (e.type == DirEntry::Type::kSymlink) {
      return FailedPrecondition("rmdir: " + child + " is a link (ENOTEMPTY)");
    }
    if (e.type == DirEntry::Type::kDir) {
      auto def = DefaultGroup(kind, e.name);
      if (!def) return FailedPrecondition("rmdir: " + child + " is a child group (ENOTEMPTY)");
      RETURN_IF_ERROR(CheckRemovable(child, *def));
    }
  }
  return Status::Ok();
}

Status ConfigfsSim::RemoveDir(const std::string& path) {
  Rel rel = Relative(path);
  if (!rel.inside) return tree_.RemoveDir(path);
  if (!tree_.Exists(path)) return Status::Ok();
  if (!tree_.IsDir(path) || tree_.ReadLink(path).ok()) {
    return InvalidArgument("rmdir " + path + ": not a directory");
  }
  if (rel.parts.empty()) return Denied("rmdir " + path + ": is the configfs root");
  std::vector<std::string> parent(rel.parts.begin(), rel.parts.end() - 1);
  Kind parent_kind = Classify(parent);
  if (DefaultGroup(parent_kind, rel.parts.back())) {
    return Denied("rmdir " + path + ": default groups cannot be removed");
  }
  Kind kind = Classify(rel.parts);
  if (kind == Kind::kNone) return Denied("rmdir " + path + ": not a configfs group");
  RETURN_IF_ERROR(CheckRemovable(path, kind));
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  ForgetLinks(path);
  if (ec) return Internal("rmdir " + path + ": " + ec.message());
  return Status::Ok();
}

Status ConfigfsSim::Unlink(const std::string& path) {
  Rel rel = Relative(path);
  if (!rel.inside) return tree_.Unlink(path);
  if (!tree_.Exists(path)) return Status::Ok();
  if (!tree_.ReadLink(path).ok()) {
    return Denied("unlink " + path + ": only links can be removed; attributes and groups stay");
  }
  RETURN_IF_ERROR(tree_.Unlink(path));
  std::lock_guard<std::mutex> lock(links_mu_);
  auto group = links_.find(path.substr(0, path.rfind('/')));
  if (group != links_.end()) {
    auto named = group->second.by_name.find(path.substr(path.rfind('/') + 1));
    if (named != group->second.by_name.end()) {
      group->second.by_target.erase(named->second);
      group->second.by_name.erase(named);
    }
  }
  return Status::Ok();
}

Status ConfigfsSim::Symlink(const std::string& target, const std::string& link) {
  Rel rel = Relative(link);
  if (!rel.inside) return tree_.Symlink(target, link);
  if (rel.parts.empty()) return Denied("symlink " + link + ": is the configfs root");
  std::vector<std::string> dir(rel.parts.begin(), rel.parts.end() - 1);
  Kind kind = Classify(dir);
  if (Spec(kind).link_to == Kind::kNone) {
    return Denied("symlink " + link + ": links are not allowed in this group");
  }
  if (tree_.Exists(link)) return AlreadyExists("symlink " + link + ": already exists");
  Rel to = Relative(configfs::ResolveLink(link, target));
  if (!to.inside) return Denied("symlink " + link + ": target " + target + " is not in configfs");
  if (!tree_.IsDir(Abs(to.parts)) || tree_.ReadLink(Abs(to.parts)).ok()) {
    return NotFound("symlink " + link + ": target " + target + " does not exist");
  }
  if (Classify(to.parts) != Spec(kind).link_to) {
    return InvalidArgument("symlink " + link + ": target " + target + " is the wrong kind of item");
  }
  std::lock_guard<std::mutex> lock(links_mu_);
  RETURN_IF_ERROR(OnLink(dir, kind, to.parts).Annotate("symlink " + link));
  // configfs shows links relative to the link's group, through the root.
  std::string relative;
  for (size_t i = 0; i < dir.size(); ++i) relative += "../";
  RETURN_IF_ERROR(tree_.Symlink(relative + Joined(to.parts), link));
  ASSIGN_OR_RETURN(LinkIndex * index, LinksOf(Abs(dir)));
  index->by_target[Joined(to.parts)] = rel.parts.back();
  index->by_name[rel.parts.back()] = Joined(to.parts);
  return Status::Ok();
}

// Checks of the kernel's allow_link callbacks (links_mu_ held).
Status ConfigfsSim::OnLink(const std::vector<std::string>& dir, Kind kind,
                           const std::vector<std::string>& target) {
  const std::string group = Abs(dir);
  ASSIGN_OR_RETURN(LinkIndex * index, LinksOf(group));
  auto same = index->by_target.find(Joined(target));
  if (same != index->by_target.end()) {
    if (LinkStillThere(group, same->second, same->first)) {
      return AlreadyExists("already linked to " + Joined(target) + " as " + same->second);
    }
    index->by_name.erase(same->second);
    index->by_target.erase(same);
  }
  // Whether any link is left, believing no entry the disk no longer has.
  while (!index->by_name.empty() &&
         !LinkStillThere(group, index->by_name.begin()->first, index->by_name.begin()->second)) {
    index->by_target.erase(index->by_name.begin()->second);
    index->by_name.erase(index->by_name.begin());
  }
  const bool linked = !index->by_name.empty();
  switch (kind) {
    case Kind::kNvmetAllowedHosts: {
      std::vector<std::string> subsys(dir.begin(), dir.end() - 1);
      ASSIGN_OR_RETURN(std::string any, Attr(subsys, "attr_allow_any_host"));
      if (any == "1") return InvalidArgument("can't add hosts when allow_any_host is set");
      return Status::Ok();
    }
    case Kind::kNvmetPortSubsystems: {
      if (linked) return Status::Ok();  // the port is already enabled
      std::vector<std::string> port(dir.begin(), dir.end() - 1);
      ASSIGN_OR_RETURN(std::string trtype, Attr(port, "addr_trtype"));
      if (trtype.empty()) return InvalidArgument("port has no addr_trtype: cannot enable it");
      if (trtype == "tcp" || trtype == "rdma") {
        ASSIGN_OR_RETURN(std::string adrfam, Attr(port, "addr_adrfam"));
        ASSIGN_OR_RETURN(std::string traddr, Attr(port, "addr_traddr"));
        ASSIGN_OR_RETURN(std::string trsvcid, Attr(port, "addr_trsvcid"));
        bool v6 = configfs::IsIpv6(traddr);
        if (configfs::CanonicalIp(traddr).empty() || adrfam != (v6 ? "ipv6" : "ipv4") ||
            !NumberIn(trsvcid, 0, 65535)) {
          return InvalidArgument("port address " + adrfam + " " + traddr + ":" + trsvcid +
                                 " is incomplete or malformed: cannot enable it");
        }
      }
      return Status::Ok();
    }
    case Kind::kLun: {
      if (linked) return AlreadyExists("the LUN already has a device link");
      ASSIGN_OR_RETURN(std::string enabled, Attr(target, "enable"));
      if (enabled != "1") return FailedPrecondition("device is not configured (enable it first)");
      return Status::Ok();
    }
    case Kind::kMappedLun: {
      if (linked) return AlreadyExists("the mapped LUN already has a link");
      // acls/<nacl>/lun_N -> lun/lun_M of the same target and TPG.
      if (dir.size() < 5 || target.size() < 5 ||
          !std::equal(dir.begin(), dir.end() - 3, target.begin(), target.end() - 2)) {
        return InvalidArgument("mapped LUNs may only link to a LUN of their own TPG");
      }
      return Status::Ok();
    }
    default:
      return Status::Ok();
  }
}

StatusOr<std::string> ConfigfsSim::ReadLink(const std::string& path) {
  return tree_.ReadLink(path);
}

StatusOr<std::vector<DirEntry>> ConfigfsSim::ListDir(const std::string& path) {
  return tree_.ListDir(path);
}

bool ConfigfsSim::Exists(const std::string& path) { return tree_.Exists(path); }
bool ConfigfsSim::IsDir(const std::string& path) { return tree_.IsDir(path); }

Status ConfigfsSim::CreateSparseFile(const std::string& path, int64_t size_bytes) {
  if (Relative(path).inside) return Denied("create " + path + ": configfs cannot create files");
  return tree_.CreateSparseFile(path, size_bytes);
}

Status ConfigfsSim::ResizeFile(const std::string& path, int64_t size_bytes) {
  if (Relative(path).inside) return Denied("truncate " + path + ": configfs attributes");
  return tree_.ResizeFile(path, size_bytes);
}

Status ConfigfsSim::CopyFile(const std::string& from, const std::string& to) {
  if (Relative(from).inside || Relative(to).inside) {
    return Denied("copy " + from + " to " + to + ": configfs holds no regular files");
  }
  return tree_.CopyFile(from, to);
}

Status ConfigfsSim::CopyTree(const std::string& from, const std::string& to) {
  if (Relative(from).inside || Relative(to).inside) {
    return Denied("copy " + from + " to " + to + ": configfs trees are made by the kernel");
  }
  return tree_.CopyTree(from, to);
}

Status ConfigfsSim::Rename(const std::string& from, const std::string& to) {
  if (Relative(from).inside || Relative(to).inside) {
    return Denied("rename " + from + " to " + to + ": configfs renames nothing");
  }
  return tree_.Rename(from, to);
}

StatusOr<int64_t> ConfigfsSim::AllocatedBytes(const std::string& path) {
  return tree_.AllocatedBytes(path);
}

StatusOr<int64_t> ConfigfsSim::FileSize(const std::string& path) { return tree_.FileSize(path); }

StatusOr<FsCapacity> ConfigfsSim::StatVfs(const std::string& path) { return tree_.StatVfs(path); }

Status ConfigfsSim::RemoveTree(const std::string& path) {
  // configfs has no rm -r: attributes cannot be unlinked, groups go by rmdir.
  if (Relative(path).inside) return Denied("rm -r " + path + ": use rmdir on each group");
  return tree_.RemoveTree(path);
}

// In configfs pillar sets only the modes of attributes (it hides keys from
// local users; configfs keeps an attribute's mode while the item lives) and
// never an owner; outside it (a file pool of the agent simulator) they are
// the real ones.
Status ConfigfsSim::Chmod(const std::string& path, mode_t mode) {
  if (Relative(path).inside && !tree_.IsDir(path) && !tree_.Exists(path)) {
    return Denied("chmod " + path + ": no such attribute");
  }
  if (Relative(path).inside && tree_.IsDir(path)) {
    return Denied("chmod " + path + ": pillar sets the modes of attributes only");
  }
  return tree_.Chmod(path, mode);
}

StatusOr<mode_t> ConfigfsSim::Mode(const std::string& path) { return tree_.Mode(path); }

Status ConfigfsSim::Chown(const std::string& path, uid_t uid, gid_t gid) {
  if (Relative(path).inside) return Denied("chown " + path + ": not done in configfs");
  return tree_.Chown(path, uid, gid);
}

Status CreateConfigfsSkeleton(const std::string& root) {
  ConfigfsSim sim(root);
  RETURN_IF_ERROR(sim.LoadNvmet());
  return sim.LoadLio();
}

}  // namespace pillar::testing
