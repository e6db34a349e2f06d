#include "agent/exporters/lio_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/exporters/configfs_test_util.h"
#include "common/temp_dir.h"
#include "testing/configfs_sim.h"

namespace pillar::agent {
namespace {

using pillar::testing::DumpTree;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kInitA = "iqn.1994-05.com.redhat:node-a";
constexpr const char* kInitB = "iqn.1994-05.com.redhat:node-b";
constexpr const char* kInitC = "iqn.1994-05.com.redhat:node-c";
constexpr const char* kVol = "tank/pvc-1";
constexpr const char* kIqn = "iqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1";
constexpr const char* kBs = "pillar:tank:2fpvc-1";

KernelExport Want(const std::string& id, std::set<std::string> initiators, bool acl = true,
                  const std::string& addr = "10.0.0.1", int port = 3260) {
  KernelExport w;
  w.agent_volume_id = id;
  w.target_id = TargetName(kDefaultIqnPrefix, id);
  w.backing = "/dev/zvol/" + id;
  w.params.bind_address = addr;
  w.params.port = port;
  w.params.acl_enabled = acl;
  w.allowed_hosts = std::move(initiators);
  return w;
}

class LioExporterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sim_.LoadLio().ok()); }

  std::string P(const std::string& rel) { return JoinPath(tmp_.path(), "target/" + rel); }
  std::map<std::string, std::string> Tree() { return DumpTree(JoinPath(tmp_.path(), "target")); }
  std::string Tpg(const std::string& rel = "") {
    return "iscsi/" + std::string(kIqn) + "/tpgt_1" + rel;
  }
  std::vector<std::string> Apply(const KernelExport& w) {
    std::vector<std::string> changes;
    Status s = ex_.Apply(w, &changes);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return changes;
  }
  // Drops a node ACL the way an operator would by hand.
  void DropAcl(const std::string& initiator) {
    std::string acl = P(Tpg("/acls/" + initiator));
    ASSERT_TRUE(sim_.Unlink(acl + "/lun_0/lun_0").ok());
    ASSERT_TRUE(sim_.RemoveDir(acl + "/lun_0").ok());
    ASSERT_TRUE(sim_.RemoveDir(acl).ok());
  }

  pillar::testing::TempDir tmp_;
  pillar::testing::ConfigfsSim sim_{tmp_.path()};
  pillar::testing::RecordingFs fs_{sim_};
  LioExporter ex_{fs_, tmp_.path()};
};

TEST_F(LioExporterTest, CreatesTheExactTreeInASafeOrder) {
  auto changes = Apply(Want(kVol, {kInitA}));
  std::string iqn = kIqn;
  EXPECT_THAT(
      changes,
      ElementsAre("create hba iblock_0", "create backstore iblock_0/" + std::string(kBs),
                  "enable backstore iblock_0/" + std::string(kBs) + " on /dev/zvol/tank/pvc-1",
                  "create target " + iqn, "create tpgt_1 of " + iqn,
                  "set authentication=0 on " + iqn + "/tpgt_1", "create LUN 0 of " + iqn,
                  "link LUN 0 of " + iqn + " -> iblock_0/" + kBs,
                  "create node ACL " + std::string(kInitA) + " on " + iqn,
                  "allow initiator " + std::string(kInitA) + " on " + iqn + " (map LUN 0)",
                  "add portal 10.0.0.1:3260 to " + iqn, "set enable=1 on " + iqn + "/tpgt_1"));
  auto t = Tree();
  std::string bs = "core/iblock_0/" + std::string(kBs);
  EXPECT_EQ(t[bs + "/udev_path"], "/dev/zvol/tank/pvc-1");
  EXPECT_EQ(t[bs + "/enable"], "1");
  EXPECT_THAT(t[bs + "/info"], HasSubstr("UDEV PATH: /dev/zvol/tank/pvc-1"));
  EXPECT_EQ(t[bs + "/wwn/vpd_unit_serial"],
            "T10 VPD Unit Serial Number: " + configfs::NameUuid(kBs, "lio-unit-serial"));
  EXPECT_EQ(t[Tpg("/enable")], "1");
  EXPECT_EQ(t[Tpg("/attrib/authentication")], "0");
  EXPECT_EQ(t[Tpg("/attrib/generate_node_acls")], "0");
  EXPECT_EQ(t[Tpg("/lun/lun_0/") + kBs], "-> ../../../../../../target/" + bs);
  EXPECT_EQ(t[Tpg("/np/10.0.0.1:3260")], "<dir>");
  EXPECT_EQ(t[Tpg("/acls/") + kInitA + "/lun_0/lun_0"],
            "-> ../../../../../../../target/" + Tpg("/lun/lun_0"));
  EXPECT_EQ(t[Tpg("/acls/") + kInitA + "/lun_0/write_protect"], "0");
  // Logins open only at the very end.
  EXPECT_THAT(fs_.ops().back(), HasSubstr("tpgt_1/enable = 1"));

  auto got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  const ActualExport& a = **got;
  EXPECT_EQ(a.target_id, kIqn);
  EXPECT_EQ(a.backing, "/dev/zvol/tank/pvc-1");
  EXPECT_EQ(a.params, Want(kVol, {}).params);
  EXPECT_EQ(a.allowed_hosts, std::set<std::string>{kInitA});
  EXPECT_TRUE(a.enabled);
  EXPECT_THAT(a.drift, IsEmpty());
}

