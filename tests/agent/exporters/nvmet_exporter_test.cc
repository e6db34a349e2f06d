#include "agent/exporters/nvmet_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/exporters/configfs_test_util.h"
#include "common/temp_dir.h"
#include "testing/configfs_sim.h"

namespace pillar::agent {
namespace {

using pillar::testing::DumpTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kHostA =
    "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000a";
constexpr const char* kHostB =
    "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000b";
constexpr const char* kHostC =
    "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000000c";
constexpr const char* kVol = "tank/pvc-1";
constexpr const char* kNqn = "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1";

KernelExport Want(const std::string& id, std::set<std::string> hosts, bool acl = true,
                  const std::string& addr = "10.0.0.1", int port = 4420) {
  KernelExport w;
  w.agent_volume_id = id;
  w.target_id = TargetName(kDefaultNqnPrefix, id);
  w.backing = "/dev/zvol/" + id;
  w.params.bind_address = addr;
  w.params.port = port;
  w.params.acl_enabled = acl;
  w.allowed_hosts = std::move(hosts);
  return w;
}

class NvmetExporterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sim_.LoadNvmet().ok()); }

  std::string P(const std::string& rel) { return JoinPath(tmp_.path(), "nvmet/" + rel); }
  std::map<std::string, std::string> Tree() { return DumpTree(JoinPath(tmp_.path(), "nvmet")); }
  std::vector<std::string> Apply(const KernelExport& w) {
    std::vector<std::string> changes;
    Status s = ex_.Apply(w, &changes);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return changes;
  }
  std::string Sub(const std::string& rel) { return "subsystems/" + std::string(kNqn) + rel; }

  pillar::testing::TempDir tmp_;
  pillar::testing::ConfigfsSim sim_{tmp_.path()};
  pillar::testing::RecordingFs fs_{sim_};
  NvmetExporter ex_{fs_, tmp_.path()};
};

TEST_F(NvmetExporterTest, CreatesTheExactTreeInASafeOrder) {
  auto changes = Apply(Want(kVol, {kHostA}));
  std::string uuid = configfs::NameUuid(kNqn, "nvmet-uuid");
  std::string nguid = configfs::NameUuid(kNqn, "nvmet-nguid");
  EXPECT_THAT(
      changes,
      ElementsAre("create subsystem " + std::string(kNqn), "create host " + std::string(kHostA),
                  "allow host " + std::string(kHostA) + " on " + kNqn,
                  "create namespace 1 in " + std::string(kNqn),
                  "set namespace 1 of " + std::string(kNqn) + " device_path=/dev/zvol/tank/pvc-1",
                  "set namespace 1 of " + std::string(kNqn) + " device_uuid=" + uuid,
                  "set namespace 1 of " + std::string(kNqn) + " device_nguid=" + nguid,
                  "enable namespace 1 of " + std::string(kNqn),
                  "create port 8000 (tcp 10.0.0.1 port 4420)",
                  "link port 8000 -> " + std::string(kNqn)));
  auto t = Tree();
  EXPECT_EQ(t[Sub("/attr_allow_any_host")], "0");
  EXPECT_EQ(t[Sub("/allowed_hosts/") + kHostA],
            "-> ../../../../nvmet/hosts/" + std::string(kHostA));
  EXPECT_EQ(t["hosts/" + std::string(kHostA)], "<dir>");
  EXPECT_EQ(t[Sub("/namespaces/1/device_path")], "/dev/zvol/tank/pvc-1");
  EXPECT_EQ(t[Sub("/namespaces/1/enable")], "1");
  EXPECT_EQ(t[Sub("/namespaces/1/device_uuid")], uuid);
  EXPECT_EQ(t["ports/8000/addr_trtype"], "tcp");
  EXPECT_EQ(t["ports/8000/addr_adrfam"], "ipv4");
  EXPECT_EQ(t["ports/8000/addr_traddr"], "10.0.0.1");
  EXPECT_EQ(t["ports/8000/addr_trsvcid"], "4420");
  EXPECT_EQ(t["ports/8000/param_inline_data_size"], "-1");  // left to the transport
  EXPECT_EQ(t["ports/8000/subsystems/" + std::string(kNqn)],
            "-> ../../../../nvmet/subsystems/" + std::string(kNqn));
  // The port link is the very last mutation: nothing is reachable before the ACL is set.
  EXPECT_THAT(fs_.ops().back(), HasSubstr("symlink " + P("ports/8000/subsystems/")));

  auto got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value());
  const ActualExport& a = **got;
  EXPECT_EQ(a.target_id, kNqn);
  EXPECT_EQ(a.backing, "/dev/zvol/tank/pvc-1");
  EXPECT_EQ(a.params, Want(kVol, {}).params);
  EXPECT_EQ(a.allowed_hosts, std::set<std::string>{kHostA});
  EXPECT_TRUE(a.enabled);
  EXPECT_THAT(a.drift, IsEmpty());
}

