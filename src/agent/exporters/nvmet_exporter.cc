#include "agent/exporters/nvmet_exporter.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "common/validate.h"

namespace pillar::agent {
namespace {

using configfs::Note;
using configfs::ReadAttr;

constexpr const char* kNsid = "1";

int ParseIntOr(const std::string& s, int fallback) {
  if (s.empty()) return fallback;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<int>(v) : fallback;
}

// Everything in `want` that reaches a path or an attribute is checked before
// anything is written.
Status Validate(const KernelExport& want, const std::string& nqn) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent_volume_id", want.agent_volume_id));
  RETURN_IF_ERROR(validate::Nqn("target_id", nqn));
  if (!want.target_id.empty() && want.target_id != nqn) {
    return InvalidArgument("target_id \"" + want.target_id + "\" does not belong to volume " +
                           want.agent_volume_id + ": want " + nqn);
  }
  RETURN_IF_ERROR(configfs::BackingPath("backing", want.backing));
  RETURN_IF_ERROR(validate::IpAddress("bind_address", want.params.bind_address));
  RETURN_IF_ERROR(validate::Port("port", want.params.port));
  if (want.params.in_capsule_data_size < 0 || want.params.in_capsule_data_size > (1 << 20)) {
    return InvalidArgument("in_capsule_data_size " +
                           std::to_string(want.params.in_capsule_data_size) +
                           " is invalid: want 0 (port default) to 1048576");
  }
  for (const auto& host : want.allowed_hosts) {
    RETURN_IF_ERROR(validate::Nqn("allowed_hosts", host));
  }
  // attr_allow_any_host=1 skips DH-HMAC-CHAP in nvmet: no key would be asked.
  return configfs::ValidateAuth(Protocol::kNvmeofTcp, want.params.auth, want.params.acl_enabled,
                                want.credentials, "nvmet authenticates listed hosts only");
}

bool PillarPort(int id) {
  return id >= NvmetExporter::kFirstPortId && id <= NvmetExporter::kLastPortId;
}

}  // namespace

NvmetExporter::NvmetExporter(Fs& fs, const std::string& configfs_root, std::string nqn_prefix,
                             configfs::DirIdentityFn dir_identity)
    : fs_(fs),
      nvmet_(JoinPath(configfs_root, "nvmet")),
      prefix_(std::move(nqn_prefix)),
      dir_identity_(std::move(dir_identity)) {}

std::string NvmetExporter::PortDir(int id) const {
  return JoinPath(nvmet_, "ports/" + std::to_string(id));
}

StatusOr<std::vector<NvmetExporter::Port>> NvmetExporter::ReadPorts(const std::string* only) {
  std::vector<Port> ports;
  ASSIGN_OR_RETURN(auto ids,
                   configfs::ListNames(fs_, JoinPath(nvmet_, "ports"), DirEntry::Type::kDir));
  for (const auto& name : ids) {
    Port p;
    p.id = ParseIntOr(name, -1);
    if (p.id < 0) continue;  // not a port the kernel could have made
    std::string dir = PortDir(p.id);
    ASSIGN_OR_RETURN(p.trtype, ReadAttr(fs_, JoinPath(dir, "addr_trtype")));
    ASSIGN_OR_RETURN(p.adrfam, ReadAttr(fs_, JoinPath(dir, "addr_adrfam")));
    ASSIGN_OR_RETURN(p.traddr, ReadAttr(fs_, JoinPath(dir, "addr_traddr")));
    ASSIGN_OR_RETURN(p.trsvcid, ReadAttr(fs_, JoinPath(dir, "addr_trsvcid")));
    ASSIGN_OR_RETURN(std::string inline_size,
                     ReadAttr(fs_, JoinPath(dir, "param_inline_data_size")));
    p.inline_data_size = ParseIntOr(inline_size, -1);
    std::string subsystems = JoinPath(dir, "subsystems");
    if (only != nullptr) {
      p.all_links = false;
      std::string link = JoinPath(subsystems, *only);
      if (fs_.Exists(link)) {
        ASSIGN_OR_RETURN(std::string nqn, configfs::LinkTargetName(fs_, link));
        p.links[nqn] = *only;
      }
    } else {
      ASSIGN_OR_RETURN(auto links, configfs::ListNames(fs_, subsystems, DirEntry::Type::kSymlink));
      for (const auto& link : links) {
        ASSIGN_OR_RETURN(std::string nqn,
                         configfs::LinkTargetName(fs_, JoinPath(subsystems, link)));
        p.links[nqn] = link;
      }
    }
    ports.push_back(std::move(p));
  }
  std::sort(ports.begin(), ports.end(), [](const Port& a, const Port& b) { return a.id < b.id; });
  return ports;
}

