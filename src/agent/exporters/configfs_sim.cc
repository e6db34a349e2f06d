#include "agent/exporters/configfs_sim.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "agent/exporters/configfs_util.h"

namespace pillar::agent {

enum class ConfigfsSim::Kind {
  kNone,
  kRoot,
  kStatistics,  // statistics groups: present, contents not simulated
  // nvmet
  kNvmet,
  kNvmetSubsystems,
  kNvmetSubsys,
  kNvmetNamespaces,
  kNvmetNs,
  kNvmetAllowedHosts,
  kNvmetPassthru,
  kNvmetPorts,
  kNvmetPort,
  kNvmetPortSubsystems,
  kNvmetReferrals,
  kNvmetReferral,
  kNvmetAnaGroups,
  kNvmetAnaGroup,
  kNvmetHosts,
  kNvmetHost,
  // LIO core
  kTarget,
  kCore,
  kCoreAlua,
  kCoreLuGps,
  kCoreLuGp,
  kHba,
  kDevice,
  kDevAttrib,
  kDevPr,
  kDevAlua,
  kDevTgPtGp,
  kDevWwn,
  // LIO iSCSI fabric
  kIscsi,
  kIscsiDiscoveryAuth,
  kIscsiWwn,
  kTpg,
  kTpgAcls,
  kTpgAttrib,
  kTpgAuth,
  kTpgLun,
  kTpgNp,
  kTpgParam,
  kLun,
  kNp,
  kNodeAcl,
  kNaclAttrib,
  kNaclAuth,
  kNaclParam,
  kMappedLun,
};

namespace {

using Kind = ConfigfsSim::Kind;

enum class Access { kRw, kRo, kWo };

struct AttrSpec {
  const char* name;
  const char* value;  // "{name}", "{serial}", "{uuid}" are filled in at mkdir
  Access access = Access::kRw;
};

using NameCheck = bool (*)(const std::string&);

struct KindSpec {
  std::vector<AttrSpec> attrs;
  std::vector<std::pair<const char*, Kind>> defaults;  // default groups
  Kind made = Kind::kNone;        // kind of user-made child groups (make_group)
  NameCheck made_name = nullptr;  // the kernel's check of a new group's name
  const char* made_rule = "";
  Kind link_to = Kind::kNone;  // allow_link: the kind a link here must point at
};

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool NumberIn(const std::string& s, unsigned long lo, unsigned long hi) {
  if (!AllDigits(s)) return false;
  unsigned long v = std::stoul(s);
  return v >= lo && v <= hi;
}

bool PrefixedNumber(const std::string& s, const std::string& prefix, unsigned long hi) {
  return s.compare(0, prefix.size(), prefix) == 0 && NumberIn(s.substr(prefix.size()), 0, hi);
}

bool AnyQualifiedName(const std::string& s) { return !s.empty() && s.size() <= 223; }
bool AnyName(const std::string& s) { return !s.empty() && s.size() <= 255; }

bool SubsysName(const std::string& s) {
  return AnyQualifiedName(s) && s != "nqn.2014-08.org.nvmexpress.discovery";
}
bool NsidName(const std::string& s) { return NumberIn(s, 1, 0xfffffffeUL); }
bool PortIdName(const std::string& s) { return NumberIn(s, 0, 65535); }
bool AnaGroupName(const std::string& s) { return NumberIn(s, 2, 128); }
bool FabricName(const std::string& s) { return s == "iscsi"; }
bool TpgtName(const std::string& s) { return PrefixedNumber(s, "tpgt_", 65535); }
bool LunName(const std::string& s) { return PrefixedNumber(s, "lun_", 65535); }

bool HbaName(const std::string& s) {
  size_t us = s.rfind('_');
  if (us == std::string::npos || !AllDigits(s.substr(us + 1))) return false;
  static const std::set<std::string> kPlugins = {"iblock", "fileio", "pscsi", "rd_mcp", "user"};
  return kPlugins.count(s.substr(0, us)) > 0;
}

// "<ipv4>:<port>" or "[<ipv6>]:<port>", as lio_target_call_addnptotpg parses.
bool PortalName(const std::string& s) {
  std::string ip, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find("]:");
    if (close == std::string::npos) return false;
    ip = s.substr(1, close - 1);
    port = s.substr(close + 2);
    if (!configfs::IsIpv6(ip)) return false;
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    ip = s.substr(0, colon);
    port = s.substr(colon + 1);
    unsigned char buf[4];
    if (inet_pton(AF_INET, ip.c_str(), buf) != 1) return false;
  }
  return NumberIn(port, 0, 65535);
}

const KindSpec& Spec(Kind kind) {
  static const std::map<Kind, KindSpec> kSpecs = [] {
    std::map<Kind, KindSpec> m;
    m[Kind::kNone] = {};
    m[Kind::kStatistics] = {};
    m[Kind::kRoot] = {{}, {{"nvmet", Kind::kNvmet}, {"target", Kind::kTarget}}};
    // nvmet, per drivers/nvme/target/configfs.c.
    m[Kind::kNvmet] = {{{"discovery_nqn", "nqn.2014-08.org.nvmexpress.discovery"}},
                       {{"subsystems", Kind::kNvmetSubsystems},
                        {"ports", Kind::kNvmetPorts},
                        {"hosts", Kind::kNvmetHosts}}};
    m[Kind::kNvmetSubsystems] = {{},
                                 {},
                                 Kind::kNvmetSubsys,
                                 SubsysName,
                                 "an NQN of at most 223 bytes, not the discovery NQN"};
    m[Kind::kNvmetSubsys] = {{{"attr_allow_any_host", "0"},
                              {"attr_version", "1.3"},
                              {"attr_serial", "{serial}"},
                              {"attr_cntlid_min", "1"},
                              {"attr_cntlid_max", "65519"},
                              {"attr_vendor_id", "0x0"},
                              {"attr_subsys_vendor_id", "0x0"},
                              {"attr_model", "Linux"},
                              {"attr_qid_max", "128"},
                              {"attr_ieee_oui", "0x000000"},
                              {"attr_firmware", "6.1.0"},
                              {"attr_pi_enable", "0"}},
                             {{"namespaces", Kind::kNvmetNamespaces},
                              {"allowed_hosts", Kind::kNvmetAllowedHosts},
                              {"passthru", Kind::kNvmetPassthru}}};
    m[Kind::kNvmetPassthru] = {{{"device_path", ""},
                                {"enable", "0"},
                                {"admin_timeout", "0"},
                                {"io_timeout", "0"},
                                {"clear_ids", "0"}}};
    m[Kind::kNvmetNamespaces] = {{}, {}, Kind::kNvmetNs, NsidName, "an NSID 1-4294967294"};
    // A NULL device_path shows as "(null)" through the kernel's %s.
    m[Kind::kNvmetNs] = {{{"device_path", "(null)"},
                          {"device_nguid", "00000000-0000-0000-0000-000000000000"},
                          {"device_uuid", "{uuid}"},
                          {"ana_grpid", "1"},
                          {"enable", "0"},
                          {"buffered_io", "0"},
                          {"revalidate_size", "", Access::kWo},
                          {"resv_enable", "0"}}};
    m[Kind::kNvmetAllowedHosts] = {{}, {}, Kind::kNone, nullptr, "", Kind::kNvmetHost};
    m[Kind::kNvmetPorts] = {{}, {}, Kind::kNvmetPort, PortIdName, "a numeric port id 0-65535"};
    m[Kind::kNvmetPort] = {{{"addr_adrfam", ""},
                            {"addr_treq", "not specified"},
                            {"addr_traddr", ""},
                            {"addr_trsvcid", ""},
                            {"addr_trtype", ""},
                            {"addr_tsas", ""},
                            {"param_inline_data_size", "-1"},
                            {"param_max_queue_size", "-1"},
                            {"param_mdts", "-1"},
                            {"param_pi_enable", "0"}},
                           {{"subsystems", Kind::kNvmetPortSubsystems},
                            {"referrals", Kind::kNvmetReferrals},
                            {"ana_groups", Kind::kNvmetAnaGroups}}};
    m[Kind::kNvmetPortSubsystems] = {{}, {}, Kind::kNone, nullptr, "", Kind::kNvmetSubsys};
    m[Kind::kNvmetReferrals] = {{}, {}, Kind::kNvmetReferral, AnyName, "a name"};
    m[Kind::kNvmetReferral] = {{{"addr_adrfam", ""},
                                {"addr_portid", "0"},
                                {"addr_treq", "not specified"},
                                {"addr_traddr", ""},
                                {"addr_trsvcid", ""},
                                {"addr_trtype", ""},
                                {"enable", "0"}}};
    m[Kind::kNvmetAnaGroups] = {
        {}, {{"1", Kind::kNvmetAnaGroup}}, Kind::kNvmetAnaGroup, AnaGroupName, "a group id 2-128"};
    m[Kind::kNvmetAnaGroup] = {{{"ana_state", "optimized"}}};
    m[Kind::kNvmetHosts] = {{}, {}, Kind::kNvmetHost, AnyQualifiedName, "a host NQN"};
    m[Kind::kNvmetHost] = {{{"dhchap_key", ""},
                            {"dhchap_ctrl_key", ""},
                            {"dhchap_hash", "hmac(sha256)"},
                            {"dhchap_dhgroup", "null"}}};
    // LIO core, per drivers/target/target_core_configfs.c.
    m[Kind::kTarget] = {
        {{"version", "Target Engine Core ConfigFS Infrastructure v5.0 on Linux/x86_64 on 6.1.0",
          Access::kRo},
         {"dbroot", "/etc/target"}},
        {{"core", Kind::kCore}},
        Kind::kIscsi,
        FabricName,
        "a loaded fabric module (the simulation has only \"iscsi\")"};
    m[Kind::kCore] = {{},
                      {{"alua", Kind::kCoreAlua}},
                      Kind::kHba,
                      HbaName,
                      "<plugin>_<n> with plugin iblock, fileio, pscsi, rd_mcp or user"};
    m[Kind::kCoreAlua] = {{}, {{"lu_gps", Kind::kCoreLuGps}}};
    m[Kind::kCoreLuGps] = {{}, {{"default_lu_gp", Kind::kCoreLuGp}}};
    m[Kind::kCoreLuGp] = {{{"lu_gp_id", "0"}, {"members", "", Access::kRo}}};
    m[Kind::kHba] = {
        {{"hba_info", "HBA Index: 0 plugin: {name} version: v5.0", Access::kRo}, {"hba_mode", "0"}},
        {},
        Kind::kDevice,
        AnyName,
        "a device name"};
    m[Kind::kDevice] = {{{"alias", ""},
                         {"alua_lu_gp", "LU Group Alias: default_lu_gp"},
                         {"control", "", Access::kWo},
                         {"enable", "0"},
                         {"info", "", Access::kRo},
                         {"lba_map", ""},
                         {"udev_path", ""}},
                        {{"attrib", Kind::kDevAttrib},
                         {"pr", Kind::kDevPr},
                         {"statistics", Kind::kStatistics},
                         {"alua", Kind::kDevAlua},
                         {"wwn", Kind::kDevWwn}}};
    m[Kind::kDevAttrib] = {{{"block_size", "512"},
                            {"emulate_3pc", "1"},
                            {"emulate_caw", "1"},
                            {"emulate_dpo", "1"},
                            {"emulate_fua_read", "1"},
                            {"emulate_fua_write", "1"},
                            {"emulate_model_alias", "1"},
                            {"emulate_tas", "1"},
                            {"emulate_tpu", "0"},
                            {"emulate_tpws", "0"},
                            {"emulate_write_cache", "0"},
                            {"enforce_pr_isids", "1"},
                            {"hw_block_size", "512", Access::kRo},
                            {"hw_max_sectors", "1024", Access::kRo},
                            {"hw_queue_depth", "128", Access::kRo},
                            {"is_nonrot", "0"},
                            {"max_write_same_len", "65535"},
                            {"optimal_sectors", "1024"},
                            {"queue_depth", "128"},
                            {"unmap_zeroes_data", "0"}}};
    m[Kind::kDevPr] = {{{"res_aptpl_active", "0", Access::kRo},
                        {"res_holder", "No SPC-3 Reservation holder", Access::kRo},
                        {"res_pr_generation", "0x00000000", Access::kRo},
                        {"res_pr_registered_i_pts", "None", Access::kRo},
                        {"res_type", "SPC3_PERSISTENT_RESERVATIONS", Access::kRo}}};
    m[Kind::kDevAlua] = {{}, {{"default_tg_pt_gp", Kind::kDevTgPtGp}}};
    m[Kind::kDevTgPtGp] = {{{"alua_access_state", "0"},
                            {"alua_access_status", "None"},
                            {"alua_access_type", "Implicit and Explicit"},
                            {"tg_pt_gp_id", "0"},
                            {"members", "", Access::kRo}}};
    m[Kind::kDevWwn] = {{{"vendor_id", "LIO-ORG"},
                         {"product_id", "{name}"},
                         {"revision", "4.0"},
                         {"vpd_unit_serial", "T10 VPD Unit Serial Number: {uuid}"}}};
    // LIO iSCSI fabric, per drivers/target/iscsi/iscsi_target_configfs.c and
    // target_core_fabric_configfs.c.
    m[Kind::kIscsi] = {{{"lio_version", "Datera Inc. iSCSI Target v4.1.0", Access::kRo},
                        {"cpus_allowed_list", "0-1"}},
                       {{"discovery_auth", Kind::kIscsiDiscoveryAuth}},
                       Kind::kIscsiWwn,
                       AnyQualifiedName,
                       "an iSCSI name shorter than 224 bytes"};
    m[Kind::kIscsiDiscoveryAuth] = {{{"enforce_discovery_auth", "0"},
                                     {"userid", "NULL"},
                                     {"password", "NULL"},
                                     {"authenticate_target", "0", Access::kRo},
                                     {"userid_mutual", "NULL"},
                                     {"password_mutual", "NULL"}}};
    m[Kind::kIscsiWwn] = {
        {}, {{"fabric_statistics", Kind::kStatistics}}, Kind::kTpg, TpgtName, "tpgt_<n>"};
    m[Kind::kTpg] = {{{"enable", "0"}, {"dynamic_sessions", "", Access::kRo}, {"rtpi", "1"}},
                     {{"acls", Kind::kTpgAcls},
                      {"attrib", Kind::kTpgAttrib},
                      {"auth", Kind::kTpgAuth},
                      {"lun", Kind::kTpgLun},
                      {"np", Kind::kTpgNp},
                      {"param", Kind::kTpgParam}}};
    m[Kind::kTpgAttrib] = {{{"authentication", "1"},
                            {"login_timeout", "15"},
                            {"netif_timeout", "2"},
                            {"generate_node_acls", "0"},
                            {"default_cmdsn_depth", "64"},
                            {"cache_dynamic_acls", "0"},
                            {"demo_mode_write_protect", "1"},
                            {"prod_mode_write_protect", "0"},
                            {"demo_mode_discovery", "1"},
                            {"default_erl", "0"},
                            {"t10_pi", "0"},
                            {"fabric_prot_type", "0"},
                            {"tpg_enabled_sendtargets", "1"},
                            {"login_keys_workaround", "1"}}};
    m[Kind::kTpgAuth] = {{{"userid", ""},
                          {"password", ""},
                          {"authenticate_target", "0", Access::kRo},
                          {"userid_mutual", ""},
                          {"password_mutual", ""}}};
    m[Kind::kTpgParam] = {{{"AuthMethod", "CHAP,None"},
                           {"HeaderDigest", "CRC32C,None"},
                           {"DataDigest", "CRC32C,None"},
                           {"MaxConnections", "1"},
                           {"TargetAlias", "LIO Target"},
                           {"InitialR2T", "Yes"},
                           {"ImmediateData", "Yes"},
                           {"MaxRecvDataSegmentLength", "8192"},
                           {"MaxXmitDataSegmentLength", "262144"},
                           {"MaxBurstLength", "262144"},
                           {"FirstBurstLength", "65536"},
                           {"DefaultTime2Wait", "2"},
                           {"DefaultTime2Retain", "20"},
                           {"MaxOutstandingR2T", "1"},
                           {"DataPDUInOrder", "Yes"},
                           {"DataSequenceInOrder", "Yes"},
                           {"ErrorRecoveryLevel", "0"},
                           {"IFMarker", "No"},
                           {"OFMarker", "No"},
                           {"IFMarkInt", "2048~65535"},
                           {"OFMarkInt", "2048~65535"}}};
    m[Kind::kTpgLun] = {{}, {}, Kind::kLun, LunName, "lun_<n>"};
    m[Kind::kLun] = {{{"alua_tg_pt_gp", "TG Port Alias: default_tg_pt_gp"},
                      {"alua_tg_pt_offline", "0"},
                      {"alua_tg_pt_status", "0"},
                      {"alua_tg_pt_write_md", "0"}},
                     {{"statistics", Kind::kStatistics}},
                     Kind::kNone,
                     nullptr,
                     "",
                     Kind::kDevice};
    m[Kind::kTpgNp] = {{}, {}, Kind::kNp, PortalName, "<ipv4>:<port> or [<ipv6>]:<port>"};
    m[Kind::kNp] = {{{"iser", "0"}, {"cxgbit", "0"}}};
    m[Kind::kTpgAcls] = {{}, {}, Kind::kNodeAcl, AnyQualifiedName, "an initiator name"};
    m[Kind::kNodeAcl] = {
        {{"info", "No active iSCSI Session for Initiator Endpoint: {name}", Access::kRo},
         {"cmdsn_depth", "64"},
         {"tag", ""}},
        {{"attrib", Kind::kNaclAttrib},
         {"auth", Kind::kNaclAuth},
         {"param", Kind::kNaclParam},
         {"fabric_statistics", Kind::kStatistics}},
        Kind::kMappedLun,
        LunName,
        "lun_<n>"};
    m[Kind::kNaclAttrib] = {{{"dataout_timeout", "3"},
                             {"dataout_timeout_retries", "5"},
                             {"default_erl", "0"},
                             {"nopin_timeout", "15"},
                             {"nopin_response_timeout", "30"},
                             {"random_datain_pdu_offsets", "0"},
                             {"random_datain_seq_offsets", "0"},
                             {"random_r2t_offsets", "0"}}};
    m[Kind::kNaclAuth] = {{{"userid", ""},
                           {"password", ""},
                           {"authenticate_target", "0", Access::kRo},
                           {"userid_mutual", ""},
                           {"password_mutual", ""}}};
    m[Kind::kNaclParam] = {{{"MaxConnections", "No Active iSCSI Session", Access::kRo},
                            {"ErrorRecoveryLevel", "No Active iSCSI Session", Access::kRo}}};
    m[Kind::kMappedLun] = {{{"write_protect", "0"}},
                           {{"statistics", Kind::kStatistics}},
                           Kind::kNone,
                           nullptr,
                           "",
                           Kind::kLun};
    return m;
  }();
  auto it = kSpecs.find(kind);
  return it == kSpecs.end() ? kSpecs.at(Kind::kNone) : it->second;
}

const AttrSpec* FindAttr(Kind kind, const std::string& name) {
  for (const auto& a : Spec(kind).attrs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::optional<Kind> DefaultGroup(Kind parent, const std::string& name) {
  for (const auto& [n, k] : Spec(parent).defaults) {
    if (name == n) return k;
  }
  return std::nullopt;
}

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

ConfigfsSim::ConfigfsSim(const std::string& root) {
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
  RETURN_IF_ERROR(posix_.MakeDir(path));
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
        posix_.WriteFile(JoinPath(path, a.name), a.access == Access::kWo ? "" : value + "\n"));
  }
  for (const auto& [n, k] : Spec(kind).defaults) {
    RETURN_IF_ERROR(CreateGroup(JoinPath(path, n), k));
  }
  return Status::Ok();
}

StatusOr<std::string> ConfigfsSim::Attr(const std::vector<std::string>& dir,
                                        const std::string& attr) {
  return configfs::ReadAttr(posix_, JoinPath(Abs(dir), attr));
}

Status ConfigfsSim::SetAttr(const std::vector<std::string>& dir, const std::string& attr,
                            const std::string& value) {
  return posix_.WriteFile(JoinPath(Abs(dir), attr), value + "\n");
}

bool ConfigfsSim::HasLinks(const std::string& dir) {
  auto links = configfs::ListNames(posix_, dir, DirEntry::Type::kSymlink);
  return links.ok() && !links->empty();
}

Status ConfigfsSim::LoadModuleTree(const std::string& name, Kind kind) {
  std::string path = JoinPath(root_, name);
  if (posix_.IsDir(path)) return Status::Ok();
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
  if (posix_.IsDir(iscsi)) return Status::Ok();
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

Status ConfigfsSim::UnloadNvmet() { return DropTree(JoinPath(root_, "nvmet")); }
Status ConfigfsSim::UnloadLio() { return DropTree(JoinPath(root_, "target")); }

StatusOr<std::string> ConfigfsSim::ReadFile(const std::string& path) {
  return posix_.ReadFile(path);
}

Status ConfigfsSim::WriteFile(const std::string& path, const std::string& content) {
  Rel rel = Relative(path);
  if (!rel.inside) return posix_.WriteFile(path, content);
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
  return posix_.WriteFile(path, value + "\n");
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
  return posix_.WriteFileAtomic(path, content);
}

Status ConfigfsSim::MakeDir(const std::string& path) {
  Rel rel = Relative(path);
  if (!rel.inside) return posix_.MakeDir(path);
  if (posix_.IsDir(path)) return Status::Ok();
  if (rel.parts.empty()) return NotFound("mkdir " + path + ": configfs root is missing");
  std::vector<std::string> parent(rel.parts.begin(), rel.parts.end() - 1);
  const std::string& name = rel.parts.back();
  if (!posix_.IsDir(Abs(parent))) return NotFound("mkdir " + path + ": parent does not exist");
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
  if (!rel.inside) return posix_.MakeDirs(path);
  if (!posix_.IsDir(root_)) return NotFound("mkdir " + path + ": configfs root is missing");
  std::vector<std::string> cur;
  for (const auto& p : rel.parts) {
    cur.push_back(p);
    RETURN_IF_ERROR(MakeDir(Abs(cur)));
  }
  return Status::Ok();
}

Status ConfigfsSim::CheckRemovable(const std::string& path, Kind kind) {
  ASSIGN_OR_RETURN(auto entries, posix_.ListDir(path));
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
  if (!rel.inside) return posix_.RemoveDir(path);
  if (!posix_.Exists(path)) return Status::Ok();
  if (!posix_.IsDir(path) || posix_.ReadLink(path).ok()) {
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
  if (ec) return Internal("rmdir " + path + ": " + ec.message());
  return Status::Ok();
}

Status ConfigfsSim::Unlink(const std::string& path) {
  Rel rel = Relative(path);
  if (!rel.inside) return posix_.Unlink(path);
  if (!posix_.Exists(path)) return Status::Ok();
  if (!posix_.ReadLink(path).ok()) {
    return Denied("unlink " + path + ": only links can be removed; attributes and groups stay");
  }
  return posix_.Unlink(path);
}

Status ConfigfsSim::Symlink(const std::string& target, const std::string& link) {
  Rel rel = Relative(link);
  if (!rel.inside) return posix_.Symlink(target, link);
  if (rel.parts.empty()) return Denied("symlink " + link + ": is the configfs root");
  std::vector<std::string> dir(rel.parts.begin(), rel.parts.end() - 1);
  Kind kind = Classify(dir);
  if (Spec(kind).link_to == Kind::kNone) {
    return Denied("symlink " + link + ": links are not allowed in this group");
  }
  if (posix_.Exists(link)) return AlreadyExists("symlink " + link + ": already exists");
  Rel to = Relative(configfs::ResolveLink(link, target));
  if (!to.inside) return Denied("symlink " + link + ": target " + target + " is not in configfs");
  if (!posix_.IsDir(Abs(to.parts)) || posix_.ReadLink(Abs(to.parts)).ok()) {
    return NotFound("symlink " + link + ": target " + target + " does not exist");
  }
  if (Classify(to.parts) != Spec(kind).link_to) {
    return InvalidArgument("symlink " + link + ": target " + target + " is the wrong kind of item");
  }
  RETURN_IF_ERROR(OnLink(dir, kind, to.parts).Annotate("symlink " + link));
  // configfs shows links relative to the link's group, through the root.
  std::string relative;
  for (size_t i = 0; i < dir.size(); ++i) relative += "../";
  return posix_.Symlink(relative + Joined(to.parts), link);
}

// Checks of the kernel's allow_link callbacks.
Status ConfigfsSim::OnLink(const std::vector<std::string>& dir, Kind kind,
                           const std::vector<std::string>& target) {
  ASSIGN_OR_RETURN(auto links, configfs::ListNames(posix_, Abs(dir), DirEntry::Type::kSymlink));
  for (const auto& l : links) {
    auto existing = posix_.ReadLink(JoinPath(Abs(dir), l));
    if (existing.ok() &&
        Relative(configfs::ResolveLink(JoinPath(Abs(dir), l), *existing)).parts == target) {
      return AlreadyExists("already linked to " + Joined(target) + " as " + l);
    }
  }
  switch (kind) {
    case Kind::kNvmetAllowedHosts: {
      std::vector<std::string> subsys(dir.begin(), dir.end() - 1);
      ASSIGN_OR_RETURN(std::string any, Attr(subsys, "attr_allow_any_host"));
      if (any == "1") return InvalidArgument("can't add hosts when allow_any_host is set");
      return Status::Ok();
    }
    case Kind::kNvmetPortSubsystems: {
      if (!links.empty()) return Status::Ok();  // the port is already enabled
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
      if (!links.empty()) return AlreadyExists("the LUN already has a device link");
      ASSIGN_OR_RETURN(std::string enabled, Attr(target, "enable"));
      if (enabled != "1") return FailedPrecondition("device is not configured (enable it first)");
      return Status::Ok();
    }
    case Kind::kMappedLun: {
      if (!links.empty()) return AlreadyExists("the mapped LUN already has a link");
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
  return posix_.ReadLink(path);
}

StatusOr<std::vector<DirEntry>> ConfigfsSim::ListDir(const std::string& path) {
  return posix_.ListDir(path);
}

bool ConfigfsSim::Exists(const std::string& path) { return posix_.Exists(path); }
bool ConfigfsSim::IsDir(const std::string& path) { return posix_.IsDir(path); }

Status ConfigfsSim::CreateSparseFile(const std::string& path, int64_t size_bytes) {
  if (Relative(path).inside) return Denied("create " + path + ": configfs cannot create files");
  return posix_.CreateSparseFile(path, size_bytes);
}

Status ConfigfsSim::ResizeFile(const std::string& path, int64_t size_bytes) {
  if (Relative(path).inside) return Denied("truncate " + path + ": configfs attributes");
  return posix_.ResizeFile(path, size_bytes);
}

StatusOr<int64_t> ConfigfsSim::FileSize(const std::string& path) { return posix_.FileSize(path); }

StatusOr<FsCapacity> ConfigfsSim::StatVfs(const std::string& path) { return posix_.StatVfs(path); }

Status ConfigfsSim::RemoveTree(const std::string& path) {
  // configfs has no rm -r: attributes cannot be unlinked, groups go by rmdir.
  if (Relative(path).inside) return Denied("rm -r " + path + ": use rmdir on each group");
  return posix_.RemoveTree(path);
}

Status CreateConfigfsSkeleton(const std::string& root) {
  ConfigfsSim sim(root);
  RETURN_IF_ERROR(sim.LoadNvmet());
  return sim.LoadLio();
}

}  // namespace pillar::agent