TEST_F(NvmetExporterTest, SecondApplyChangesAndWritesNothing) {
  Apply(Want(kVol, {kHostA, kHostB}));
  auto before = Tree();
  fs_.Clear();
  EXPECT_THAT(Apply(Want(kVol, {kHostA, kHostB})), IsEmpty());
  EXPECT_EQ(fs_.mutations(), 0u) << ::testing::PrintToString(fs_.ops());
  EXPECT_EQ(Tree(), before);
  // Same for allow-any-host and an IPv6 port.
  Apply(Want(kVol, {}, /*acl=*/false, "fd00::1", 4421));
  fs_.Clear();
  EXPECT_THAT(Apply(Want(kVol, {}, false, "fd00:0::1", 4421)), IsEmpty());
  EXPECT_EQ(fs_.mutations(), 0u) << ::testing::PrintToString(fs_.ops());
  EXPECT_EQ(Tree()["ports/8001/addr_adrfam"], "ipv6");
  EXPECT_EQ(Tree()["ports/8001/addr_traddr"], "fd00::1");
}

// One volume's apply and read-back read the same, whether its port serves
// one subsystem or many: what they cost does not grow with the exports. (The
// hosts stay admitted elsewhere: a host's last admission going is the one
// change that reads every subsystem, before its entry is removed.)
TEST_F(NvmetExporterTest, OneVolumesWorkDoesNotGrowWithTheExportsBesideIt) {
  struct Cost {
    size_t reads, listed;
    bool operator==(const Cost&) const = default;
  };
  auto measure = [&](const KernelExport& w) {
    fs_.Clear();
    Apply(w);
    auto got = ex_.Get(w.agent_volume_id);
    EXPECT_TRUE(got.ok() && got->has_value());
    return Cost{fs_.reads(), fs_.listed()};
  };
  auto costs = [&]() {
    Apply(Want(kVol, {kHostA}));
    Cost noop = measure(Want(kVol, {kHostA}));
    Cost acl = measure(Want(kVol, {kHostB}));  // narrow and widen: a real change
    Cost back = measure(Want(kVol, {kHostA}));
    return std::vector<Cost>{noop, acl, back};
  };
  Apply(Want("tank/pvc-2", {kHostA, kHostB}));
  auto alone = costs();
  for (int i = 3; i <= 40; ++i) Apply(Want("tank/pvc-" + std::to_string(i), {kHostA, kHostB}));
  ASSERT_EQ(Tree().count("ports/8001/addr_trtype"), 0u) << "all 40 share port 8000";
  auto among_many = costs();
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(among_many[i].reads, alone[i].reads) << "call " << i;
    EXPECT_EQ(among_many[i].listed, alone[i].listed) << "call " << i;
  }
}

TEST_F(NvmetExporterTest, AHostEntryGoesWithItsLastAdmissionAndNoSooner) {
  Apply(Want(kVol, {kHostA, kHostB}));
  Apply(Want("tank/pvc-2", {kHostB}));
  // A leaves pvc-1, its only subsystem: its entry (and any key) goes.
  auto changes = Apply(Want(kVol, {kHostB}));
  EXPECT_THAT(changes, ::testing::Contains("remove host entry " + std::string(kHostA) +
                                           " (no subsystem admits it)"));
  EXPECT_FALSE(sim_.IsDir(P(std::string("hosts/") + kHostA)));
  // B leaves pvc-1 but pvc-2 still admits it: kept.
  Apply(Want(kVol, {}));
  EXPECT_TRUE(sim_.IsDir(P(std::string("hosts/") + kHostB)));
  // pvc-2 removed: B's last admission goes, and its entry with it.
  ASSERT_TRUE(ex_.Remove("tank/pvc-2", nullptr).ok());
  EXPECT_FALSE(sim_.IsDir(P(std::string("hosts/") + kHostB)));
  // 100 identity changes of one node leave one entry, not 100.
  for (int i = 0; i < 100; ++i) {
    char host[96];
    std::snprintf(host, sizeof(host),
                  "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-%012d", i);
    Apply(Want(kVol, {host}));
  }
  auto hosts = sim_.ListDir(P("hosts"));
  ASSERT_TRUE(hosts.ok());
  EXPECT_EQ(hosts->size(), 1u);
}