StatusOr<std::string> NvmetExporter::OtherLink(const Port& port, const std::string& nqn) {
  for (const auto& [other, link] : port.links) {
    if (other != nqn) return other;
  }
  if (port.all_links) return std::string();
  // Links pillar did not read are known by their names: pillar's are named
  // after their subsystem, and any other name is another subsystem's too.
  ASSIGN_OR_RETURN(auto names, configfs::ListNames(fs_, JoinPath(PortDir(port.id), "subsystems"),
                                                   DirEntry::Type::kSymlink));
  for (const auto& name : names) {
    auto mine = port.links.find(nqn);
    if (mine != port.links.end() && mine->second == name) continue;
    return name;
  }
  return std::string();
}

Status NvmetExporter::Apply(const KernelExport& want, std::vector<std::string>* changes) {
  std::string nqn = TargetName(prefix_, want.agent_volume_id);
  RETURN_IF_ERROR(Validate(want, nqn).Annotate("nvmet export " + want.agent_volume_id));
  if (!fs_.IsDir(nvmet_)) {
    return Unavailable("nvmet export " + want.agent_volume_id + ": " + nvmet_ +
                       " is missing (is the nvmet module loaded?)");
  }
  // Refuse a port conflict before creating anything.
  ASSIGN_OR_RETURN(auto ports, ReadPorts(&nqn));
  RETURN_IF_ERROR(CheckShared(FindPort(ports, nqn, want.params), nqn, want.params)
                      .Annotate("nvmet export " + want.agent_volume_id));
  std::string subsys = JoinPath(nvmet_, "subsystems/" + nqn);
  if (!fs_.IsDir(subsys)) {
    RETURN_IF_ERROR(fs_.MakeDir(subsys));
    Note(changes, "create subsystem " + nqn);
  }
  // The ACL first and the port last, so that a new subsystem is reachable
  // only once it admits exactly the intended hosts.
  Status s = ApplyAcl(nqn, want, changes);
  if (s.ok()) s = ApplyNamespace(nqn, want.backing, changes);
  if (s.ok()) s = ApplyPort(nqn, want.params, std::move(ports), changes);
  return s.Annotate("nvmet export " + want.agent_volume_id);
}

