#include "node/attach/iscsi.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/fake_exec.h"
#include "common/temp_dir.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;
using testing::FakeClock;
using testing::IscsiSysfsBuilder;
using testing::ReadText;
using testing::WriteText;

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
  IscsiAttacher Attacher() {
    return IscsiAttacher(exec_, fs_, clock_, tmp_.Sub("sys"), tmp_.Sub("nodes"));
  }
  // What `iscsiadm -m discovery` leaves in the node database: one record
  // per portal and TPG, one file per iface.
  std::string AddNodeRecord(const std::string& portal_dir, const std::string& text) {
    std::string dir = tmp_.Sub("nodes/" + std::string(kIqn) + "/" + portal_dir);
    std::filesystem::create_directories(dir);
    WriteText(dir + "/default", text);
    return dir + "/default";
  }

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

TEST_F(NodeIscsiTest, ChapIsWrittenToTheNodeRecordBetweenDiscoveryAndLoginNeverOnAnArgv) {
  const std::string record =
      "# BEGIN RECORD 2.1.8\n"
      "node.name = iqn.2026-01.com.bhyoo.pillar:tank.pvc-1\n"
      "node.session.auth.authmethod = None\n"
      "node.session.auth.chap_algs = MD5\n"
      "node.session.auth.password = old\n"
      "node.conn[0].address = 10.0.0.1\n"
      "# END RECORD\n";
  std::string ours;
  std::string other_portal;
  exec_.On({"iscsiadm", "-m", "discovery"}, [&](const Command&) -> StatusOr<ExecResult> {
    ours = AddNodeRecord("10.0.0.1,3260,1", record);
    other_portal = AddNodeRecord("10.0.0.2,3260,1", record);
    return ExecResult{0, std::string("10.0.0.1:3260,1 ") + kIqn + "\n", ""};
  });
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
            (std::vector<std::string>{"iscsiadm -m discovery -t sendtargets -p 10.0.0.1:3260",
                                      node + " --login"}));
  EXPECT_EQ(ReadText(ours),
            "# BEGIN RECORD 2.1.8\n"
            "node.name = iqn.2026-01.com.bhyoo.pillar:tank.pvc-1\n"
            "node.session.auth.chap_algs = MD5\n"
            "node.conn[0].address = 10.0.0.1\n"
            "# END RECORD\n"
            "node.session.auth.authmethod = CHAP\n"
            "node.session.auth.username = node-a\n"
            "node.session.auth.password = twelve-bytes-secret\n"
            "node.session.auth.username_in = target-1\n"
            "node.session.auth.password_in = mutual-secret-42\n");
  struct stat st {};
  ASSERT_EQ(stat(ours.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "root-only, as iscsiadm keeps it";
  EXPECT_EQ(ReadText(other_portal), record) << "another portal's record is left alone";
}

TEST_F(NodeIscsiTest, ConnectionTimingIsWrittenToTheNodeRecordBeforeLogin) {
  const std::string record =
      "# BEGIN RECORD 2.1.8\n"
      "node.name = iqn.2026-01.com.bhyoo.pillar:tank.pvc-1\n"
      "node.session.timeo.replacement_timeout = 120\n"
      "node.session.auth.authmethod = None\n"
      "node.conn[0].timeo.noop_out_interval = 5\n"
      "# END RECORD\n";
  std::string ours;
  std::string record_at_login;
  exec_.On({"iscsiadm", "-m", "discovery"}, [&](const Command&) -> StatusOr<ExecResult> {
    ours = AddNodeRecord("10.0.0.1,3260,1", record);
    return ExecResult{0, std::string("10.0.0.1:3260,1 ") + kIqn + "\n", ""};
  });
  exec_.On({"iscsiadm", "-m", "node"}, [&](const Command& c) -> StatusOr<ExecResult> {
    if (c.argv.back() == "--login") {
      record_at_login = ReadText(ours);
      sys_.AddSession(1, 2, kIqn, "10.0.0.1", 3260);
      sys_.AddLun(1, 0, "sdb");
    }
    return ExecResult{0, "", ""};
  });
  RemoteTarget t = Target();
  t.timing.iscsi_replacement_timeout = 600;
  t.timing.iscsi_noop_out_interval = 3;
  t.timing.iscsi_noop_out_timeout = 4;
  auto a = Attacher();
  auto dev = a.Attach(t);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  // The old values are replaced, the CHAP lines (no credentials) kept.
  EXPECT_EQ(record_at_login,
            "# BEGIN RECORD 2.1.8\n"
            "node.name = iqn.2026-01.com.bhyoo.pillar:tank.pvc-1\n"
            "node.session.auth.authmethod = None\n"
            "# END RECORD\n"
            "node.session.timeo.replacement_timeout = 600\n"
            "node.conn[0].timeo.noop_out_interval = 3\n"
            "node.conn[0].timeo.noop_out_timeout = 4\n");
}

TEST_F(NodeIscsiTest, NoNodeRecordAfterDiscoveryIsAClearErrorAndNoLogin) {
  exec_.OnOutput({"iscsiadm", "-m", "discovery"}, std::string("10.0.0.1:3260,1 ") + kIqn + "\n");
  RemoteTarget t = Target();
  t.credentials = {"node-a", "twelve-bytes-secret", "", ""};
  auto a = Attacher();
  auto dev = a.Attach(t);
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.status().message().find("node record"), std::string::npos)
      << dev.status().message();
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line.find("--login"), std::string::npos);
}

TEST_F(NodeIscsiTest, AFailedLoginNamesNoSecret) {
  exec_.On({"iscsiadm", "-m", "discovery"}, [&](const Command&) -> StatusOr<ExecResult> {
    AddNodeRecord("10.0.0.1,3260,1", "node.name = x\n");
    return ExecResult{0, "", ""};
  });
  exec_.On({"iscsiadm", "-m", "node"}, [&](const Command&) -> StatusOr<ExecResult> {
    return ExecResult{24, "", "iscsiadm: login failed with password twelve-bytes-secret"};
  });
  RemoteTarget t = Target();
  t.credentials = {"node-a", "twelve-bytes-secret", "", ""};
  auto a = Attacher();
  auto dev = a.Attach(t);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().message().find("twelve-bytes-secret"), std::string::npos)
      << dev.status().message();
  EXPECT_NE(dev.status().message().find("<secret>"), std::string::npos) << dev.status().message();
}

}  // namespace
}  // namespace pillar::node