TEST_F(NvmetExporterTest, RepairsOutOfBandDrift) {
  Apply(Want(kVol, {kHostA, kHostB}));
  // A host link deleted behind our back comes back, and only it.
  ASSERT_TRUE(sim_.Unlink(P(Sub("/allowed_hosts/") + kHostB)).ok());
  EXPECT_THAT(Apply(Want(kVol, {kHostA, kHostB})),
              ElementsAre("allow host " + std::string(kHostB) + " on " + kNqn));
  // An extra host link added behind our back goes.
  ASSERT_TRUE(sim_.MakeDir(P(std::string("hosts/") + kHostC)).ok());
  ASSERT_TRUE(
      sim_.Symlink(P(std::string("hosts/") + kHostC), P(Sub("/allowed_hosts/intruder"))).ok());
  auto got = ex_.Get(kVol);
  EXPECT_EQ((*got)->allowed_hosts, (std::set<std::string>{kHostA, kHostB, kHostC}));
  EXPECT_THAT(
      Apply(Want(kVol, {kHostA, kHostB})),
      ElementsAre("remove host " + std::string(kHostC) + " from " + kNqn,
                  "remove host entry " + std::string(kHostC) + " (no subsystem admits it)"));
  EXPECT_FALSE(sim_.IsDir(P(std::string("hosts/") + kHostC)));
  // A disabled namespace is re-enabled.
  ASSERT_TRUE(sim_.WriteFile(P(Sub("/namespaces/1/enable")), "0").ok());
  EXPECT_FALSE((*ex_.Get(kVol))->enabled);
  EXPECT_THAT(Apply(Want(kVol, {kHostA, kHostB})),
              ElementsAre("enable namespace 1 of " + std::string(kNqn)));
  // An extra namespace is drift and is removed.
  ASSERT_TRUE(sim_.MakeDir(P(Sub("/namespaces/7"))).ok());
  EXPECT_THAT((*ex_.Get(kVol))->drift, ElementsAre("extra namespace 7"));
  EXPECT_THAT(
      Apply(Want(kVol, {kHostA, kHostB})),
      ElementsAre("remove namespace 7 from " + std::string(kNqn) + " (not part of the export)"));
  // A port link deleted out of band is re-created.
  ASSERT_TRUE(sim_.Unlink(P("ports/8000/subsystems/" + std::string(kNqn))).ok());
  EXPECT_THAT(Apply(Want(kVol, {kHostA, kHostB})),
              ElementsAre("link port 8000 -> " + std::string(kNqn)));
}

TEST_F(NvmetExporterTest, SpecChangeMovesToANewPortAndDropsTheOldOne) {
  Apply(Want(kVol, {kHostA}));
  EXPECT_THAT(
      Apply(Want(kVol, {kHostA}, true, "10.0.0.1", 4421)),
      ElementsAre("create port 8001 (tcp 10.0.0.1 port 4421)",
                  "link port 8001 -> " + std::string(kNqn),
                  "unlink port 8000 -> " + std::string(kNqn) + " (not the export's address)",
                  "remove port 8000 (no subsystems left)"));
  auto got = ex_.Get(kVol);
  EXPECT_EQ((*got)->params.port, 4421);
  EXPECT_FALSE(sim_.Exists(P("ports/8000")));
}