Status NvmetExporter::ApplyAcl(const std::string& nqn, const KernelExport& want,
                               std::vector<std::string>* changes) {
  std::string subsys = JoinPath(nvmet_, "subsystems/" + nqn);
  std::string any_attr = JoinPath(subsys, "attr_allow_any_host");
  std::string allowed = JoinPath(subsys, "allowed_hosts");
  ASSIGN_OR_RETURN(std::string any, ReadAttr(fs_, any_attr));
  std::map<std::string, std::string> links;  // host NQN -> link name
  ASSIGN_OR_RETURN(auto names, configfs::ListNames(fs_, allowed, DirEntry::Type::kSymlink));
  for (const auto& name : names) {
    ASSIGN_OR_RETURN(std::string host, configfs::LinkTargetName(fs_, JoinPath(allowed, name)));
    links[host] = name;
    NoteAdmitted(host, nqn);
  }
  bool acl = want.params.acl_enabled;
  // Narrow before widening: at no moment may more hosts be admitted than
  // both the old and the new state admit. nvmet itself refuses host links
  // while allow_any_host=1, and allow_any_host=1 while host links exist.
  if (acl && any == "1") {
    RETURN_IF_ERROR(fs_.WriteFile(any_attr, "0"));
    Note(changes, "set attr_allow_any_host=0 on " + nqn);
  }
  for (const auto& [host, link] : links) {
    if (acl && want.allowed_hosts.count(host) > 0) continue;
    RETURN_IF_ERROR(fs_.Unlink(JoinPath(allowed, link)));
    Note(changes, "remove host " + host + " from " + nqn);
    RETURN_IF_ERROR(DropHostIfUnused(host, changes));
  }
  if (!acl) {
    if (any != "1") {
      RETURN_IF_ERROR(fs_.WriteFile(any_attr, "1"));
      Note(changes, "set attr_allow_any_host=1 on " + nqn);
    }
    return Status::Ok();
  }
  for (const auto& host : want.allowed_hosts) {
    std::string host_dir = JoinPath(nvmet_, "hosts/" + host);
    if (links.count(host) > 0) {
      // Linked already: only its key may need repair (it was changed or lost).
      if (want.params.auth == kAuthChap) {
        RETURN_IF_ERROR(ApplyHostKeys(nqn, host, want.credentials, changes));
      }
      continue;
    }
    if (!fs_.IsDir(host_dir)) {
      RETURN_IF_ERROR(fs_.MakeDir(host_dir));
      Note(changes, "create host " + host);
    }
    // The key before the link: a host is never admitted on its NQN alone.
    if (want.params.auth == kAuthChap) {
      RETURN_IF_ERROR(ApplyHostKeys(nqn, host, want.credentials, changes));
    }
    RETURN_IF_ERROR(fs_.Symlink(host_dir, JoinPath(allowed, host)));
    NoteAdmitted(host, nqn);
    Note(changes, "allow host " + host + " on " + nqn);
  }
  return Status::Ok();
}

void NvmetExporter::NoteAdmitted(const std::string& host, const std::string& nqn) {
  std::lock_guard<std::mutex> lock(admitted_mu_);
  admitted_[host].insert(nqn);
}

StatusOr<bool> NvmetExporter::HostAdmitted(const std::string& host) {
  auto admits = [&](const std::string& nqn) {
    return fs_.Exists(JoinPath(nvmet_, "subsystems/" + nqn + "/allowed_hosts/" + host));
  };
  // The first one known is asked; one that no longer admits it is forgotten
  // and the next asked, so stale entries cost once each.
  for (;;) {
    std::string nqn;
    {
      std::lock_guard<std::mutex> lock(admitted_mu_);
      auto it = admitted_.find(host);
      if (it == admitted_.end() || it->second.empty()) break;
      nqn = *it->second.begin();
    }
    if (admits(nqn)) return true;
    std::lock_guard<std::mutex> lock(admitted_mu_);
    auto it = admitted_.find(host);
    if (it != admitted_.end()) it->second.erase(nqn);
  }
  // None known admits it: every subsystem is read, since one made around
  // pillar (or before this process) may, and all that do are remembered.
  ASSIGN_OR_RETURN(auto subsystems,
                   configfs::ListNames(fs_, JoinPath(nvmet_, "subsystems"), DirEntry::Type::kDir));
  bool found = false;
  for (const auto& other : subsystems) {
    if (!admits(other)) continue;
    NoteAdmitted(host, other);
    found = true;
  }
  if (!found) {
    std::lock_guard<std::mutex> lock(admitted_mu_);
    admitted_.erase(host);
  }
  return found;
}

