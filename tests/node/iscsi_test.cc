#include "node/attach/iscsi.h"

#include <gtest/gtest.h>

#include "common/fake_exec.h"
#include "common/temp_dir.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;
using testing::FakeClock;
using testing::IscsiSysfsBuilder;

constexpr const char* kIqn = "iqn.2026-01.com.bhyoo.pillar:tank.pvc-1";

RemoteTarget Target() {
  RemoteTarget t;
  t.protocol = Protocol::kIscsi;
  t.target_id = kIqn;
  t.address = "10.0.0.1";
  t.port = 3260;
  t.lun = 0;
  return t;
}

class NodeIscsiTest : public ::testing::Test {
 protected:
  NodeIscsiTest() : sys_(tmp_.Sub("sys")) {
    std::filesystem::create_directories(tmp_.Sub("sys/class/iscsi_session"));
  }
  IscsiAttacher Attacher() { return IscsiAttacher(exec_, fs_, clock_, tmp_.Sub("sys")); }

  TempDir tmp_;
  PosixFs fs_;
  FakeExec exec_;
  FakeClock clock_;
  IscsiSysfsBuilder sys_;
};

TEST(NodeInitiatorName, ParsesTheOpenIscsiFile) {
  EXPECT_EQ(ParseInitiatorName("## DO NOT EDIT OR REMOVE THIS FILE!\n"
                               "## If you remove this file, the iSCSI daemon will not start.\n"
                               "InitiatorName=iqn.1993-08.org.debian:01:7c5b2d8e9f10\n"),
            "iqn.1993-08.org.debian:01:7c5b2d8e9f10");
  EXPECT_EQ(ParseInitiatorName("  InitiatorName = iqn.2004-10.com.ubuntu:01:abc  \r\n"),
            "iqn.2004-10.com.ubuntu:01:abc");
  EXPECT_EQ(ParseInitiatorName("#InitiatorName=iqn.x\n"), "");
  EXPECT_EQ(ParseInitiatorName("InitiatorAlias=node1\n"), "");
  EXPECT_EQ(ParseInitiatorName(""), "");
}

TEST_F(NodeIscsiTest, ReadsSessionsAndTheirLunDevices) {
  sys_.AddSession(1, 2, "iqn.2026-01.com.bhyoo.pillar:other", "10.0.0.1", 3260);
  sys_.AddLun(1, 0, "sdb");
  sys_.AddSession(3, 4, kIqn, "10.0.0.1", 3260);
  sys_.AddLun(3, 1, "sdd");
  sys_.AddLun(3, 0, "sdc");
  IscsiSysfs sysfs(fs_, tmp_.Sub("sys"));
  auto all = sysfs.Sessions();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].sid, 3);
  EXPECT_EQ(all[1].target, kIqn);
  EXPECT_EQ(all[1].state, "LOGGED_IN");
  EXPECT_EQ(all[1].address, "10.0.0.1");
  EXPECT_EQ(all[1].port, "3260");
  auto mine = sysfs.SessionsTo(kIqn, "10.0.0.1", 3260);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(sysfs.FindLunDevice(3, 0).value_or(""), "sdc");
  EXPECT_EQ(sysfs.FindLunDevice(3, 1).value_or(""), "sdd");
  EXPECT_FALSE(sysfs.FindLunDevice(3, 2).has_value());
  EXPECT_TRUE(sysfs.SessionsTo(kIqn, "10.0.0.2", 3260).empty());
}

TEST_F(NodeIscsiTest, DiscoversAndLogsInWithExactArgv) {
  exec_.OnOutput({"iscsiadm", "-m", "discovery"}, std::string("10.0.0.1:3260,1 ") + kIqn + "\n");
  exec_.On({"iscsiadm", "-m", "node"}, [&](const Command&) -> StatusOr<ExecResult> {
    sys_.AddSession(1, 2, kIqn, "10.0.0.1", 3260);
    sys_.AddLun(1, 0, "sdb");
    return ExecResult{0, "Login to [...] successful.\n", ""};
  });
  auto a = Attacher();
  auto dev = a.Attach(Target());
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/sdb");
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{
                "iscsiadm -m discovery -t sendtargets -p 10.0.0.1:3260",
                std::string("iscsiadm -m node -T ") + kIqn + " -p 10.0.0.1:3260 --login"}));
}

