#include "agent/exporters/lio_exporter.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "common/validate.h"

namespace pillar::agent {
namespace {

using configfs::Note;
using configfs::ReadAttr;

constexpr const char* kTpgt = "tpgt_1";
constexpr const char* kLun = "lun_0";

std::string Normal(const std::string& path) { return configfs::ResolveLink("/x", path); }

Status Validate(const KernelExport& want, const std::string& iqn) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent_volume_id", want.agent_volume_id));
  RETURN_IF_ERROR(validate::Iqn("target_id", iqn));
  if (!want.target_id.empty() && want.target_id != iqn) {
    return InvalidArgument("target_id \"" + want.target_id + "\" does not belong to volume " +
                           want.agent_volume_id + ": want " + iqn);
  }
  RETURN_IF_ERROR(configfs::BackingPath("backing", want.backing));
  RETURN_IF_ERROR(validate::IpAddress("bind_address", want.params.bind_address));
  RETURN_IF_ERROR(validate::Port("port", want.params.port));
  for (const auto& initiator : want.allowed_hosts) {
    RETURN_IF_ERROR(validate::Iqn("allowed_hosts", initiator));
  }
  // Demo mode (generate_node_acls=1) has no node ACL to hold credentials.
  return configfs::ValidateAuth(Protocol::kIscsi, want.params.auth, want.params.acl_enabled,
                                want.credentials, "CHAP credentials live in node ACLs");
}

// LIO shows an unset mutual name or password as "NULL" (and clears one when
// "NULL" is written).
std::string Unset(const std::string& v) { return v == "NULL" ? "" : v; }

// LIO's portal group names: "<ipv4>:<port>" or "[<ipv6>]:<port>".
std::string PortalName(const std::string& ip, int port) {
  return (configfs::IsIpv6(ip) ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

// The canonical address and the port of a portal group name, or nullopt.
std::optional<std::pair<std::string, int>> ParsePortal(const std::string& name) {
  std::string ip, port;
  if (!name.empty() && name[0] == '[') {
    size_t close = name.find("]:");
    if (close == std::string::npos) return std::nullopt;
    ip = name.substr(1, close - 1);
    port = name.substr(close + 2);
  } else {
    size_t colon = name.rfind(':');
    if (colon == std::string::npos) return std::nullopt;
    ip = name.substr(0, colon);
    port = name.substr(colon + 1);
  }
  std::string canonical = configfs::CanonicalIp(ip);
  if (canonical.empty() || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::make_pair(canonical, std::atoi(port.c_str()));
}

bool IsLunName(const std::string& name) { return name.rfind("lun_", 0) == 0; }

}  // namespace

LioExporter::LioExporter(Fs& fs, const std::string& configfs_root, std::string iqn_prefix,
                         configfs::DirIdentityFn dir_identity)
    : fs_(fs),
      target_(JoinPath(configfs_root, "target")),
      iscsi_(JoinPath(configfs_root, "target/iscsi")),
      prefix_(std::move(iqn_prefix)),
      dir_identity_(std::move(dir_identity)) {}

LioExporter::Names LioExporter::NamesFor(const std::string& agent_volume_id) const {
  Names n;
  n.iqn = TargetName(prefix_, agent_volume_id);
  n.backstore = JoinPath(
      target_, std::string("core/") + kHba + "/" + TargetName(kBackstorePrefix, agent_volume_id));
  n.tpg = JoinPath(iscsi_, n.iqn + "/" + kTpgt);
  return n;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> LioExporter::Links(
    const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;  // (link name, absolute target)
  ASSIGN_OR_RETURN(auto names, configfs::ListNames(fs_, dir, DirEntry::Type::kSymlink));
  for (const auto& name : names) {
    std::string link = JoinPath(dir, name);
    ASSIGN_OR_RETURN(std::string target, fs_.ReadLink(link));
    out.emplace_back(name, configfs::ResolveLink(link, target));
  }
  return out;
}

Status LioExporter::SetAttr(const std::string& dir, const std::string& attr,
                            const std::string& value, const std::string& what,
                            std::vector<std::string>* changes) {
  std::string path = JoinPath(dir, attr);
  ASSIGN_OR_RETURN(std::string current, ReadAttr(fs_, path));
  if (current == value) return Status::Ok();
  RETURN_IF_ERROR(fs_.WriteFile(path, value));
  Note(changes, "set " + attr + "=" + value + " on " + what);
  return Status::Ok();
}

Status LioExporter::RemoveLinkedGroup(const std::string& dir) {
  ASSIGN_OR_RETURN(auto links, configfs::ListNames(fs_, dir, DirEntry::Type::kSymlink));
  for (const auto& link : links) RETURN_IF_ERROR(fs_.Unlink(JoinPath(dir, link)));
  return fs_.RemoveDir(dir);
}

Status LioExporter::RemoveNodeAcl(const std::string& acl_dir) {
  ASSIGN_OR_RETURN(auto mapped, configfs::ListNames(fs_, acl_dir, DirEntry::Type::kDir));
  for (const auto& m : mapped) {
    if (IsLunName(m)) RETURN_IF_ERROR(RemoveLinkedGroup(JoinPath(acl_dir, m)));
  }
  return fs_.RemoveDir(acl_dir);
}

Status LioExporter::Apply(const KernelExport& want, std::vector<std::string>* changes) {
  Names n = NamesFor(want.agent_volume_id);
  auto annotate = [&](const Status& s) {
    return s.Annotate("iscsi export " + want.agent_volume_id);
  };
  RETURN_IF_ERROR(annotate(Validate(want, n.iqn)));
  if (!fs_.IsDir(target_)) {
    return Unavailable("iscsi export " + want.agent_volume_id + ": " + target_ +
                       " is missing (is target_core_mod loaded?)");
  }
  if (!fs_.IsDir(iscsi_)) {  // this mkdir is how targetcli loads iscsi_target_mod
    RETURN_IF_ERROR(annotate(fs_.MakeDir(iscsi_)));
    Note(changes, "create iscsi fabric " + iscsi_);
  }
  RETURN_IF_ERROR(annotate(ApplyBackstore(n, want.backing, changes)));
  std::string wwn = JoinPath(iscsi_, n.iqn);
  if (!fs_.IsDir(wwn)) {
    RETURN_IF_ERROR(annotate(fs_.MakeDir(wwn)));
    Note(changes, "create target " + n.iqn);
  }
  if (!fs_.IsDir(n.tpg)) {
    RETURN_IF_ERROR(annotate(fs_.MakeDir(n.tpg)));
    Note(changes, std::string("create ") + kTpgt + " of " + n.iqn);
  }
  // CHAP is enforced before any initiator is added, so a new ACL never
  // admits on its IQN alone; node ACLs get their credentials in WidenAcl.
  bool chap = want.params.auth == kAuthChap;
  RETURN_IF_ERROR(annotate(SetAttr(JoinPath(n.tpg, "attrib"), "authentication", chap ? "1" : "0",
                                   n.iqn + "/" + kTpgt, changes)));
  // Narrow, then serve, then widen, then enable: at no moment is anyone
  // admitted that neither the old nor the new state admits.
  RETURN_IF_ERROR(annotate(NarrowAcl(n, want, changes)));
  RETURN_IF_ERROR(annotate(ApplyLun(n, changes)));
  RETURN_IF_ERROR(annotate(WidenAcl(n, want, changes)));
  RETURN_IF_ERROR(annotate(ApplyPortal(n, want.params, changes)));
  return annotate(SetAttr(n.tpg, "enable", "1", n.iqn + "/" + kTpgt, changes));
}

Status LioExporter::ApplyBackstore(const Names& n, const std::string& backing,
                                   std::vector<std::string>* changes) {
  std::string hba = JoinPath(target_, std::string("core/") + kHba);
  std::string name = n.backstore.substr(n.backstore.rfind('/') + 1);
  std::string what = std::string("backstore ") + kHba + "/" + name;
  if (!fs_.IsDir(hba)) {
    RETURN_IF_ERROR(fs_.MakeDir(hba));
    Note(changes, std::string("create hba ") + kHba);
  }
  std::string enabled;
  if (fs_.IsDir(n.backstore)) {
    ASSIGN_OR_RETURN(std::string device, ReadAttr(fs_, JoinPath(n.backstore, "udev_path")));
    ASSIGN_OR_RETURN(enabled, ReadAttr(fs_, JoinPath(n.backstore, "enable")));
    if (enabled == "1" && device == backing) return Status::Ok();
    if (enabled == "1") {
      // A configured device's udev_path is fixed: rebuild it, after taking
      // our LUN off it (the LUN is re-linked by ApplyLun).
      std::string lun = JoinPath(n.tpg, std::string("lun/") + kLun);
      if (fs_.IsDir(lun)) {
        ASSIGN_OR_RETURN(auto links, Links(lun));
        for (const auto& [link, target] : links) {
          if (target != Normal(n.backstore)) continue;
          RETURN_IF_ERROR(fs_.Unlink(JoinPath(lun, link)));
          Note(changes, "unlink LUN 0 of " + n.iqn + " from " + what + " (device changes)");
        }
      }
      RETURN_IF_ERROR(fs_.RemoveDir(n.backstore));
      Note(changes, "remove " + what + " (device was " + device + ")");
      enabled.clear();
    }
  }
  if (!fs_.IsDir(n.backstore)) {
    RETURN_IF_ERROR(fs_.MakeDir(n.backstore));
    Note(changes, "create " + what);
  }
  // iblock takes its device from control; the udev_path attribute is what
  // tools (and Get) read back. Then a stable unit serial, then enable.
  RETURN_IF_ERROR(fs_.WriteFile(JoinPath(n.backstore, "control"), "udev_path=" + backing));
  RETURN_IF_ERROR(fs_.WriteFile(JoinPath(n.backstore, "udev_path"), backing));
  std::string serial = configfs::NameUuid(name, "lio-unit-serial");
  std::string wwn = JoinPath(n.backstore, "wwn");
  ASSIGN_OR_RETURN(std::string shown, ReadAttr(fs_, JoinPath(wwn, "vpd_unit_serial")));
  if (shown.size() < serial.size() || shown.substr(shown.size() - serial.size()) != serial) {
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(wwn, "vpd_unit_serial"), serial));
  }
  RETURN_IF_ERROR(fs_.WriteFile(JoinPath(n.backstore, "enable"), "1"));
  Note(changes, "enable " + what + " on " + backing);
  return Status::Ok();
}

Status LioExporter::NarrowAcl(const Names& n, const KernelExport& want,
                              std::vector<std::string>* changes) {
  std::string attrib = JoinPath(n.tpg, "attrib");
  bool acl = want.params.acl_enabled;
  if (acl) RETURN_IF_ERROR(SetAttr(attrib, "generate_node_acls", "0", n.iqn, changes));
  std::string acls = JoinPath(n.tpg, "acls");
  std::string lun0 = Normal(JoinPath(n.tpg, std::string("lun/") + kLun));
  ASSIGN_OR_RETURN(auto initiators, configfs::ListNames(fs_, acls, DirEntry::Type::kDir));
  for (const auto& initiator : initiators) {
    std::string acl_dir = JoinPath(acls, initiator);
    if (!acl || want.allowed_hosts.count(initiator) == 0) {
      RETURN_IF_ERROR(RemoveNodeAcl(acl_dir));
      Note(changes, "remove initiator " + initiator + " from " + n.iqn);
      continue;
    }
    ASSIGN_OR_RETURN(auto mapped, configfs::ListNames(fs_, acl_dir, DirEntry::Type::kDir));
    for (const auto& m : mapped) {
      if (!IsLunName(m)) continue;
      std::string mdir = JoinPath(acl_dir, m);
      if (m != kLun) {
        RETURN_IF_ERROR(RemoveLinkedGroup(mdir));
        Note(changes, "unmap " + m + " of " + n.iqn + " for " + initiator);
        continue;
      }
      ASSIGN_OR_RETURN(auto links, Links(mdir));
      for (const auto& [link, target] : links) {
        if (target == lun0) continue;
        RETURN_IF_ERROR(fs_.Unlink(JoinPath(mdir, link)));
        Note(changes, "unmap " + target + " from LUN 0 of " + n.iqn + " for " + initiator);
      }
    }
  }
  return Status::Ok();
}

Status LioExporter::ApplyLun(const Names& n, std::vector<std::string>* changes) {
  std::string luns = JoinPath(n.tpg, "lun");
  ASSIGN_OR_RETURN(auto names, configfs::ListNames(fs_, luns, DirEntry::Type::kDir));
  for (const auto& name : names) {
    if (name == kLun || !IsLunName(name)) continue;
    RETURN_IF_ERROR(RemoveLinkedGroup(JoinPath(luns, name)));
    Note(changes, "remove " + name + " from " + n.iqn + " (not part of the export)");
  }
  std::string lun = JoinPath(luns, kLun);
  if (!fs_.IsDir(lun)) {
    RETURN_IF_ERROR(fs_.MakeDir(lun));
    Note(changes, "create LUN 0 of " + n.iqn);
  }
  bool linked = false;
  ASSIGN_OR_RETURN(auto links, Links(lun));
  for (const auto& [link, target] : links) {
    if (target == Normal(n.backstore)) {
      linked = true;
      continue;
    }
    RETURN_IF_ERROR(fs_.Unlink(JoinPath(lun, link)));
    Note(changes, "unlink LUN 0 of " + n.iqn + " from " + target + " (not the volume's backstore)");
  }
  if (!linked) {
    std::string name = n.backstore.substr(n.backstore.rfind('/') + 1);
    RETURN_IF_ERROR(fs_.Symlink(n.backstore, JoinPath(lun, name)));
    Note(changes, "link LUN 0 of " + n.iqn + " -> " + std::string(kHba) + "/" + name);
  }
  return Status::Ok();
}

Status LioExporter::WidenAcl(const Names& n, const KernelExport& want,
                             std::vector<std::string>* changes) {
  std::string attrib = JoinPath(n.tpg, "attrib");
  if (!want.params.acl_enabled) {
    // Demo mode: any initiator, read-write, with its dynamic ACL cached.
    RETURN_IF_ERROR(SetAttr(attrib, "demo_mode_write_protect", "0", n.iqn, changes));
    RETURN_IF_ERROR(SetAttr(attrib, "cache_dynamic_acls", "1", n.iqn, changes));
    return SetAttr(attrib, "generate_node_acls", "1", n.iqn, changes);
  }
  std::string lun = JoinPath(n.tpg, std::string("lun/") + kLun);
  for (const auto& initiator : want.allowed_hosts) {
    std::string acl_dir = JoinPath(n.tpg, "acls/" + initiator);
    if (!fs_.IsDir(acl_dir)) {
      RETURN_IF_ERROR(fs_.MakeDir(acl_dir));
      Note(changes, "create node ACL " + initiator + " on " + n.iqn);
    }
    if (want.params.auth == kAuthChap) {
      RETURN_IF_ERROR(ApplyAclAuth(acl_dir, initiator, want.credentials, changes));
    }
    std::string mapped = JoinPath(acl_dir, kLun);
    if (!fs_.IsDir(mapped)) RETURN_IF_ERROR(fs_.MakeDir(mapped));
    ASSIGN_OR_RETURN(auto links, Links(mapped));
    if (links.empty()) {
      RETURN_IF_ERROR(fs_.Symlink(lun, JoinPath(mapped, kLun)));
      Note(changes, "allow initiator " + initiator + " on " + n.iqn + " (map LUN 0)");
    }
    RETURN_IF_ERROR(
        SetAttr(mapped, "write_protect", "0", "LUN 0 of " + n.iqn + " for " + initiator, changes));
  }
  return Status::Ok();
}

Status LioExporter::ApplyAclAuth(const std::string& acl_dir, const std::string& initiator,
                                 const Credentials& creds, std::vector<std::string>* changes) {
  std::string auth = JoinPath(acl_dir, "auth");
  const std::pair<const char*, const std::string*> fields[] = {
      {"userid", &creds.username},
      {"password", &creds.secret},
      {"userid_mutual", &creds.mutual_username},
      {"password_mutual", &creds.mutual_secret}};
  for (const auto& [attr, want] : fields) {
    std::string path = JoinPath(auth, attr);
    // Passwords hidden from local users before anything is written to them.
    if (std::string_view(attr).rfind("password", 0) == 0) {
      RETURN_IF_ERROR(configfs::KeepPrivate(fs_, path, changes));
    }
    ASSIGN_OR_RETURN(std::string have, ReadAttr(fs_, path));
    if (Unset(have) == *want) continue;
    // The value is a secret: the change line names the attribute only.
    RETURN_IF_ERROR(fs_.WriteFile(path, want->empty() ? "NULL" : *want));
    Note(changes, std::string("set CHAP ") + attr + " of initiator " + initiator);
  }
  return Status::Ok();
}

Status LioExporter::ApplyPortal(const Names& n, const ExportParams& params,
                                std::vector<std::string>* changes) {
  std::string np = JoinPath(n.tpg, "np");
  std::string ip = configfs::CanonicalIp(params.bind_address);
  ASSIGN_OR_RETURN(auto portals, configfs::ListNames(fs_, np, DirEntry::Type::kDir));
  std::string keep;
  for (const auto& name : portals) {
    auto parsed = ParsePortal(name);
    if (parsed && parsed->first == ip && parsed->second == params.port) keep = name;
  }
  if (keep.empty()) {
    keep = PortalName(ip, params.port);
    RETURN_IF_ERROR(fs_.MakeDir(JoinPath(np, keep)));
    Note(changes, "add portal " + keep + " to " + n.iqn);
  }
  // Only after the new portal exists, so a spec change does not drop service.
  for (const auto& name : portals) {
    if (name == keep) continue;
    RETURN_IF_ERROR(fs_.RemoveDir(JoinPath(np, name)));
    Note(changes, "remove portal " + name + " from " + n.iqn + " (not the export's address)");
  }
  return Status::Ok();
}

StatusOr<std::optional<ActualExport>> LioExporter::Get(const std::string& agent_volume_id) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent_volume_id", agent_volume_id));
  Names n = NamesFor(agent_volume_id);
  std::string wwn = JoinPath(iscsi_, n.iqn);
  if (!fs_.IsDir(wwn)) return std::optional<ActualExport>();
  ActualExport a;
  a.agent_volume_id = agent_volume_id;
  a.target_id = n.iqn;
  ASSIGN_OR_RETURN(auto tpgs, configfs::ListNames(fs_, wwn, DirEntry::Type::kDir));
  for (const auto& t : tpgs) {
    if (t.rfind("tpgt_", 0) == 0 && t != kTpgt) a.drift.push_back("extra TPG " + t);
  }
  if (!fs_.IsDir(n.tpg)) {
    a.drift.push_back(std::string("no ") + kTpgt);
    return std::optional<ActualExport>(std::move(a));
  }
  std::string attrib = JoinPath(n.tpg, "attrib");
  ASSIGN_OR_RETURN(std::string generate, ReadAttr(fs_, JoinPath(attrib, "generate_node_acls")));
  ASSIGN_OR_RETURN(std::string auth, ReadAttr(fs_, JoinPath(attrib, "authentication")));
  ASSIGN_OR_RETURN(std::string demo_wp, ReadAttr(fs_, JoinPath(attrib, "demo_mode_write_protect")));
  a.params.acl_enabled = generate != "1";
  a.params.auth = auth == "1" ? kAuthChap : kAuthNone;
  if (!a.params.acl_enabled && demo_wp != "0") {
    a.drift.push_back("demo_mode_write_protect=" + demo_wp + " (initiators get read-only)");
  }
  // LUN 0 and the backstore behind it.
  bool serving = false;
  std::string luns = JoinPath(n.tpg, "lun");
  ASSIGN_OR_RETURN(auto lun_names, configfs::ListNames(fs_, luns, DirEntry::Type::kDir));
  for (const auto& name : lun_names) {
    if (name != kLun) {
      a.drift.push_back("extra " + name);
      continue;
    }
    ASSIGN_OR_RETURN(auto links, Links(JoinPath(luns, name)));
    if (links.empty()) continue;
    const std::string& device = links.front().second;
    if (device != Normal(n.backstore)) {
      a.drift.push_back("LUN 0 serves " + device + ", not the volume's backstore");
    }
    ASSIGN_OR_RETURN(a.backing, ReadAttr(fs_, JoinPath(device, "udev_path")));
    ASSIGN_OR_RETURN(std::string dev_enabled, ReadAttr(fs_, JoinPath(device, "enable")));
    serving = dev_enabled == "1";
  }
  // The first portal; more than one is drift.
  ASSIGN_OR_RETURN(auto portals,
                   configfs::ListNames(fs_, JoinPath(n.tpg, "np"), DirEntry::Type::kDir));
  for (const auto& name : portals) {
    auto parsed = ParsePortal(name);
    if (!parsed) {
      a.drift.push_back("unparsable portal " + name);
    } else if (a.params.bind_address.empty()) {
      a.params.bind_address = parsed->first;
      a.params.port = parsed->second;
    }
  }
  if (portals.size() > 1) a.drift.push_back("several portals");
  // Node ACLs count as allowed only when they map LUN 0 and nothing else.
  std::string acls = JoinPath(n.tpg, "acls");
  std::string lun0 = Normal(JoinPath(luns, kLun));
  std::set<std::string> seen;  // credential digests of the admitted initiators
  ASSIGN_OR_RETURN(auto initiators, configfs::ListNames(fs_, acls, DirEntry::Type::kDir));
  for (const auto& initiator : initiators) {
    std::string acl_dir = JoinPath(acls, initiator);
    bool mapped_ok = false;
    ASSIGN_OR_RETURN(auto mapped, configfs::ListNames(fs_, acl_dir, DirEntry::Type::kDir));
    for (const auto& m : mapped) {
      if (!IsLunName(m)) continue;
      ASSIGN_OR_RETURN(auto links, Links(JoinPath(acl_dir, m)));
      if (m != kLun) {
        a.drift.push_back("initiator " + initiator + " has " + m + " mapped");
        continue;
      }
      mapped_ok = links.size() == 1 && links.front().second == lun0;
      ASSIGN_OR_RETURN(std::string wp, ReadAttr(fs_, JoinPath(acl_dir, m + "/write_protect")));
      if (wp != "0") a.drift.push_back("LUN 0 is read-only for " + initiator);
    }
    if (mapped_ok) {
      a.allowed_hosts.insert(initiator);
      Credentials c;
      for (auto [attr, field] : {std::pair<const char*, std::string*>{"userid", &c.username},
                                 {"password", &c.secret},
                                 {"userid_mutual", &c.mutual_username},
                                 {"password_mutual", &c.mutual_secret}}) {
        ASSIGN_OR_RETURN(std::string v,
                         ReadAttr(fs_, JoinPath(acl_dir, std::string("auth/") + attr)));
        *field = Unset(v);
      }
      seen.insert(CredentialsDigest(agent_volume_id, c));
    } else {
      a.drift.push_back("initiator " + initiator + " has no LUN 0 mapped");
    }
  }
  if (a.params.auth == kAuthChap && seen.size() == 1) a.params.auth_digest = *seen.begin();
  ASSIGN_OR_RETURN(std::string tpg_enabled, ReadAttr(fs_, JoinPath(n.tpg, "enable")));
  a.enabled = serving && tpg_enabled == "1";
  return std::optional<ActualExport>(std::move(a));
}

StatusOr<std::vector<ActualExport>> LioExporter::List() {
  std::vector<ActualExport> out;
  ASSIGN_OR_RETURN(auto names, configfs::ListNames(fs_, iscsi_, DirEntry::Type::kDir));
  for (const auto& name : names) {
    auto id = AgentVolumeIdFromTarget(prefix_, name);
    if (!id) continue;  // not pillar's
    ASSIGN_OR_RETURN(auto actual, Get(*id));
    if (actual) out.push_back(std::move(*actual));
  }
  return out;
}

Status LioExporter::Remove(const std::string& agent_volume_id, std::vector<std::string>* changes) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent_volume_id", agent_volume_id));
  Names n = NamesFor(agent_volume_id);
  auto annotate = [&](const Status& s) {
    return s.Annotate("remove iscsi export " + agent_volume_id);
  };
  std::string wwn = JoinPath(iscsi_, n.iqn);
  if (fs_.IsDir(wwn)) {
    ASSIGN_OR_RETURN(auto tpgs, configfs::ListNames(fs_, wwn, DirEntry::Type::kDir));
    for (const auto& t : tpgs) {
      if (t.rfind("tpgt_", 0) != 0) continue;
      std::string tpg = JoinPath(wwn, t);
      std::string what = n.iqn + "/" + t;
      // Stop logins first, then take the ACLs, LUNs and portals away.
      RETURN_IF_ERROR(annotate(SetAttr(tpg, "enable", "0", what, changes)));
      std::string acls = JoinPath(tpg, "acls");
      ASSIGN_OR_RETURN(auto initiators, configfs::ListNames(fs_, acls, DirEntry::Type::kDir));
      for (const auto& initiator : initiators) {
        RETURN_IF_ERROR(annotate(RemoveNodeAcl(JoinPath(acls, initiator))));
        Note(changes, "remove initiator " + initiator + " from " + what);
      }
      std::string luns = JoinPath(tpg, "lun");
      ASSIGN_OR_RETURN(auto lun_names, configfs::ListNames(fs_, luns, DirEntry::Type::kDir));
      for (const auto& lun : lun_names) {
        RETURN_IF_ERROR(annotate(RemoveLinkedGroup(JoinPath(luns, lun))));
        Note(changes, "remove " + lun + " from " + what);
      }
      std::string np = JoinPath(tpg, "np");
      ASSIGN_OR_RETURN(auto portals, configfs::ListNames(fs_, np, DirEntry::Type::kDir));
      for (const auto& portal : portals) {
        RETURN_IF_ERROR(annotate(fs_.RemoveDir(JoinPath(np, portal))));
        Note(changes, "remove portal " + portal + " from " + what);
      }
      RETURN_IF_ERROR(annotate(fs_.RemoveDir(tpg)));
      Note(changes, "remove " + what);
    }
    RETURN_IF_ERROR(annotate(fs_.RemoveDir(wwn)));
    Note(changes, "remove target " + n.iqn);
  }
  if (fs_.IsDir(n.backstore)) {
    RETURN_IF_ERROR(annotate(fs_.RemoveDir(n.backstore)));
    Note(changes, std::string("remove backstore ") + kHba + "/" +
                      n.backstore.substr(n.backstore.rfind('/') + 1));
  }
  return Status::Ok();
}

std::string LioExporter::StateToken() {
  auto core = dir_identity_(target_);
  if (!core) return "";
  auto fabric = dir_identity_(iscsi_);
  return "lio:" + *core + "/" + (fabric ? *fabric : "-");
}

}  // namespace pillar::agent