TEST_F(LioExporterTest, SecondApplyChangesAndWritesNothing) {
  Apply(Want(kVol, {kInitA, kInitB}));
  auto before = Tree();
  fs_.Clear();
  EXPECT_THAT(Apply(Want(kVol, {kInitA, kInitB})), IsEmpty());
  EXPECT_EQ(fs_.mutations(), 0u) << ::testing::PrintToString(fs_.ops());
  EXPECT_EQ(Tree(), before);
  Apply(Want(kVol, {}, /*acl=*/false, "fd00::1", 3261));
  fs_.Clear();
  EXPECT_THAT(Apply(Want(kVol, {}, false, "fd00:0::1", 3261)), IsEmpty());
  EXPECT_EQ(fs_.mutations(), 0u) << ::testing::PrintToString(fs_.ops());
  EXPECT_EQ(Tree()[Tpg("/np/[fd00::1]:3261")], "<dir>");
  EXPECT_EQ((*ex_.Get(kVol))->params.bind_address, "fd00::1");
}

TEST_F(LioExporterTest, RepairsOutOfBandDrift) {
  Apply(Want(kVol, {kInitA, kInitB}));
  // A node ACL deleted behind our back comes back, and only it.
  DropAcl(kInitB);
  EXPECT_THAT(
      Apply(Want(kVol, {kInitA, kInitB})),
      ElementsAre("create node ACL " + std::string(kInitB) + " on " + kIqn,
                  "allow initiator " + std::string(kInitB) + " on " + kIqn + " (map LUN 0)"));
  // An extra node ACL goes; one without its mapped LUN is not counted as allowed.
  ASSERT_TRUE(sim_.MakeDir(P(Tpg("/acls/") + kInitC)).ok());
  auto got = ex_.Get(kVol);
  EXPECT_EQ((*got)->allowed_hosts, (std::set<std::string>{kInitA, kInitB}));
  EXPECT_THAT((*got)->drift,
              ElementsAre("initiator " + std::string(kInitC) + " has no LUN 0 mapped"));
  EXPECT_THAT(Apply(Want(kVol, {kInitA, kInitB})),
              ElementsAre("remove initiator " + std::string(kInitC) + " from " + kIqn));
  // A mapped LUN link removed by hand is re-created.
  ASSERT_TRUE(sim_.Unlink(P(Tpg("/acls/") + kInitA + "/lun_0/lun_0")).ok());
  EXPECT_THAT(
      Apply(Want(kVol, {kInitA, kInitB})),
      ElementsAre("allow initiator " + std::string(kInitA) + " on " + kIqn + " (map LUN 0)"));
  // A read-only mapped LUN is made writable again.
  ASSERT_TRUE(sim_.WriteFile(P(Tpg("/acls/") + kInitA + "/lun_0/write_protect"), "1").ok());
  EXPECT_THAT((*ex_.Get(kVol))->drift, Contains("LUN 0 is read-only for " + std::string(kInitA)));
  EXPECT_THAT(
      Apply(Want(kVol, {kInitA, kInitB})),
      ElementsAre("set write_protect=0 on LUN 0 of " + std::string(kIqn) + " for " + kInitA));
  // A disabled TPG is re-enabled.
  ASSERT_TRUE(sim_.WriteFile(P(Tpg("/enable")), "0").ok());
  EXPECT_FALSE((*ex_.Get(kVol))->enabled);
  EXPECT_THAT(Apply(Want(kVol, {kInitA, kInitB})),
              ElementsAre("set enable=1 on " + std::string(kIqn) + "/tpgt_1"));
  // A changed port moves the portal: the new one first, then the old one goes.
  EXPECT_THAT(Apply(Want(kVol, {kInitA, kInitB}, true, "10.0.0.2", 3260)),
              ElementsAre("add portal 10.0.0.2:3260 to " + std::string(kIqn),
                          "remove portal 10.0.0.1:3260 from " + std::string(kIqn) +
                              " (not the export's address)"));
  // An extra portal and an extra LUN are drift and go.
  ASSERT_TRUE(sim_.MakeDir(P(Tpg("/np/0.0.0.0:3260"))).ok());
  ASSERT_TRUE(sim_.MakeDir(P(Tpg("/lun/lun_5"))).ok());
  EXPECT_THAT((*ex_.Get(kVol))->drift, Contains("several portals"));
  EXPECT_THAT((*ex_.Get(kVol))->drift, Contains("extra lun_5"));
  auto repaired = Apply(Want(kVol, {kInitA, kInitB}, true, "10.0.0.2", 3260));
  EXPECT_THAT(repaired,
              Contains("remove lun_5 from " + std::string(kIqn) + " (not part of the export)"));
  EXPECT_THAT(repaired, Contains("remove portal 0.0.0.0:3260 from " + std::string(kIqn) +
                                 " (not the export's address)"));
  EXPECT_THAT((*ex_.Get(kVol))->drift, IsEmpty());
}