Status NvmetExporter::DropHostIfUnused(const std::string& host, std::vector<std::string>* changes) {
  std::string host_dir = JoinPath(nvmet_, "hosts/" + host);
  if (!fs_.IsDir(host_dir)) return Status::Ok();
  ASSIGN_OR_RETURN(bool admitted, HostAdmitted(host));
  if (admitted) return Status::Ok();
  RETURN_IF_ERROR(fs_.RemoveDir(host_dir));
  Note(changes, "remove host entry " + host + " (no subsystem admits it)");
  return Status::Ok();
}

Status NvmetExporter::ApplyHostKeys(const std::string& nqn, const std::string& host,
                                    const Credentials& creds, std::vector<std::string>* changes) {
  std::string host_dir = JoinPath(nvmet_, "hosts/" + host);
  std::string key_attr = JoinPath(host_dir, "dhchap_key");
  std::string ctrl_attr = JoinPath(host_dir, "dhchap_ctrl_key");
  if (!fs_.Exists(key_attr)) {
    return FailedPrecondition(
        "this kernel's nvmet has no DH-HMAC-CHAP (" + key_attr +
        " is missing: CONFIG_NVME_TARGET_AUTH is not set); refusing to admit " + host + " to " +
        nqn + " without its key");
  }
  // Hidden from local users before anything is written to them.
  RETURN_IF_ERROR(configfs::KeepPrivate(fs_, key_attr, changes));
  RETURN_IF_ERROR(configfs::KeepPrivate(fs_, ctrl_attr, changes));
  // nvmet keys are per host, not per subsystem: a host already holding
  // another key keeps it while another subsystem admits it.
  ASSIGN_OR_RETURN(std::string key, ReadAttr(fs_, key_attr));
  ASSIGN_OR_RETURN(std::string ctrl, ReadAttr(fs_, ctrl_attr));
  bool same = key == creds.secret && ctrl == creds.mutual_secret;
  if (same) return Status::Ok();
  if (!key.empty()) {
    ASSIGN_OR_RETURN(auto subsystems, configfs::ListNames(fs_, JoinPath(nvmet_, "subsystems"),
                                                          DirEntry::Type::kDir));
    for (const auto& other : subsystems) {
      if (other == nqn) continue;
      if (fs_.Exists(JoinPath(nvmet_, "subsystems/" + other + "/allowed_hosts/" + host))) {
        return FailedPrecondition("host " + host + " holds another DH-HMAC-CHAP key, used by " +
                                  other +
                                  "; nvmet keeps one key per host, so volumes shared "
                                  "with one host on one agent must use the same secret");
      }
    }
  }
  if (key != creds.secret) {
    RETURN_IF_ERROR(fs_.WriteFile(key_attr, creds.secret));
    Note(changes, "set DH-HMAC-CHAP key of host " + host);
  }
  if (ctrl != creds.mutual_secret) {
    RETURN_IF_ERROR(fs_.WriteFile(ctrl_attr, creds.mutual_secret));
    Note(changes, "set DH-HMAC-CHAP controller key of host " + host);
  }
  return Status::Ok();
}