TEST_F(NvmetExporterTest, LinkedToSeveralPortsIsDriftAndIsRepaired) {
  Apply(Want(kVol, {kHostA}));
  // Someone links our subsystem to a hand-made port too.
  ASSERT_TRUE(sim_.MakeDir(P("ports/1")).ok());
  for (auto [attr, value] :
       std::vector<std::pair<std::string, std::string>>{{"addr_trtype", "tcp"},
                                                        {"addr_adrfam", "ipv4"},
                                                        {"addr_traddr", "0.0.0.0"},
                                                        {"addr_trsvcid", "4420"}}) {
    ASSERT_TRUE(sim_.WriteFile(P("ports/1/" + attr), value).ok());
  }
  ASSERT_TRUE(sim_.Symlink(P(Sub("")), P("ports/1/subsystems/" + std::string(kNqn))).ok());
  auto got = ex_.Get(kVol);
  EXPECT_EQ((*got)->params.bind_address, "0.0.0.0");  // the first port
  EXPECT_THAT((*got)->drift, ElementsAre("linked to several ports: 1, 8000"));
  EXPECT_THAT(Apply(Want(kVol, {kHostA})),
              ElementsAre("unlink port 1 -> " + std::string(kNqn) + " (not the export's address)"));
  EXPECT_TRUE(sim_.IsDir(P("ports/1")));  // not pillar's: kept even when empty
  EXPECT_THAT((*ex_.Get(kVol))->drift, IsEmpty());
}

TEST_F(NvmetExporterTest, AclTransitionsNeverWiden) {
  Apply(Want(kVol, {kHostA, kHostB}));
  auto gone = [](const char* host) {
    return "remove host entry " + std::string(host) + " (no subsystem admits it)";
  };
  // {A,B} -> {B,C}: A goes before C arrives (and A's entry with it: no
  // other subsystem admits A).
  EXPECT_THAT(Apply(Want(kVol, {kHostB, kHostC})),
              ElementsAre("remove host " + std::string(kHostA) + " from " + kNqn, gone(kHostA),
                          "create host " + std::string(kHostC),
                          "allow host " + std::string(kHostC) + " on " + kNqn));
  // ACL -> any host: links go first (nvmet requires it), then allow_any_host=1.
  EXPECT_THAT(Apply(Want(kVol, {kHostB}, /*acl=*/false)),
              ElementsAre("remove host " + std::string(kHostB) + " from " + kNqn, gone(kHostB),
                          "remove host " + std::string(kHostC) + " from " + kNqn, gone(kHostC),
                          "set attr_allow_any_host=1 on " + std::string(kNqn)));
  auto open = ex_.Get(kVol);
  EXPECT_FALSE((*open)->params.acl_enabled);
  EXPECT_THAT((*open)->allowed_hosts, IsEmpty());
  // Any host -> ACL: allow_any_host=0 first (admits nobody), then the hosts.
  EXPECT_THAT(Apply(Want(kVol, {kHostA})),
              ElementsAre("set attr_allow_any_host=0 on " + std::string(kNqn),
                          "create host " + std::string(kHostA),
                          "allow host " + std::string(kHostA) + " on " + kNqn));
  // ACL with an empty set admits nobody.
  EXPECT_THAT(Apply(Want(kVol, {})),
              ElementsAre("remove host " + std::string(kHostA) + " from " + kNqn, gone(kHostA)));
  EXPECT_EQ(Tree()[Sub("/attr_allow_any_host")], "0");
}