TEST_F(LioExporterTest, AclTransitionsNeverWiden) {
  Apply(Want(kVol, {kInitA, kInitB}));
  // {A,B} -> {B,C}: A goes before C arrives.
  EXPECT_THAT(
      Apply(Want(kVol, {kInitB, kInitC})),
      ElementsAre("remove initiator " + std::string(kInitA) + " from " + kIqn,
                  "create node ACL " + std::string(kInitC) + " on " + kIqn,
                  "allow initiator " + std::string(kInitC) + " on " + kIqn + " (map LUN 0)"));
  // ACL -> any initiator: the ACLs go, then demo mode comes on, read-write.
  EXPECT_THAT(Apply(Want(kVol, {kInitB}, /*acl=*/false)),
              ElementsAre("remove initiator " + std::string(kInitB) + " from " + kIqn,
                          "remove initiator " + std::string(kInitC) + " from " + kIqn,
                          "set demo_mode_write_protect=0 on " + std::string(kIqn),
                          "set cache_dynamic_acls=1 on " + std::string(kIqn),
                          "set generate_node_acls=1 on " + std::string(kIqn)));
  auto open = ex_.Get(kVol);
  EXPECT_FALSE((*open)->params.acl_enabled);
  EXPECT_THAT((*open)->allowed_hosts, IsEmpty());
  EXPECT_THAT(DumpTree(P(Tpg("/acls"))), IsEmpty());
  // Any initiator -> ACL: demo mode off first (admits nobody), then the ACLs.
  EXPECT_THAT(
      Apply(Want(kVol, {kInitA})),
      ElementsAre("set generate_node_acls=0 on " + std::string(kIqn),
                  "create node ACL " + std::string(kInitA) + " on " + kIqn,
                  "allow initiator " + std::string(kInitA) + " on " + kIqn + " (map LUN 0)"));
  // ACL with an empty set admits nobody.
  EXPECT_THAT(Apply(Want(kVol, {})),
              ElementsAre("remove initiator " + std::string(kInitA) + " from " + kIqn));
  EXPECT_EQ(Tree()[Tpg("/attrib/generate_node_acls")], "0");
}