Status NvmetExporter::ApplyNamespace(const std::string& nqn, const std::string& backing,
                                     std::vector<std::string>* changes) {
  std::string namespaces = JoinPath(nvmet_, "subsystems/" + nqn + "/namespaces");
  ASSIGN_OR_RETURN(auto nsids, configfs::ListNames(fs_, namespaces, DirEntry::Type::kDir));
  for (const auto& nsid : nsids) {
    if (nsid == kNsid) continue;
    // Another namespace would expose another device to this volume's hosts.
    std::string dir = JoinPath(namespaces, nsid);
    ASSIGN_OR_RETURN(std::string on, ReadAttr(fs_, JoinPath(dir, "enable")));
    if (on == "1") RETURN_IF_ERROR(fs_.WriteFile(JoinPath(dir, "enable"), "0"));
    RETURN_IF_ERROR(fs_.RemoveDir(dir));
    Note(changes, "remove namespace " + nsid + " from " + nqn + " (not part of the export)");
  }
  std::string ns = JoinPath(namespaces, kNsid);
  if (!fs_.IsDir(ns)) {
    RETURN_IF_ERROR(fs_.MakeDir(ns));
    Note(changes, "create namespace 1 in " + nqn);
  }
  ASSIGN_OR_RETURN(std::string device, ReadAttr(fs_, JoinPath(ns, "device_path")));
  ASSIGN_OR_RETURN(std::string enabled, ReadAttr(fs_, JoinPath(ns, "enable")));
  if (device != backing) {
    if (enabled == "1") {  // nvmet refuses a new device_path on an enabled namespace
      RETURN_IF_ERROR(fs_.WriteFile(JoinPath(ns, "enable"), "0"));
      Note(changes, "disable namespace 1 of " + nqn + " to change its device from " + device);
      enabled = "0";
    }
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(ns, "device_path"), backing));
    Note(changes, "set namespace 1 of " + nqn + " device_path=" + backing);
  }
  if (enabled == "1") return Status::Ok();
  // The kernel picks a random UUID per namespace; a rebuilt export (module
  // reload, reboot) must keep the one hosts know, or they drop the namespace.
  for (const auto& [attr, salt] : {std::pair<const char*, const char*>{"device_uuid", "nvmet-uuid"},
                                   {"device_nguid", "nvmet-nguid"}}) {
    std::string id = configfs::NameUuid(nqn, salt);
    ASSIGN_OR_RETURN(std::string current, ReadAttr(fs_, JoinPath(ns, attr)));
    if (current == id) continue;
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(ns, attr), id));
    Note(changes, std::string("set namespace 1 of ") + nqn + " " + attr + "=" + id);
  }
  RETURN_IF_ERROR(fs_.WriteFile(JoinPath(ns, "enable"), "1"));
  Note(changes, "enable namespace 1 of " + nqn);
  return Status::Ok();
}

Status NvmetExporter::UnlinkFromPort(Port& port, const std::string& nqn, const std::string& why,
                                     std::vector<std::string>* changes) {
  auto it = port.links.find(nqn);
  if (it == port.links.end()) return Status::Ok();
  RETURN_IF_ERROR(fs_.Unlink(JoinPath(PortDir(port.id), "subsystems/" + it->second)));
  port.links.erase(it);
  Note(changes, "unlink port " + std::to_string(port.id) + " -> " + nqn + why);
  if (!PillarPort(port.id)) return Status::Ok();
  ASSIGN_OR_RETURN(std::string other, OtherLink(port, nqn));
  if (other.empty()) {
    RETURN_IF_ERROR(fs_.RemoveDir(PortDir(port.id)));
    Note(changes, "remove port " + std::to_string(port.id) + " (no subsystems left)");
  }
  return Status::Ok();
}

NvmetExporter::Port* NvmetExporter::FindPort(std::vector<Port>& ports, const std::string& nqn,
                                             const ExportParams& params) {
  std::string traddr = configfs::CanonicalIp(params.bind_address);
  std::string adrfam = configfs::IsIpv6(traddr) ? "ipv6" : "ipv4";
  std::string trsvcid = std::to_string(params.port);
  Port* match = nullptr;
  for (auto& p : ports) {
    if (p.trtype != "tcp" || p.adrfam != adrfam || p.trsvcid != trsvcid ||
        configfs::CanonicalIp(p.traddr) != traddr) {
      continue;
    }
    // Prefer the matching port this subsystem is already on.
    if (match == nullptr || (p.links.count(nqn) > 0 && match->links.count(nqn) == 0)) match = &p;
  }
  return match;
}

