// The LIO layout: target_core and the iSCSI fabric (Linux 6.1).
#include <arpa/inet.h>

#include <set>

#include "agent/exporters/configfs_util.h"
#include "testing/configfs_layout.h"

namespace pillar::testing::configfs_layout {
namespace {

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
    if (!agent::configfs::IsIpv6(ip)) return false;
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

}  // namespace

void AddLioLayout(Layout& m) {
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
}

}  // namespace pillar::testing::configfs_layout