TEST_F(LioExporterTest, BackingChangeRebuildsTheBackstoreAndKeepsMappings) {
  Apply(Want(kVol, {kInitA}));
  KernelExport w = Want(kVol, {kInitA});
  w.backing = "/dev/loop9";
  std::string what = "backstore iblock_0/" + std::string(kBs);
  EXPECT_THAT(Apply(w), ElementsAre("unlink LUN 0 of " + std::string(kIqn) + " from " + what +
                                        " (device changes)",
                                    "remove " + what + " (device was /dev/zvol/tank/pvc-1)",
                                    "create " + what, "enable " + what + " on /dev/loop9",
                                    "link LUN 0 of " + std::string(kIqn) + " -> iblock_0/" + kBs));
  auto got = ex_.Get(kVol);
  EXPECT_EQ((*got)->backing, "/dev/loop9");
  EXPECT_EQ((*got)->allowed_hosts, std::set<std::string>{kInitA});
  EXPECT_TRUE((*got)->enabled);
}

TEST_F(LioExporterTest, TwoVolumesAndForeignTargetsDoNotDisturbEachOther) {
  const std::string vol2 = "tank/pvc-2";
  const std::string iqn2 = TargetName(kDefaultIqnPrefix, vol2);
  // A target and a backstore made by someone else.
  const std::string foreign = "iqn.2003-01.org.linux-iscsi.host:sn.1234";
  ASSERT_TRUE(sim_.MakeDirs(P("iscsi/" + foreign + "/tpgt_1/lun/lun_0")).ok());
  ASSERT_TRUE(sim_.MakeDirs(P("core/iblock_0/disk1")).ok());
  Apply(Want(kVol, {kInitA, kInitB}));
  Apply(Want(vol2, {kInitA, kInitB}));
  // Removing A from volume 1 leaves volume 2's ACLs alone.
  Apply(Want(kVol, {kInitB}));
  auto t = Tree();
  EXPECT_EQ(t["iscsi/" + iqn2 + "/tpgt_1/acls/" + kInitA], "<dir>");
  EXPECT_EQ(t.count(Tpg("/acls/") + kInitA), 0u);
  auto listed = ex_.List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  std::vector<std::string> changes;
  ASSERT_TRUE(ex_.Remove(kVol, &changes).ok());
  EXPECT_THAT(
      changes,
      ElementsAre("set enable=0 on " + std::string(kIqn) + "/tpgt_1",
                  "remove initiator " + std::string(kInitB) + " from " + kIqn + "/tpgt_1",
                  "remove lun_0 from " + std::string(kIqn) + "/tpgt_1",
                  "remove portal 10.0.0.1:3260 from " + std::string(kIqn) + "/tpgt_1",
                  "remove " + std::string(kIqn) + "/tpgt_1", "remove target " + std::string(kIqn),
                  "remove backstore iblock_0/" + std::string(kBs)));
  t = Tree();
  for (const auto& [path, value] : t) EXPECT_EQ(path.find(kBs), std::string::npos) << path;
  EXPECT_EQ(t["iscsi/" + foreign + "/tpgt_1/lun/lun_0"], "<dir>");
  EXPECT_EQ(t["core/iblock_0/disk1"], "<dir>");
  auto v2 = ex_.Get(vol2);
  ASSERT_TRUE(v2.ok() && v2->has_value());
  EXPECT_TRUE((*v2)->enabled);
  EXPECT_EQ((*v2)->allowed_hosts, (std::set<std::string>{kInitA, kInitB}));
  changes.clear();
  ASSERT_TRUE(ex_.Remove(kVol, &changes).ok());
  EXPECT_THAT(changes, IsEmpty());
}