// nvmet freezes a port's attributes while subsystems are linked to it, so
// another size means re-creating the port: only when no one else uses it.
Status NvmetExporter::CheckShared(const Port* match, const std::string& nqn,
                                  const ExportParams& params) {
  int want_inline = params.in_capsule_data_size;
  if (match == nullptr || want_inline <= 0 || match->inline_data_size == want_inline) {
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::string other, OtherLink(*match, nqn));
  if (!other.empty()) {
    return FailedPrecondition(
        "port " + std::to_string(match->id) + " (" + match->traddr + " port " + match->trsvcid +
        ") has param_inline_data_size=" + std::to_string(match->inline_data_size) + ", want " +
        std::to_string(want_inline) + ", and also serves " + other +
        ": not changing a shared port");
  }
  return Status::Ok();
}

Status NvmetExporter::ApplyPort(const std::string& nqn, const ExportParams& params,
                                std::vector<Port> ports, std::vector<std::string>* changes) {
  std::string traddr = configfs::CanonicalIp(params.bind_address);
  std::string adrfam = configfs::IsIpv6(traddr) ? "ipv6" : "ipv4";
  std::string trsvcid = std::to_string(params.port);
  std::string where = traddr + " port " + trsvcid;
  Port* match = FindPort(ports, nqn, params);
  int want_inline = params.in_capsule_data_size;
  RETURN_IF_ERROR(CheckShared(match, nqn, params));
  if (match != nullptr && want_inline > 0 && match->inline_data_size != want_inline) {
    RETURN_IF_ERROR(UnlinkFromPort(*match, nqn, " (to change param_inline_data_size)", changes));
    if (!fs_.IsDir(PortDir(match->id))) match = nullptr;  // it was pillar's and is gone
  }
  if (match != nullptr && want_inline > 0 && match->inline_data_size != want_inline) {
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(PortDir(match->id), "param_inline_data_size"),
                                  std::to_string(want_inline)));
    match->inline_data_size = want_inline;
    Note(changes, "set port " + std::to_string(match->id) +
                      " param_inline_data_size=" + std::to_string(want_inline));
  }
  if (match == nullptr) {
    int id = kFirstPortId;
    while (id <= kLastPortId && fs_.Exists(PortDir(id))) ++id;
    if (id > kLastPortId) {
      return ResourceExhausted("no free nvmet port id in " + std::to_string(kFirstPortId) + "-" +
                               std::to_string(kLastPortId) + " for " + where);
    }
    std::string dir = PortDir(id);
    RETURN_IF_ERROR(fs_.MakeDir(dir));
    // addr_trtype first: the kernel resets the transport-specific fields on it.
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(dir, "addr_trtype"), "tcp"));
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(dir, "addr_adrfam"), adrfam));
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(dir, "addr_traddr"), traddr));
    RETURN_IF_ERROR(fs_.WriteFile(JoinPath(dir, "addr_trsvcid"), trsvcid));
    if (want_inline > 0) {
      RETURN_IF_ERROR(
          fs_.WriteFile(JoinPath(dir, "param_inline_data_size"), std::to_string(want_inline)));
    }
    Note(changes, "create port " + std::to_string(id) + " (tcp " + where +
                      (want_inline > 0 ? ", inline " + std::to_string(want_inline) : "") + ")");
    Port p;
    p.id = id;
    p.trtype = "tcp";
    p.adrfam = adrfam;
    p.traddr = traddr;
    p.trsvcid = trsvcid;
    p.inline_data_size = want_inline > 0 ? want_inline : -1;
    ports.push_back(std::move(p));
    match = &ports.back();
  }
  if (match->links.count(nqn) == 0) {
    RETURN_IF_ERROR(fs_.Symlink(JoinPath(nvmet_, "subsystems/" + nqn),
                                JoinPath(PortDir(match->id), "subsystems/" + nqn)));
    match->links[nqn] = nqn;
    Note(changes, "link port " + std::to_string(match->id) + " -> " + nqn);
  }
  // Only after the new link exists, so a spec change does not drop service.
  int keep = match->id;
  for (auto& p : ports) {
    if (p.id != keep)
      RETURN_IF_ERROR(UnlinkFromPort(p, nqn, " (not the export's address)", changes));
  }
  return Status::Ok();
}

