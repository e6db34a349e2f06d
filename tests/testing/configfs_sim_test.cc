#include "testing/configfs_sim.h"

#include <gtest/gtest.h>

#include <map>

#include "agent/exporters/configfs_test_util.h"
#include "agent/exporters/configfs_util.h"
#include "common/temp_dir.h"

namespace pillar::testing {
namespace {

namespace configfs = agent::configfs;

class ConfigfsSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(sim_.LoadNvmet().ok());
    ASSERT_TRUE(sim_.LoadLio().ok());
  }
  std::string P(const std::string& rel) { return JoinPath(tmp_.path(), rel); }
  std::string Read(const std::string& rel) { return sim_.ReadFile(P(rel)).value(); }

  TempDir tmp_;
  ConfigfsSim sim_{tmp_.path()};
};

TEST_F(ConfigfsSimTest, SkeletonIsWhatModuleLoadCreates) {
  auto tree = DumpTree(tmp_.path());
  for (const char* dir :
       {"nvmet/subsystems", "nvmet/ports", "nvmet/hosts", "target/core",
        "target/core/alua/lu_gps/default_lu_gp", "target/iscsi", "target/iscsi/discovery_auth"}) {
    EXPECT_EQ(tree[dir], "<dir>") << dir;
  }
  EXPECT_EQ(tree["nvmet/discovery_nqn"], "nqn.2014-08.org.nvmexpress.discovery");
  // Loading again changes nothing; a second skeleton helper call is a no-op too.
  ASSERT_TRUE(sim_.LoadNvmet().ok());
  ASSERT_TRUE(CreateConfigfsSkeleton(tmp_.path()).ok());
  EXPECT_EQ(DumpTree(tmp_.path()), tree);
}