TEST_F(NvmetExporterTest, TwoVolumesShareAPortWithoutDisturbingEachOther) {
  const std::string vol2 = "tank/pvc-2";
  const std::string nqn2 = TargetName(kDefaultNqnPrefix, vol2);
  Apply(Want(kVol, {kHostA, kHostB}));
  EXPECT_THAT(Apply(Want(vol2, {kHostA, kHostB})),
              ::testing::Contains("link port 8000 -> " + nqn2));
  // Removing A from volume 1 leaves volume 2's links alone.
  Apply(Want(kVol, {kHostB}));
  auto t = Tree();
  EXPECT_EQ(t.count("subsystems/" + nqn2 + "/allowed_hosts/" + kHostA), 1u);
  EXPECT_EQ(t.count(Sub("/allowed_hosts/") + kHostA), 0u);
  // Removing volume 1 keeps the port for volume 2; removing volume 2 drops it.
  std::vector<std::string> changes;
  ASSERT_TRUE(ex_.Remove(kVol, &changes).ok());
  EXPECT_THAT(changes, ElementsAre("unlink port 8000 -> " + std::string(kNqn),
                                   "remove host " + std::string(kHostB) + " from " + kNqn,
                                   "disable namespace 1 of " + std::string(kNqn),
                                   "remove namespace 1 from " + std::string(kNqn),
                                   "remove subsystem " + std::string(kNqn)));
  EXPECT_TRUE(sim_.IsDir(P("ports/8000")));
  auto v2 = ex_.Get(vol2);
  ASSERT_TRUE(v2.ok() && v2->has_value());
  EXPECT_TRUE((*v2)->enabled);
  EXPECT_EQ((*v2)->allowed_hosts, (std::set<std::string>{kHostA, kHostB}));
  changes.clear();
  ASSERT_TRUE(ex_.Remove(vol2, &changes).ok());
  EXPECT_THAT(changes, ::testing::Contains("remove port 8000 (no subsystems left)"));
  EXPECT_FALSE(sim_.Exists(P("ports/8000")));
  // Removing again is success with no changes.
  changes.clear();
  ASSERT_TRUE(ex_.Remove(vol2, &changes).ok());
  EXPECT_THAT(changes, IsEmpty());
}

TEST_F(NvmetExporterTest, ForeignSubsystemsAndPortsAreLeftAlone) {
  const std::string foreign = "nqn.2014-08.org.example:foreign";
  ASSERT_TRUE(sim_.MakeDir(P("subsystems/" + foreign)).ok());
  ASSERT_TRUE(sim_.MakeDir(P("ports/1")).ok());
  for (auto [attr, value] :
       std::vector<std::pair<std::string, std::string>>{{"addr_trtype", "tcp"},
                                                        {"addr_adrfam", "ipv4"},
                                                        {"addr_traddr", "10.0.0.1"},
                                                        {"addr_trsvcid", "4420"}}) {
    ASSERT_TRUE(sim_.WriteFile(P("ports/1/" + attr), value).ok());
  }
  ASSERT_TRUE(sim_.Symlink(P("subsystems/" + foreign), P("ports/1/subsystems/" + foreign)).ok());
  // A foreign port at the export's address is reused rather than duplicated.
  EXPECT_THAT(Apply(Want(kVol, {kHostA})),
              ::testing::Contains("link port 1 -> " + std::string(kNqn)));
  auto listed = ex_.List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].agent_volume_id, kVol);
  auto before = Tree();
  std::vector<std::string> changes;
  ASSERT_TRUE(ex_.Remove(kVol, &changes).ok());
  auto after = Tree();
  EXPECT_TRUE(sim_.IsDir(P("subsystems/" + foreign)));
  EXPECT_EQ(after["ports/1/subsystems/" + foreign], before["ports/1/subsystems/" + foreign]);
  EXPECT_TRUE(sim_.IsDir(P("ports/1")));
  for (const auto& [path, value] : after) {
    EXPECT_EQ(path.find(kNqn), std::string::npos) << path;
  }
}

TEST_F(NvmetExporterTest, BackingChangeDisablesFirstAndKeepsTheNamespaceIdentity) {
  Apply(Want(kVol, {kHostA}));
  std::string uuid = Tree()[Sub("/namespaces/1/device_uuid")];
  KernelExport w = Want(kVol, {kHostA});
  w.backing = "/dev/loop9";
  EXPECT_THAT(Apply(w),
              ElementsAre("disable namespace 1 of " + std::string(kNqn) +
                              " to change its device from /dev/zvol/tank/pvc-1",
                          "set namespace 1 of " + std::string(kNqn) + " device_path=/dev/loop9",
                          "enable namespace 1 of " + std::string(kNqn)));
  EXPECT_EQ(Tree()[Sub("/namespaces/1/device_uuid")], uuid);
  // After a module reload the rebuilt namespace gets the same UUID back.
  std::string token = ex_.StateToken();
  ASSERT_TRUE(sim_.UnloadNvmet().ok());
  EXPECT_EQ(ex_.StateToken(), "");
  ASSERT_TRUE(sim_.LoadNvmet().ok());
  EXPECT_NE(ex_.StateToken(), token);
  EXPECT_NE(ex_.StateToken(), "");
  EXPECT_FALSE(ex_.Get(kVol)->has_value());
  Apply(w);
  EXPECT_EQ(Tree()[Sub("/namespaces/1/device_uuid")], uuid);
}