StatusOr<std::optional<ActualExport>> NvmetExporter::Observe(const std::string& agent_volume_id,
                                                             const std::vector<Port>& ports) {
  std::string nqn = TargetName(prefix_, agent_volume_id);
  std::string subsys = JoinPath(nvmet_, "subsystems/" + nqn);
  if (!fs_.IsDir(subsys)) return std::optional<ActualExport>();
  ActualExport a;
  a.agent_volume_id = agent_volume_id;
  a.target_id = nqn;
  ASSIGN_OR_RETURN(std::string any, ReadAttr(fs_, JoinPath(subsys, "attr_allow_any_host")));
  a.params.acl_enabled = any != "1";
  std::string allowed = JoinPath(subsys, "allowed_hosts");
  ASSIGN_OR_RETURN(auto links, configfs::ListNames(fs_, allowed, DirEntry::Type::kSymlink));
  std::set<std::pair<std::string, std::string>> keys;  // (key, ctrl key) of each host
  bool all_keyed = !links.empty() && a.params.acl_enabled;
  for (const auto& link : links) {
    ASSIGN_OR_RETURN(std::string host, configfs::LinkTargetName(fs_, JoinPath(allowed, link)));
    a.allowed_hosts.insert(host);
    std::string host_dir = JoinPath(nvmet_, "hosts/" + host);
    if (!fs_.Exists(JoinPath(host_dir, "dhchap_key"))) {
      all_keyed = false;
      continue;
    }
    ASSIGN_OR_RETURN(std::string key, ReadAttr(fs_, JoinPath(host_dir, "dhchap_key")));
    ASSIGN_OR_RETURN(std::string ctrl, ReadAttr(fs_, JoinPath(host_dir, "dhchap_ctrl_key")));
    if (key.empty()) all_keyed = false;
    keys.emplace(key, ctrl);
  }
  if (all_keyed) {
    a.params.auth = kAuthChap;
    if (keys.size() == 1) {
      Credentials seen;
      seen.secret = keys.begin()->first;
      seen.mutual_secret = keys.begin()->second;
      a.params.auth_digest = CredentialsDigest(agent_volume_id, seen);
    }
  }
  bool ns_enabled = false;
  std::string namespaces = JoinPath(subsys, "namespaces");
  ASSIGN_OR_RETURN(auto nsids, configfs::ListNames(fs_, namespaces, DirEntry::Type::kDir));
  for (const auto& nsid : nsids) {
    if (nsid != kNsid) {
      a.drift.push_back("extra namespace " + nsid);
      continue;
    }
    std::string ns = JoinPath(namespaces, nsid);
    ASSIGN_OR_RETURN(std::string device, ReadAttr(fs_, JoinPath(ns, "device_path")));
    ASSIGN_OR_RETURN(std::string enabled, ReadAttr(fs_, JoinPath(ns, "enable")));
    a.backing = device == "(null)" ? "" : device;
    ns_enabled = enabled == "1";
  }
  std::vector<const Port*> linked;
  for (const auto& p : ports) {
    if (p.links.count(nqn) > 0) linked.push_back(&p);
  }
  if (!linked.empty()) {
    const Port& first = *linked.front();
    std::string canonical = configfs::CanonicalIp(first.traddr);
    a.params.bind_address = canonical.empty() ? first.traddr : canonical;
    a.params.port = ParseIntOr(first.trsvcid, 0);
    a.params.in_capsule_data_size = first.inline_data_size > 0 ? first.inline_data_size : 0;
    if (first.trtype != "tcp") {
      a.drift.push_back("port " + std::to_string(first.id) + " is " + first.trtype + ", not tcp");
    }
  }
  if (linked.size() > 1) {
    std::string ids;
    for (const Port* p : linked) ids += (ids.empty() ? "" : ", ") + std::to_string(p->id);
    a.drift.push_back("linked to several ports: " + ids);
  }
  a.enabled = ns_enabled && !linked.empty();
  return std::optional<ActualExport>(std::move(a));
}