TEST_F(ConfigfsSimTest, NvmetMkdirCreatesDefaultAttributesAndGroups) {
  ASSERT_TRUE(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1")).ok());
  auto tree = DumpTree(P("nvmet/subsystems/nqn.2014-08.org.example:s1"));
  EXPECT_EQ(tree["attr_allow_any_host"], "0");
  EXPECT_EQ(tree["attr_model"], "Linux");
  EXPECT_EQ(tree["attr_version"], "1.3");
  EXPECT_EQ(tree["attr_serial"].size(), 16u);
  EXPECT_EQ(tree["namespaces"], "<dir>");
  EXPECT_EQ(tree["allowed_hosts"], "<dir>");
  EXPECT_EQ(tree["passthru"], "<dir>");
  // Values read back with the kernel's newline.
  EXPECT_EQ(Read("nvmet/subsystems/nqn.2014-08.org.example:s1/attr_allow_any_host"), "0\n");

  ASSERT_TRUE(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1/namespaces/1")).ok());
  auto ns = DumpTree(P("nvmet/subsystems/nqn.2014-08.org.example:s1/namespaces/1"));
  EXPECT_EQ(ns["device_path"], "(null)");
  EXPECT_EQ(ns["enable"], "0");
  EXPECT_EQ(ns["buffered_io"], "0");
  EXPECT_EQ(ns["device_nguid"], "00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(ns["device_uuid"].size(), 36u);

  ASSERT_TRUE(sim_.MakeDir(P("nvmet/ports/1")).ok());
  auto port = DumpTree(P("nvmet/ports/1"));
  EXPECT_EQ(port["addr_trtype"], "");
  EXPECT_EQ(port["addr_treq"], "not specified");
  EXPECT_EQ(port["param_inline_data_size"], "-1");
  EXPECT_EQ(port["subsystems"], "<dir>");
  EXPECT_EQ(port["referrals"], "<dir>");
  EXPECT_EQ(port["ana_groups/1/ana_state"], "optimized");
}

TEST_F(ConfigfsSimTest, MkdirFollowsTheKernelsGroupRules) {
  // Not a group that makes children, default groups, bad names.
  EXPECT_EQ(sim_.MakeDir(P("nvmet/newthing")).code(), Code::kPermissionDenied);
  EXPECT_EQ(sim_.MakeDir(P("mydir")).code(), Code::kPermissionDenied);
  ASSERT_TRUE(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1")).ok());
  EXPECT_EQ(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1/x")).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1/namespaces/0")).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(sim_.MakeDir(P("nvmet/ports/abc")).code(), Code::kInvalidArgument);
  EXPECT_EQ(sim_.MakeDir(P("nvmet/ports/70000")).code(), Code::kInvalidArgument);
  EXPECT_EQ(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.nvmexpress.discovery")).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(sim_.MakeDir(P("target/core/iblock")).code(), Code::kInvalidArgument);
  EXPECT_EQ(sim_.MakeDir(P("target/core/nosuch_0")).code(), Code::kInvalidArgument);
  EXPECT_EQ(sim_.MakeDir(P("target/iscsi/iqn.2003-01.org.example:t/tpg1")).code(),
            Code::kNotFound);  // parent missing
  ASSERT_TRUE(sim_.MakeDir(P("target/iscsi/iqn.2003-01.org.example:t")).ok());
  EXPECT_EQ(sim_.MakeDir(P("target/iscsi/iqn.2003-01.org.example:t/tpg1")).code(),
            Code::kInvalidArgument);
  ASSERT_TRUE(sim_.MakeDir(P("target/iscsi/iqn.2003-01.org.example:t/tpgt_1")).ok());
  EXPECT_EQ(sim_.MakeDir(P("target/iscsi/iqn.2003-01.org.example:t/tpgt_1/np/10.0.0.1")).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(
      sim_.MakeDir(P("target/iscsi/iqn.2003-01.org.example:t/tpgt_1/np/[fd00::1]:3260")).ok());
  // An existing group is fine, as Fs::MakeDir promises.
  EXPECT_TRUE(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1")).ok());
}

TEST_F(ConfigfsSimTest, AttributesCannotBeCreatedOrWrittenWhenReadOnly) {
  ASSERT_TRUE(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1")).ok());
  std::string s = "nvmet/subsystems/nqn.2014-08.org.example:s1/";
  EXPECT_EQ(sim_.WriteFile(P(s + "attr_nonexistent"), "1").code(), Code::kPermissionDenied);
  EXPECT_FALSE(sim_.Exists(P(s + "attr_nonexistent")));
  EXPECT_EQ(sim_.WriteFileAtomic(P(s + "attr_model"), "x").code(), Code::kPermissionDenied);
  EXPECT_EQ(sim_.WriteFile(P("target/version"), "x").code(), Code::kPermissionDenied);
  EXPECT_EQ(sim_.WriteFile(P(s + "attr_allow_any_host"), "maybe").code(), Code::kInvalidArgument);
  EXPECT_TRUE(sim_.WriteFile(P(s + "attr_allow_any_host"), "1\n").ok());
  EXPECT_EQ(Read(s + "attr_allow_any_host"), "1\n");
  // Attributes and groups cannot be unlinked; a missing path is fine.
  EXPECT_EQ(sim_.Unlink(P(s + "attr_model")).code(), Code::kPermissionDenied);
  EXPECT_TRUE(sim_.Unlink(P(s + "allowed_hosts/none")).ok());
}

TEST_F(ConfigfsSimTest, RmdirRefusesWhileUserChildrenRemain) {
  std::string s = P("nvmet/subsystems/nqn.2014-08.org.example:s1");
  ASSERT_TRUE(sim_.MakeDir(s).ok());
  ASSERT_TRUE(sim_.MakeDir(P("nvmet/hosts/nqn.2014-08.org.example:h1")).ok());
  ASSERT_TRUE(sim_.Symlink(P("nvmet/hosts/nqn.2014-08.org.example:h1"),
                           s + "/allowed_hosts/nqn.2014-08.org.example:h1")
                  .ok());
  ASSERT_TRUE(sim_.MakeDir(s + "/namespaces/1").ok());
  EXPECT_EQ(sim_.RemoveDir(s).code(), Code::kFailedPrecondition);  // link and namespace
  EXPECT_EQ(sim_.RemoveDir(s + "/allowed_hosts").code(), Code::kPermissionDenied);  // default
  ASSERT_TRUE(sim_.Unlink(s + "/allowed_hosts/nqn.2014-08.org.example:h1").ok());
  EXPECT_EQ(sim_.RemoveDir(s).code(), Code::kFailedPrecondition);  // namespace
  ASSERT_TRUE(sim_.RemoveDir(s + "/namespaces/1").ok());
  ASSERT_TRUE(sim_.RemoveDir(s).ok());  // attributes and default groups go with it
  EXPECT_FALSE(sim_.Exists(s));
  EXPECT_TRUE(sim_.RemoveDir(s).ok());  // absent is fine
  EXPECT_EQ(sim_.RemoveDir(P("nvmet/subsystems")).code(), Code::kPermissionDenied);
  EXPECT_EQ(sim_.RemoveTree(P("nvmet")).code(), Code::kPermissionDenied);
}

TEST_F(ConfigfsSimTest, LinksOnlyWhereAndToWhatTheKernelAllows) {
  std::string s = P("nvmet/subsystems/nqn.2014-08.org.example:s1");
  std::string h = P("nvmet/hosts/nqn.2014-08.org.example:h1");
  ASSERT_TRUE(sim_.MakeDir(s).ok());
  ASSERT_TRUE(sim_.MakeDir(h).ok());
  // Links only in allow_link groups, to the right kind, inside configfs.
  EXPECT_EQ(sim_.Symlink(h, s + "/namespaces/h1").code(), Code::kPermissionDenied);
  EXPECT_EQ(sim_.Symlink(s, s + "/allowed_hosts/s1").code(), Code::kInvalidArgument);
  EXPECT_EQ(sim_.Symlink("/etc", s + "/allowed_hosts/etc").code(), Code::kPermissionDenied);
  EXPECT_EQ(sim_.Symlink(P("nvmet/hosts/nope"), s + "/allowed_hosts/nope").code(), Code::kNotFound);
  // nvmet refuses host links while allow_any_host is set.
  ASSERT_TRUE(sim_.WriteFile(s + "/attr_allow_any_host", "1").ok());
  EXPECT_EQ(sim_.Symlink(h, s + "/allowed_hosts/h1").code(), Code::kInvalidArgument);
  ASSERT_TRUE(sim_.WriteFile(s + "/attr_allow_any_host", "0").ok());
  ASSERT_TRUE(sim_.Symlink(h, s + "/allowed_hosts/h1").ok());
  EXPECT_EQ(sim_.Symlink(h, s + "/allowed_hosts/again").code(), Code::kAlreadyExists);
  // ... and allow_any_host while host links exist.
  EXPECT_EQ(sim_.WriteFile(s + "/attr_allow_any_host", "1").code(), Code::kInvalidArgument);
  // readlink shows the kernel's relative form, whatever form was given.
  EXPECT_EQ(sim_.ReadLink(s + "/allowed_hosts/h1").value(),
            "../../../../nvmet/hosts/nqn.2014-08.org.example:h1");
}

// The duplicate check keeps its links in memory, so it must never believe
// what the disk no longer has, nor miss a link made through it.
TEST_F(ConfigfsSimTest, TheDuplicateLinkCheckFollowsTheDisk) {
  std::string s = P("nvmet/subsystems/nqn.2014-08.org.example:s1");
  std::string s2 = P("nvmet/subsystems/nqn.2014-08.org.example:s2");
  std::string port = P("nvmet/ports/5");
  for (const auto& d : {s, s2, port}) ASSERT_TRUE(sim_.MakeDir(d).ok()) << d;
  auto configure = [&]() {
    for (const auto& [attr, v] : std::map<std::string, std::string>{{"addr_trtype", "tcp"},
                                                                    {"addr_adrfam", "ipv4"},
                                                                    {"addr_traddr", "127.0.0.1"},
                                                                    {"addr_trsvcid", "4420"}}) {
      ASSERT_TRUE(sim_.WriteFile(port + "/" + attr, v).ok()) << attr;
    }
  };
  configure();
  ASSERT_TRUE(sim_.Symlink(s, port + "/subsystems/s1").ok());
  EXPECT_EQ(sim_.Symlink(s, port + "/subsystems/other-name").code(), Code::kAlreadyExists);
  ASSERT_TRUE(sim_.Symlink(s2, port + "/subsystems/s2").ok());
  // Removed around the simulator (a test's edit, a wiped tree): linkable again.
  PosixFs posix;
  ASSERT_TRUE(posix.Unlink(port + "/subsystems/s1").ok());
  EXPECT_TRUE(sim_.Symlink(s, port + "/subsystems/s1").ok());
  // Removed through it: linkable again, under another name too.
  ASSERT_TRUE(sim_.Unlink(port + "/subsystems/s1").ok());
  EXPECT_TRUE(sim_.Symlink(s, port + "/subsystems/again").ok());
  EXPECT_EQ(sim_.Symlink(s, port + "/subsystems/s1").code(), Code::kAlreadyExists);
  // Every link gone around it: the port is disabled again, so an unusable
  // address is refused at the next first link, as the kernel would.
  ASSERT_TRUE(posix.Unlink(port + "/subsystems/again").ok());
  ASSERT_TRUE(posix.Unlink(port + "/subsystems/s2").ok());
  ASSERT_TRUE(posix.WriteFile(port + "/addr_traddr", "not-an-address\n").ok());
  EXPECT_EQ(sim_.Symlink(s, port + "/subsystems/s1").code(), Code::kInvalidArgument);
  // A group removed and made again starts with no links.
  ASSERT_TRUE(posix.WriteFile(port + "/addr_traddr", "127.0.0.1\n").ok());
  ASSERT_TRUE(sim_.RemoveDir(port).ok());
  ASSERT_TRUE(sim_.MakeDir(port).ok());
  configure();
  EXPECT_TRUE(sim_.Symlink(s, port + "/subsystems/s1").ok());
}

TEST_F(ConfigfsSimTest, NvmetNamespaceAndPortStateRules) {
  std::string s = P("nvmet/subsystems/nqn.2014-08.org.example:s1");
  ASSERT_TRUE(sim_.MakeDir(s).ok());
  ASSERT_TRUE(sim_.MakeDir(s + "/namespaces/1").ok());
  EXPECT_EQ(sim_.WriteFile(s + "/namespaces/1/enable", "1").code(), Code::kInvalidArgument);
  ASSERT_TRUE(sim_.WriteFile(s + "/namespaces/1/device_path", "/dev/loop0").ok());
  ASSERT_TRUE(sim_.WriteFile(s + "/namespaces/1/enable", "1").ok());
  EXPECT_EQ(sim_.WriteFile(s + "/namespaces/1/device_path", "/dev/loop1").code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(sim_.WriteFile(s + "/namespaces/1/device_uuid", "x").code(), Code::kFailedPrecondition);

  std::string port = P("nvmet/ports/5");
  ASSERT_TRUE(sim_.MakeDir(port).ok());
  EXPECT_EQ(sim_.WriteFile(port + "/addr_trtype", "carrier-pigeon").code(), Code::kInvalidArgument);
  // An unconfigured port cannot be enabled by the first link.
  EXPECT_EQ(sim_.Symlink(s, port + "/subsystems/s1").code(), Code::kInvalidArgument);
  ASSERT_TRUE(sim_.WriteFile(port + "/addr_trtype", "tcp").ok());
  ASSERT_TRUE(sim_.WriteFile(port + "/addr_adrfam", "ipv4").ok());
  ASSERT_TRUE(sim_.WriteFile(port + "/addr_traddr", "127.0.0.1").ok());
  ASSERT_TRUE(sim_.WriteFile(port + "/addr_trsvcid", "4420").ok());
  ASSERT_TRUE(sim_.Symlink(s, port + "/subsystems/s1").ok());
  // An enabled port's attributes are frozen (EACCES).
  EXPECT_EQ(sim_.WriteFile(port + "/addr_trsvcid", "4421").code(), Code::kPermissionDenied);
  EXPECT_EQ(sim_.RemoveDir(port).code(), Code::kFailedPrecondition);
  ASSERT_TRUE(sim_.Unlink(port + "/subsystems/s1").ok());
  EXPECT_TRUE(sim_.WriteFile(port + "/addr_trsvcid", "4421").ok());
  EXPECT_TRUE(sim_.RemoveDir(port).ok());
}

TEST_F(ConfigfsSimTest, LioDeviceLunAndAclRules) {
  std::string dev = P("target/core/iblock_0/disk");
  ASSERT_TRUE(sim_.MakeDir(P("target/core/iblock_0")).ok());
  ASSERT_TRUE(sim_.MakeDir(dev).ok());
  auto tree = DumpTree(dev);
  EXPECT_EQ(tree["enable"], "0");
  EXPECT_EQ(tree["attrib"], "<dir>");
  EXPECT_EQ(tree["pr"], "<dir>");
  EXPECT_EQ(tree["alua/default_tg_pt_gp"], "<dir>");
  EXPECT_EQ(tree["wwn/vendor_id"], "LIO-ORG");
  EXPECT_NE(tree["info"].find("DEACTIVATED"), std::string::npos);
  // iblock needs udev_path= through control before enable; enable only takes "1".
  EXPECT_EQ(sim_.WriteFile(dev + "/enable", "1").code(), Code::kInvalidArgument);
  EXPECT_EQ(sim_.WriteFile(dev + "/enable", "0").code(), Code::kInvalidArgument);
  ASSERT_TRUE(sim_.WriteFile(dev + "/control", "udev_path=/dev/loop3").ok());
  EXPECT_EQ(sim_.ReadFile(dev + "/control").value(), "");  // write-only
  std::string tpg = P("target/iscsi/iqn.2003-01.org.example:t/tpgt_1");
  ASSERT_TRUE(sim_.MakeDirs(tpg).ok());
  ASSERT_TRUE(sim_.MakeDir(tpg + "/lun/lun_0").ok());
  EXPECT_EQ(sim_.Symlink(dev, tpg + "/lun/lun_0/disk").code(), Code::kFailedPrecondition);
  ASSERT_TRUE(sim_.WriteFile(dev + "/enable", "1").ok());
  EXPECT_EQ(sim_.WriteFile(dev + "/enable", "1").code(), Code::kAlreadyExists);
  EXPECT_EQ(sim_.WriteFile(dev + "/control", "udev_path=/dev/loop4").code(), Code::kAlreadyExists);
  EXPECT_NE(sim_.ReadFile(dev + "/info").value().find("UDEV PATH: /dev/loop3"), std::string::npos);
  ASSERT_TRUE(sim_.Symlink(dev, tpg + "/lun/lun_0/disk").ok());
  EXPECT_EQ(sim_.ReadLink(tpg + "/lun/lun_0/disk").value(),
            "../../../../../../target/core/iblock_0/disk");
  EXPECT_EQ(sim_.Symlink(dev, tpg + "/lun/lun_0/again").code(), Code::kAlreadyExists);
  // Mapped LUNs link only to a LUN of their own TPG.
  ASSERT_TRUE(sim_.MakeDirs(tpg + "/acls/iqn.1994-05.com.redhat:a/lun_0").ok());
  std::string other = P("target/iscsi/iqn.2003-01.org.example:u/tpgt_1");
  ASSERT_TRUE(sim_.MakeDirs(other + "/lun/lun_0").ok());
  EXPECT_EQ(
      sim_.Symlink(other + "/lun/lun_0", tpg + "/acls/iqn.1994-05.com.redhat:a/lun_0/x").code(),
      Code::kInvalidArgument);
  ASSERT_TRUE(
      sim_.Symlink(tpg + "/lun/lun_0", tpg + "/acls/iqn.1994-05.com.redhat:a/lun_0/x").ok());
  EXPECT_EQ(sim_.RemoveDir(tpg + "/acls/iqn.1994-05.com.redhat:a").code(),
            Code::kFailedPrecondition);
  // Demo mode turns on cached dynamic ACLs, as iscsit_ta_generate_node_acls does.
  ASSERT_TRUE(sim_.WriteFile(tpg + "/attrib/generate_node_acls", "1").ok());
  EXPECT_EQ(sim_.ReadFile(tpg + "/attrib/cache_dynamic_acls").value(), "1\n");
  EXPECT_EQ(sim_.WriteFile(tpg + "/attrib/generate_node_acls", "2").code(), Code::kInvalidArgument);
}

TEST_F(ConfigfsSimTest, ReloadGivesTheModuleRootANewIdentity) {
  auto before = configfs::StatDirIdentity(P("nvmet"));
  ASSERT_TRUE(before.has_value());
  ASSERT_TRUE(sim_.MakeDir(P("nvmet/subsystems/nqn.2014-08.org.example:s1")).ok());
  ASSERT_TRUE(sim_.UnloadNvmet().ok());
  EXPECT_FALSE(sim_.Exists(P("nvmet")));
  EXPECT_FALSE(configfs::StatDirIdentity(P("nvmet")).has_value());
  ASSERT_TRUE(sim_.LoadNvmet().ok());
  auto after = configfs::StatDirIdentity(P("nvmet"));
  ASSERT_TRUE(after.has_value());
  EXPECT_NE(*before, *after);
  EXPECT_FALSE(sim_.Exists(P("nvmet/subsystems/nqn.2014-08.org.example:s1")));
}

TEST_F(ConfigfsSimTest, PathsOutsideTheRootPassThrough) {
  pillar::testing::TempDir other;
  std::string f = JoinPath(other.path(), "state");
  ASSERT_TRUE(sim_.WriteFileAtomic(f, "x").ok());
  EXPECT_EQ(sim_.ReadFile(f).value(), "x");
  ASSERT_TRUE(sim_.MakeDir(JoinPath(other.path(), "d")).ok());
  EXPECT_TRUE(sim_.IsDir(JoinPath(other.path(), "d")));
}

}  // namespace
}  // namespace pillar::testing
