// The nvmet layout, per drivers/nvme/target/configfs.c (Linux 6.1).
#include "testing/configfs_layout.h"

namespace pillar::testing::configfs_layout {
namespace {

bool SubsysName(const std::string& s) {
  return AnyQualifiedName(s) && s != "nqn.2014-08.org.nvmexpress.discovery";
}
bool NsidName(const std::string& s) { return NumberIn(s, 1, 0xfffffffeUL); }
bool PortIdName(const std::string& s) { return NumberIn(s, 0, 65535); }
bool AnaGroupName(const std::string& s) { return NumberIn(s, 2, 128); }

}  // namespace

void AddNvmetLayout(Layout& m) {
  m[Kind::kNvmet] = {{{"discovery_nqn", "nqn.2014-08.org.nvmexpress.discovery"}},
                     {{"subsystems", Kind::kNvmetSubsystems},
                      {"ports", Kind::kNvmetPorts},
                      {"hosts", Kind::kNvmetHosts}}};
  m[Kind::kNvmetSubsystems] = {
      {}, {}, Kind::kNvmetSubsys, SubsysName, "an NQN of at most 223 bytes, not the discovery NQN"};
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
}

}  // namespace pillar::testing::configfs_layout