TEST_F(NvmetExporterTest, InlineDataSizeOnOwnAndSharedPorts) {
  KernelExport w = Want(kVol, {kHostA});
  w.params.in_capsule_data_size = 16384;
  Apply(w);
  EXPECT_EQ(Tree()["ports/8000/param_inline_data_size"], "16384");
  EXPECT_EQ((*ex_.Get(kVol))->params.in_capsule_data_size, 16384);
  // Another volume on the same address wanting another size cannot change a shared port.
  KernelExport w2 = Want("tank/pvc-2", {kHostA});
  w2.params.in_capsule_data_size = 8192;
  std::vector<std::string> changes;
  fs_.Clear();
  Status s = ex_.Apply(w2, &changes);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("shared port"));
  EXPECT_EQ(fs_.mutations(), 0u);  // refused before creating anything
  // Alone on its port, a volume gets the port re-created with the new size.
  w.params.in_capsule_data_size = 8192;
  std::vector<std::string> solo;
  ASSERT_TRUE(ex_.Remove("tank/pvc-2", nullptr).ok());
  ASSERT_TRUE(ex_.Apply(w, &solo).ok());
  EXPECT_EQ(Tree()["ports/8000/param_inline_data_size"], "8192");
}

TEST_F(NvmetExporterTest, RefusesBadInputBeforeTouchingAnything) {
  Apply(Want(kVol, {kHostA}));
  auto before = Tree();
  struct Case {
    const char* field;
    KernelExport want;
  };
  std::vector<Case> cases;
  auto add = [&](const char* field, auto mutate) {
    KernelExport w = Want(kVol, {kHostA});
    mutate(w);
    cases.push_back({field, w});
  };
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("nqn.2014-08.org.x:../y"); });
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("nqn.2014-08.org.x:a/b"); });
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("nqn.2014-08.org.x:a\nb"); });
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("../../ports"); });
  add("bind_address", [](KernelExport& w) { w.params.bind_address = "10.0.0.1\n"; });
  add("bind_address", [](KernelExport& w) { w.params.bind_address = "host.example"; });
  add("bind_address", [](KernelExport& w) { w.params.bind_address = "fe80::1%eth0"; });
  add("port", [](KernelExport& w) { w.params.port = 0; });
  add("port", [](KernelExport& w) { w.params.port = 70000; });
  add("in_capsule_data_size", [](KernelExport& w) { w.params.in_capsule_data_size = -1; });
  add("backing", [](KernelExport& w) { w.backing = "dev/sda"; });
  add("backing", [](KernelExport& w) { w.backing = "/dev/../etc/shadow"; });
  add("backing", [](KernelExport& w) { w.backing = "/dev/sda\n"; });
  add("agent_volume_id", [](KernelExport& w) { w.agent_volume_id = "tank/../x"; });
  add("agent_volume_id", [](KernelExport& w) { w.agent_volume_id = "tank/a\nb"; });
  add("target_id", [](KernelExport& w) { w.target_id = "nqn.2014-08.org.example:other"; });
  for (const auto& c : cases) {
    fs_.Clear();
    std::vector<std::string> changes;
    Status s = ex_.Apply(c.want, &changes);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << c.field << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c.field));
    EXPECT_EQ(fs_.mutations(), 0u) << c.field;
    EXPECT_THAT(changes, IsEmpty());
  }
  EXPECT_EQ(Tree(), before);
  EXPECT_EQ(ex_.Remove("../x", nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(ex_.Get("a/../../b").status().code(), Code::kInvalidArgument);
}

TEST_F(NvmetExporterTest, ModuleNotLoaded) {
  ASSERT_TRUE(sim_.UnloadNvmet().ok());
  EXPECT_EQ(ex_.StateToken(), "");
  std::vector<std::string> changes;
  EXPECT_EQ(ex_.Apply(Want(kVol, {kHostA}), &changes).code(), Code::kUnavailable);
  EXPECT_TRUE(ex_.List().ok() && ex_.List()->empty());
  EXPECT_TRUE(ex_.Remove(kVol, &changes).ok());
  EXPECT_THAT(changes, IsEmpty());
}

constexpr const char* kKey1 = "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2:";
constexpr const char* kKey2 = "DHHC-1:00:SlVga3aBjJeirbjDztnk7/oFEBsmMTxHUl1oc36JlJ9Udcmo:";
constexpr const char* kKey3 = "DHHC-1:00:b3qFkJumsbzH0t3o8/4JFB8qNUBLVmFsd4KNmKOuucQjDnYo:";

KernelExport WantChap(const std::string& id, std::set<std::string> hosts, const char* key,
                      const char* ctrl_key = "") {
  KernelExport w = Want(id, std::move(hosts));
  w.params.auth = kAuthChap;
  w.credentials.secret = key;
  w.credentials.mutual_secret = ctrl_key;
  return w;
}

// Nothing that leaves the exporter (change lines, status messages) holds a key.
void ExpectNoSecret(const std::vector<std::string>& lines) {
  for (const auto& line : lines) {
    for (const char* key : {kKey1, kKey2, kKey3}) {
      EXPECT_EQ(line.find(key), std::string::npos) << line;
      EXPECT_EQ(line.find(std::string(key).substr(10, 20)), std::string::npos) << line;
    }
  }
}

TEST_F(NvmetExporterTest, ChapSetsTheHostKeyBeforeTheHostIsAllowed) {
  auto changes = Apply(WantChap(kVol, {kHostA}, kKey1, kKey2));
  ExpectNoSecret(changes);
  auto t = Tree();
  EXPECT_EQ(t["hosts/" + std::string(kHostA) + "/dhchap_key"], kKey1);
  EXPECT_EQ(t["hosts/" + std::string(kHostA) + "/dhchap_ctrl_key"], kKey2);
  // The key is written before the allowed_hosts link, never after.
  const auto& ops = fs_.ops();
  auto at = [&](const std::string& needle) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].find(needle) != std::string::npos) return static_cast<long>(i);
    }
    return -1L;
  };
  long key = at("hosts/" + std::string(kHostA) + "/dhchap_key");
  long link = at("symlink " + P(Sub("/allowed_hosts/") + kHostA));
  ASSERT_GE(key, 0);
  ASSERT_GE(link, 0);
  EXPECT_LT(key, link);
  EXPECT_THAT(changes, ::testing::Contains("set DH-HMAC-CHAP key of host " + std::string(kHostA)));

  auto got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ((*got)->params.auth, kAuthChap);
  EXPECT_EQ((*got)->params.auth_digest, CredentialsDigest(kVol, {"", kKey1, "", kKey2}));
  fs_.Clear();
  EXPECT_THAT(Apply(WantChap(kVol, {kHostA}, kKey1, kKey2)), IsEmpty());
  EXPECT_EQ(fs_.mutations(), 0u);
}