TEST_F(LioExporterTest, RefusesBadInputBeforeTouchingAnything) {
  Apply(Want(kVol, {kInitA}));
  auto before = Tree();
  std::vector<std::pair<const char*, KernelExport>> cases;
  auto add = [&](const char* field, auto mutate) {
    KernelExport w = Want(kVol, {kInitA});
    mutate(w);
    cases.emplace_back(field, w);
  };
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("iqn.1994-05.com.Redhat:x"); });
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("iqn.1994-05.com.x:../y"); });
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("iqn.1994-05.com.x:a/b"); });
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("iqn.1994-05.com.x:a\nb"); });
  add("allowed_hosts", [](KernelExport& w) { w.allowed_hosts.insert("../../lun"); });
  add("bind_address", [](KernelExport& w) { w.params.bind_address = "10.0.0.1:3260"; });
  add("bind_address", [](KernelExport& w) { w.params.bind_address = ""; });
  add("port", [](KernelExport& w) { w.params.port = -1; });
  add("backing", [](KernelExport& w) { w.backing = "/dev/sda,readonly=1"; });
  add("backing", [](KernelExport& w) { w.backing = "/dev/./sda"; });
  add("agent_volume_id", [](KernelExport& w) { w.agent_volume_id = "/etc"; });
  add("target_id", [](KernelExport& w) { w.target_id = "iqn.2003-01.org.example:other"; });
  for (const auto& [field, want] : cases) {
    fs_.Clear();
    std::vector<std::string> changes;
    Status s = ex_.Apply(want, &changes);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << field << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(field));
    EXPECT_EQ(fs_.mutations(), 0u) << field;
    EXPECT_THAT(changes, IsEmpty());
  }
  EXPECT_EQ(Tree(), before);
}

TEST_F(LioExporterTest, StateTokenFollowsTheModules) {
  std::string before = ex_.StateToken();
  EXPECT_NE(before, "");
  EXPECT_EQ(ex_.StateToken(), before);
  Apply(Want(kVol, {kInitA}));
  EXPECT_EQ(ex_.StateToken(), before);
  ASSERT_TRUE(sim_.UnloadLio().ok());
  EXPECT_EQ(ex_.StateToken(), "");
  std::vector<std::string> changes;
  EXPECT_EQ(ex_.Apply(Want(kVol, {kInitA}), &changes).code(), Code::kUnavailable);
  EXPECT_TRUE(ex_.Remove(kVol, &changes).ok());
  ASSERT_TRUE(sim_.LoadLio().ok());
  EXPECT_NE(ex_.StateToken(), before);
  EXPECT_FALSE(ex_.Get(kVol)->has_value());
  Apply(Want(kVol, {kInitA}));
  EXPECT_TRUE((*ex_.Get(kVol))->enabled);
}

Credentials Chap() { return {"node-a", "twelve-bytes-secret", "", ""}; }
Credentials MutualChap() {
  return {"node-a", "twelve-bytes-secret", "target-1", "another-secret-42"};
}

TEST_F(LioExporterTest, ChapIsEnforcedBeforeAnInitiatorIsAddedAndKeepsSecretsOutOfChanges) {
  KernelExport w = Want(kVol, {kInitA});
  w.params.auth = kAuthChap;
  w.credentials = MutualChap();
  auto changes = Apply(w);
  for (const auto& line : changes) {
    EXPECT_EQ(line.find("twelve-bytes-secret"), std::string::npos) << line;
    EXPECT_EQ(line.find("another-secret-42"), std::string::npos) << line;
  }
  auto t = Tree();
  std::string acl = Tpg("/acls/") + kInitA;
  EXPECT_EQ(t[Tpg("/attrib/authentication")], "1");
  EXPECT_EQ(t[acl + "/auth/userid"], "node-a");
  EXPECT_EQ(t[acl + "/auth/password"], "twelve-bytes-secret");
  EXPECT_EQ(t[acl + "/auth/userid_mutual"], "target-1");
  EXPECT_EQ(t[acl + "/auth/password_mutual"], "another-secret-42");
  // authentication=1 before the ACL exists; the password before LUN 0 is mapped.
  const auto& ops = fs_.ops();
  auto at = [&](const std::string& needle) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].find(needle) != std::string::npos) return static_cast<long>(i);
    }
    return -1L;
  };
  // (A new TPG starts at the kernel's authentication=1, which is kept.)
  EXPECT_EQ(at("attrib/authentication = 0"), -1);
  long acl_made = at("mkdir " + P(acl));
  long password = at(acl + "/auth/password =");
  long mapped = at("symlink " + P(acl + "/lun_0/lun_0"));
  ASSERT_TRUE(acl_made >= 0 && password >= 0 && mapped >= 0);
  EXPECT_LT(acl_made, password);
  EXPECT_LT(password, mapped);
  // An existing export with auth none switches authentication on before it
  // admits anyone new.
  Apply(Want("tank/pvc-2", {}));
  fs_.Clear();
  KernelExport w2 = Want("tank/pvc-2", {kInitB});
  w2.params.auth = kAuthChap;
  w2.credentials = Chap();
  Apply(w2);
  std::string acl2 = "iscsi/" + TargetName(kDefaultIqnPrefix, "tank/pvc-2") + "/tpgt_1/acls/" +
                     std::string(kInitB);
  long auth_on = at("attrib/authentication = 1");
  ASSERT_GE(auth_on, 0);
  EXPECT_LT(auth_on, at("mkdir " + P(acl2)));

  auto got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ((*got)->params.auth, kAuthChap);
  EXPECT_EQ((*got)->params.auth_digest, CredentialsDigest(kVol, w.credentials));
  EXPECT_THAT((*got)->drift, IsEmpty());
  fs_.Clear();
  EXPECT_THAT(Apply(w), IsEmpty());
  EXPECT_EQ(fs_.mutations(), 0u);

  // Dropping mutual CHAP clears the pair the way LIO expects ("NULL").
  w.credentials = Chap();
  changes = Apply(w);
  EXPECT_THAT(changes, Contains("set CHAP password_mutual of initiator " + std::string(kInitA)));
  got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ((*got)->params.auth_digest, CredentialsDigest(kVol, Chap()));
}