StatusOr<std::optional<ActualExport>> NvmetExporter::Get(const std::string& agent_volume_id) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent_volume_id", agent_volume_id));
  if (!fs_.IsDir(nvmet_)) return std::optional<ActualExport>();
  std::string nqn = TargetName(prefix_, agent_volume_id);
  ASSIGN_OR_RETURN(auto ports, ReadPorts(&nqn));
  return Observe(agent_volume_id, ports);
}

StatusOr<std::vector<ActualExport>> NvmetExporter::List() {
  std::vector<ActualExport> out;
  if (!fs_.IsDir(nvmet_)) return out;
  ASSIGN_OR_RETURN(auto ports, ReadPorts());
  ASSIGN_OR_RETURN(auto names,
                   configfs::ListNames(fs_, JoinPath(nvmet_, "subsystems"), DirEntry::Type::kDir));
  for (const auto& name : names) {
    auto id = AgentVolumeIdFromTarget(prefix_, name);
    if (!id) continue;  // not pillar's
    ASSIGN_OR_RETURN(auto actual, Observe(*id, ports));
    if (actual) out.push_back(std::move(*actual));
  }
  return out;
}

Status NvmetExporter::Remove(const std::string& agent_volume_id,
                             std::vector<std::string>* changes) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent_volume_id", agent_volume_id));
  if (!fs_.IsDir(nvmet_)) return Status::Ok();
  std::string nqn = TargetName(prefix_, agent_volume_id);
  auto annotate = [&](const Status& s) {
    return s.Annotate("remove nvmet export " + agent_volume_id);
  };
  ASSIGN_OR_RETURN(auto ports, ReadPorts(&nqn));
  for (auto& p : ports) RETURN_IF_ERROR(annotate(UnlinkFromPort(p, nqn, "", changes)));
  std::string subsys = JoinPath(nvmet_, "subsystems/" + nqn);
  if (!fs_.IsDir(subsys)) return Status::Ok();
  std::string allowed = JoinPath(subsys, "allowed_hosts");
  ASSIGN_OR_RETURN(auto links, configfs::ListNames(fs_, allowed, DirEntry::Type::kSymlink));
  for (const auto& link : links) {
    auto host = configfs::LinkTargetName(fs_, JoinPath(allowed, link));
    RETURN_IF_ERROR(annotate(fs_.Unlink(JoinPath(allowed, link))));
    Note(changes, "remove host " + link + " from " + nqn);
    if (host.ok()) RETURN_IF_ERROR(annotate(DropHostIfUnused(*host, changes)));
  }
  std::string namespaces = JoinPath(subsys, "namespaces");
  ASSIGN_OR_RETURN(auto nsids, configfs::ListNames(fs_, namespaces, DirEntry::Type::kDir));
  for (const auto& nsid : nsids) {
    std::string ns = JoinPath(namespaces, nsid);
    ASSIGN_OR_RETURN(std::string on, ReadAttr(fs_, JoinPath(ns, "enable")));
    if (on == "1") {
      RETURN_IF_ERROR(annotate(fs_.WriteFile(JoinPath(ns, "enable"), "0")));
      Note(changes, "disable namespace " + nsid + " of " + nqn);
    }
    RETURN_IF_ERROR(annotate(fs_.RemoveDir(ns)));
    Note(changes, "remove namespace " + nsid + " from " + nqn);
  }
  RETURN_IF_ERROR(annotate(fs_.RemoveDir(subsys)));
  Note(changes, "remove subsystem " + nqn);
  return Status::Ok();
}

std::string NvmetExporter::StateToken() {
  auto id = dir_identity_(nvmet_);
  return id ? "nvmet:" + *id : "";
}

}  // namespace pillar::agent