TEST_F(NvmetExporterTest, ChapKeysAreReadableByRootOnlyBeforeTheyAreWritten) {
  Apply(WantChap(kVol, {kHostA}, kKey1, kKey2));
  const std::string host = "hosts/" + std::string(kHostA);
  for (const char* attr : {"/dhchap_key", "/dhchap_ctrl_key"}) {
    auto mode = sim_.Mode(P(host + attr));
    ASSERT_TRUE(mode.ok());
    EXPECT_EQ(*mode, 0600u) << attr;
  }
  const auto& ops = fs_.ops();
  auto at = [&](const std::string& needle) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].find(needle) != std::string::npos) return static_cast<long>(i);
    }
    return -1L;
  };
  long hidden = at("chmod " + P(host + "/dhchap_key") + " = 0600");
  ASSERT_GE(hidden, 0);
  EXPECT_LT(hidden, at("write " + P(host + "/dhchap_key") + " ="));
  // A re-created host (a module reload, a hand's mkdir) shows its key 0644
  // again: the next pass hides it, and names no key.
  ASSERT_TRUE(sim_.Chmod(P(host + "/dhchap_key"), 0644).ok());
  auto changes = Apply(WantChap(kVol, {kHostA}, kKey1, kKey2));
  ExpectNoSecret(changes);
  EXPECT_THAT(changes, ElementsAre("make " + P(host + "/dhchap_key") + " readable by root only"));
  EXPECT_EQ(ModeOf(sim_, P(host + "/dhchap_key")), 0600u);
}