TEST_F(LioExporterTest, ChapPasswordsAreReadableByRootOnly) {
  KernelExport w = Want(kVol, {kInitA});
  w.params.auth = kAuthChap;
  w.credentials = MutualChap();
  Apply(w);
  std::string auth = Tpg("/acls/") + kInitA + "/auth/";
  EXPECT_EQ(ModeOf(sim_, P(auth + "password")), 0600u);
  EXPECT_EQ(ModeOf(sim_, P(auth + "password_mutual")), 0600u);
  EXPECT_NE(ModeOf(sim_, P(auth + "userid")) & 0044, 0u) << "a user name is no secret";
  ASSERT_TRUE(sim_.Chmod(P(auth + "password"), 0644).ok());
  EXPECT_THAT(Apply(w), ElementsAre("make " + P(auth + "password") + " readable by root only"));
  EXPECT_EQ(ModeOf(sim_, P(auth + "password")), 0600u);
}

TEST_F(LioExporterTest, ChapRepairsAChangedPasswordAndNoneTurnsAuthenticationOff) {
  KernelExport w = Want(kVol, {kInitA, kInitB});
  w.params.auth = kAuthChap;
  w.credentials = Chap();
  Apply(w);
  ASSERT_TRUE(
      sim_.WriteFile(P(Tpg("/acls/") + kInitB + "/auth/password"), "changed-by-hand!").ok());
  auto got = ex_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ((*got)->params.auth_digest, "");
  EXPECT_THAT(Apply(w), ElementsAre("set CHAP password of initiator " + std::string(kInitB)));
  got = ex_.Get(kVol);
  EXPECT_EQ((*got)->params.auth_digest, CredentialsDigest(kVol, Chap()));
  Apply(Want(kVol, {kInitA, kInitB}));
  EXPECT_EQ(Tree()[Tpg("/attrib/authentication")], "0");
  got = ex_.Get(kVol);
  EXPECT_EQ((*got)->params.auth, kAuthNone);
}

TEST_F(LioExporterTest, ChapRefusesDemoModeAndBadCredentials) {
  std::vector<KernelExport> bad;
  KernelExport demo = Want(kVol, {}, /*acl=*/false);
  demo.params.auth = kAuthChap;
  demo.credentials = Chap();
  bad.push_back(demo);
  KernelExport short_pw = Want(kVol, {kInitA});
  short_pw.params.auth = kAuthChap;
  short_pw.credentials = {"node-a", "short", "", ""};
  bad.push_back(short_pw);
  KernelExport no_user = short_pw;
  no_user.credentials = {"", "twelve-bytes-secret", "", ""};
  bad.push_back(no_user);
  for (const auto& w : bad) {
    fs_.Clear();
    Status s = ex_.Apply(w, nullptr);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_EQ(s.message().find("twelve-bytes-secret"), std::string::npos);
    EXPECT_EQ(fs_.mutations(), 0u);
  }
}

}  // namespace
}  // namespace pillar::agent