TEST_F(NodeIscsiTest, Ipv6PortalIsBracketed) {
  RemoteTarget t = Target();
  t.address = "fd00::1";
  EXPECT_EQ(IscsiAttacher::Portal(t), "[fd00::1]:3260");
}

TEST_F(NodeIscsiTest, LoggedInSessionWithoutLunIsRescanned) {
  sys_.AddSession(5, 7, kIqn, "10.0.0.1", 3260);
  exec_.On({"iscsiadm", "-m", "session"}, [&](const Command&) -> StatusOr<ExecResult> {
    sys_.AddLun(5, 0, "sdf");
    return ExecResult{0, "", ""};
  });
  auto a = Attacher();
  auto dev = a.Attach(Target());
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/sdf");
  EXPECT_EQ(exec_.CallLines(), (std::vector<std::string>{"iscsiadm -m session -r 5 --rescan"}));
}

TEST_F(NodeIscsiTest, LunThatNeverAppearsIsADeadlineError) {
  sys_.AddSession(5, 7, kIqn, "10.0.0.1", 3260);
  exec_.OnOutput({"iscsiadm", "-m", "session"}, "");
  auto a = Attacher();
  auto dev = a.Attach(Target());
  EXPECT_EQ(dev.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(dev.status().message().find("LUN 0 of " + std::string(kIqn)), std::string::npos);
}

TEST_F(NodeIscsiTest, LogoutThenForgetsTheNodeRecord) {
  sys_.AddSession(1, 2, kIqn, "10.0.0.1", 3260);
  exec_.OnOutput({"iscsiadm", "-m", "node"}, "");
  auto a = Attacher();
  ASSERT_TRUE(a.Detach(Target()).ok());
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{
                std::string("iscsiadm -m node -T ") + kIqn + " -p 10.0.0.1:3260 --logout",
                std::string("iscsiadm -m node -T ") + kIqn + " -p 10.0.0.1:3260 -o delete"}));
}

TEST_F(NodeIscsiTest, InvalidIqnRunsNothing) {
  RemoteTarget t = Target();
  t.target_id = "iqn.2026-01.com.x:$(reboot)";
  auto a = Attacher();
  EXPECT_EQ(a.Attach(t).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeIscsiTest, ChapIsSetOnTheNodeRecordBetweenDiscoveryAndLogin) {
  exec_.OnOutput({"iscsiadm", "-m", "discovery"}, std::string("10.0.0.1:3260,1 ") + kIqn + "\n");
  exec_.On({"iscsiadm", "-m", "node"}, [&](const Command& c) -> StatusOr<ExecResult> {
    if (c.argv.back() == "--login") {
      sys_.AddSession(1, 2, kIqn, "10.0.0.1", 3260);
      sys_.AddLun(1, 0, "sdb");
    }
    return ExecResult{0, "", ""};
  });
  RemoteTarget t = Target();
  t.credentials = {"node-a", "twelve-bytes-secret", "target-1", "mutual-secret-42"};
  auto a = Attacher();
  auto dev = a.Attach(t);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  std::string node = std::string("iscsiadm -m node -T ") + kIqn + " -p 10.0.0.1:3260";
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{
                "iscsiadm -m discovery -t sendtargets -p 10.0.0.1:3260",
                node + " -o update -n node.session.auth.authmethod -v CHAP",
                node + " -o update -n node.session.auth.username -v node-a",
                node + " -o update -n node.session.auth.password -v twelve-bytes-secret",
                node + " -o update -n node.session.auth.username_in -v target-1",
                node + " -o update -n node.session.auth.password_in -v mutual-secret-42",
                node + " --login"}));
}

TEST_F(NodeIscsiTest, AFailedChapUpdateNamesTheSettingNotTheSecret) {
  exec_.OnOutput({"iscsiadm", "-m", "discovery"}, std::string("10.0.0.1:3260,1 ") + kIqn + "\n");
  exec_.On({"iscsiadm", "-m", "node"}, [&](const Command& c) -> StatusOr<ExecResult> {
    return DeadlineExceeded("command '" + c.ToString() + "' timed out");
  });
  RemoteTarget t = Target();
  t.credentials = {"node-a", "twelve-bytes-secret", "", ""};
  auto a = Attacher();
  auto dev = a.Attach(t);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().message().find("twelve-bytes-secret"), std::string::npos)
      << dev.status().message();
}

}  // namespace
}  // namespace pillar::node