TEST_F(NvmetExporterTest, ChapRepairsAChangedKeyAndReportsNoneWithoutOne) {
  Apply(WantChap(kVol, {kHostA, kHostB}, kKey1));
  ASSERT_TRUE(sim_.WriteFile(P("hosts/" + std::string(kHostB) + "/dhchap_key"), kKey3).ok());
  auto got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ((*got)->params.auth, kAuthChap);
  EXPECT_EQ((*got)->params.auth_digest, "");  // the hosts disagree
  auto changes = Apply(WantChap(kVol, {kHostA, kHostB}, kKey1));
  EXPECT_THAT(changes, ElementsAre("set DH-HMAC-CHAP key of host " + std::string(kHostB)));
  EXPECT_EQ(Tree()["hosts/" + std::string(kHostB) + "/dhchap_key"], kKey1);
  // A host whose key was cleared admits without authentication: auth none.
  ASSERT_TRUE(sim_.WriteFile(P("hosts/" + std::string(kHostB) + "/dhchap_key"), "").ok());
  got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ((*got)->params.auth, kAuthNone);
}

TEST_F(NvmetExporterTest, ChapRefusesToChangeAKeyAnotherVolumeRelies) {
  Apply(WantChap("tank/pvc-2", {kHostA}, kKey1));
  fs_.Clear();
  std::vector<std::string> changes;
  Status s = ex_.Apply(WantChap(kVol, {kHostA}, kKey2), &changes);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("holds another DH-HMAC-CHAP key"));
  ExpectNoSecret({s.message()});
  auto t = Tree();
  EXPECT_EQ(t["hosts/" + std::string(kHostA) + "/dhchap_key"], kKey1);
  EXPECT_EQ(t.count(Sub("/allowed_hosts/") + kHostA), 0u);
  // The same key is fine.
  Apply(WantChap(kVol, {kHostA}, kKey1));
  EXPECT_EQ(Tree().count(Sub("/allowed_hosts/") + kHostA), 1u);
}

// An Fs over the simulator with nvmet's auth attributes hidden: the Debian
// 12 kernel (CONFIG_NVME_TARGET_AUTH not set).
class NoAuthFs : public pillar::testing::RecordingFs {
 public:
  using RecordingFs::RecordingFs;
  bool Exists(const std::string& p) override {
    return p.find("/dhchap_") == std::string::npos && RecordingFs::Exists(p);
  }
};

TEST_F(NvmetExporterTest, ChapOnAKernelWithoutNvmetAuthAdmitsNobody) {
  NoAuthFs fs{sim_};
  NvmetExporter ex{fs, tmp_.path()};
  std::vector<std::string> changes;
  Status s = ex.Apply(WantChap(kVol, {kHostA}, kKey1), &changes);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("CONFIG_NVME_TARGET_AUTH"));
  EXPECT_EQ(Tree().count(Sub("/allowed_hosts/") + kHostA), 0u);
  auto got = ex.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_THAT((*got)->allowed_hosts, IsEmpty());
}

TEST_F(NvmetExporterTest, ChapRefusesBadCredentialsAndOpenAcls) {
  std::vector<KernelExport> bad;
  bad.push_back(WantChap(kVol, {kHostA}, "DHHC-1:00:bm90IGEga2V5:"));
  bad.push_back(WantChap(kVol, {kHostA}, kKey1, kKey1));
  bad.push_back(WantChap(kVol, {kHostA}, ""));
  KernelExport open = WantChap(kVol, {}, kKey1);
  open.params.acl_enabled = false;
  bad.push_back(open);
  KernelExport unknown = Want(kVol, {kHostA});
  unknown.params.auth = "krb5";
  bad.push_back(unknown);
  for (const auto& w : bad) {
    fs_.Clear();
    Status s = ex_.Apply(w, nullptr);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_EQ(fs_.mutations(), 0u);
    ExpectNoSecret({s.message()});
  }
}

}  // namespace
}  // namespace pillar::agent
