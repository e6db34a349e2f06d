#include "node/attach/nvme.h"

#include <gtest/gtest.h>

#include "common/fake_exec.h"
#include "common/temp_dir.h"
#include "node/attach/nvme_sysfs.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;
using testing::FakeClock;
using testing::NvmeSysfsBuilder;
using testing::WriteText;

constexpr const char* kNqn = "nqn.2026-01.com.bhyoo.pillar:tank.pvc-1";
constexpr const char* kOtherNqn = "nqn.2026-01.com.bhyoo.pillar:tank.pvc-2";
constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:5d1b5a2e-8a5b-4bd5-9c1e-0c7b1f1a2b3c";

// The value, or the status's text (so a failure shows in the comparison).
std::string OrText(const StatusOr<std::string>& s) { return s.ok() ? *s : s.status().ToString(); }

RemoteTarget Target(const std::string& nqn = kNqn) {
  RemoteTarget t;
  t.protocol = Protocol::kNvmeofTcp;
  t.target_id = nqn;
  t.address = "10.0.0.1";
  t.port = 4420;
  t.nsid = 1;
  return t;
}

class NodeNvmeTest : public ::testing::Test {
 protected:
  NodeNvmeTest() : sys_(tmp_.Sub("sys")) {
    WriteText(tmp_.Sub("hostnqn"), std::string(kHostNqn) + "\n");
    std::filesystem::create_directories(tmp_.Sub("sys/class/nvme-subsystem"));
    std::filesystem::create_directories(tmp_.Sub("sys/block"));
    std::filesystem::create_directories(tmp_.Sub("sys/module/nvme_tcp"));  // loaded
  }
  NvmeAttacher Attacher(AttachOptions o = {}) {
    return NvmeAttacher(exec_, fabrics_, fs_, clock_, tmp_.Sub("sys"), tmp_.Sub("hostnqn"), o);
  }

  TempDir tmp_;
  PosixFs fs_;
  FakeExec exec_;
  testing::ExecFabrics fabrics_{exec_};
  FakeClock clock_;
  NvmeSysfsBuilder sys_;
};

TEST_F(NodeNvmeTest, ParsesControllerAddressAttribute) {
  auto a = ParseNvmeAddress("traddr=10.0.0.1,trsvcid=4420,src_addr=10.0.0.2\n");
  EXPECT_EQ(a["traddr"], "10.0.0.1");
  EXPECT_EQ(a["trsvcid"], "4420");
  EXPECT_EQ(a["src_addr"], "10.0.0.2");
  auto v6 = ParseNvmeAddress("traddr=fd00::1,trsvcid=4420");
  EXPECT_EQ(v6["traddr"], "fd00::1");
  EXPECT_TRUE(ParseNvmeAddress("").empty());
  EXPECT_TRUE(ParseNvmeAddress(",,=x,").empty());
}

TEST_F(NodeNvmeTest, NamespaceDeviceNames) {
  EXPECT_TRUE(IsNvmeNamespaceDevice("nvme0n1"));
  EXPECT_TRUE(IsNvmeNamespaceDevice("nvme12n345"));
  EXPECT_FALSE(IsNvmeNamespaceDevice("nvme0c0n1"));  // hidden multipath path node
  EXPECT_FALSE(IsNvmeNamespaceDevice("nvme0"));
  EXPECT_FALSE(IsNvmeNamespaceDevice("nvme0n1p1"));
  EXPECT_FALSE(IsNvmeNamespaceDevice("nvme-subsys0"));
  EXPECT_FALSE(IsNvmeNamespaceDevice("sda"));
}

TEST_F(NodeNvmeTest, FindsNamespaceByNsidAndSubsystemNotByDeviceName) {
  // subsys0 (other volume) holds nvme0n1 with nsid 1; subsys1 holds our
  // namespace as nvme1n2 (instance 2) with nsid 1, and nsid 3 as nvme1n1.
  sys_.AddSubsystem(0, kOtherNqn);
  sys_.AddController(0, 0, kOtherNqn, "10.0.0.1", 4420);
  sys_.AddNamespace(0, 1, 0, 1);
  sys_.AddSubsystem(1, kNqn);
  sys_.AddController(1, 1, kNqn, "10.0.0.1", 4420);
  sys_.AddNamespace(1, 1, 1, 3);
  sys_.AddNamespace(1, 2, 1, 1);
  NvmeSysfs sysfs(fs_, tmp_.Sub("sys"));
  EXPECT_EQ(sysfs.FindNamespaceDevice(kNqn, 1).value_or(""), "nvme1n2");
  EXPECT_EQ(sysfs.FindNamespaceDevice(kNqn, 3).value_or(""), "nvme1n1");
  EXPECT_EQ(sysfs.FindNamespaceDevice(kOtherNqn, 1).value_or(""), "nvme0n1");
  EXPECT_FALSE(sysfs.FindNamespaceDevice(kNqn, 2).has_value());
  auto sub = sysfs.FindSubsystem(kNqn);
  ASSERT_TRUE(sub.has_value());
  EXPECT_EQ(sub->name, "nvme-subsys1");
  ASSERT_EQ(sub->controllers.size(), 1u);
  EXPECT_EQ(sub->controllers[0].name, "nvme1");
  EXPECT_EQ(sub->controllers[0].transport, "tcp");
  EXPECT_EQ(sub->controllers[0].traddr, "10.0.0.1");
  EXPECT_EQ(sub->controllers[0].trsvcid, "4420");
  EXPECT_EQ(sub->controllers[0].state, "live");
}

TEST_F(NodeNvmeTest, HiddenPathNodeIsNeverTheDevice) {
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
  sys_.AddNamespace(0, 1, 0, 1);
  sys_.RemoveNamespace(0, 1);  // only nvme0c0n1 remains in /sys/block
  ASSERT_TRUE(std::filesystem::exists(tmp_.Sub("sys/block/nvme0c0n1/nsid")));
  NvmeSysfs sysfs(fs_, tmp_.Sub("sys"));
  EXPECT_FALSE(sysfs.FindNamespaceDevice(kNqn, 1).has_value());
}

// Issue 22, item 2: the device is matched by the whole connection. The
// subsystem NQN this volume names is already connected, but to another
// storage node (a victim's volume, named by an impostor): its namespace is
// never this volume's device, no connect is tried, and Check says why.
TEST_F(NodeNvmeTest, ANamespaceOfTheSameNqnAtAnotherAddressIsNeverTheDevice) {
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.9", 4420);  // the victim's connection
  sys_.AddNamespace(0, 1, 0, 1);
  bool connected = false;
  exec_.On({"nvme-fabrics"}, [&](const Command&) -> StatusOr<ExecResult> {
    connected = true;
    return ExecResult{0, "", ""};
  });
  NvmeAttacher a = Attacher();
  auto dev = a.Attach(Target());
  EXPECT_EQ(dev.status().code(), Code::kFailedPrecondition) << dev.status().ToString();
  EXPECT_NE(dev.status().message().find("10.0.0.9:4420"), std::string::npos)
      << dev.status().message();
  EXPECT_FALSE(connected);
  DeviceHealth h = a.Check(Target());
  EXPECT_EQ(h.device, "");
  EXPECT_NE(h.problem.find("not this volume's 10.0.0.1:4420"), std::string::npos) << h.problem;

  // The same address but another port is another connection too.
  RemoteTarget other_port = Target();
  other_port.address = "10.0.0.9";
  other_port.port = 4421;
  EXPECT_EQ(a.Attach(other_port).status().code(), Code::kFailedPrecondition);
  // Its own connection finds it.
  RemoteTarget own = Target();
  own.address = "10.0.0.9";
  auto own_device = a.Attach(own);
  ASSERT_TRUE(own_device.ok()) << own_device.status().ToString();
  EXPECT_EQ(*own_device, "/dev/nvme0n1");
}

TEST_F(NodeNvmeTest, ConnectOptionsAreExactAndCarryNoStrayComma) {
  RemoteTarget t = Target();
  const std::string base = std::string("transport=tcp,traddr=10.0.0.1,trsvcid=4420,nqn=") + kNqn +
                           ",hostnqn=" + kHostNqn;
  EXPECT_EQ(OrText(NvmeAttacher::ConnectOptions(t, kHostNqn, "")), base);
  const std::string host_id = "5d1b5a2e-8a5b-4bd5-9c1e-0c7b1f1a2b3c";
  EXPECT_EQ(OrText(NvmeAttacher::ConnectOptions(t, kHostNqn, host_id)),
            base + ",hostid=" + host_id);
  // The volume context's connection timing reaches the kernel by its
  // option names.
  t.timing.nvme_ctrl_loss_tmo = 60;
  t.timing.nvme_reconnect_delay = 2;
  EXPECT_EQ(OrText(NvmeAttacher::ConnectOptions(t, kHostNqn, "")),
            base + ",reconnect_delay=2,ctrl_loss_tmo=60");
  t.timing.nvme_keep_alive_tmo = 5;
  EXPECT_EQ(OrText(NvmeAttacher::ConnectOptions(t, kHostNqn, "")),
            base + ",reconnect_delay=2,ctrl_loss_tmo=60,keep_alive_tmo=5");
  t.timing.nvme_keep_alive_tmo.reset();
  t.credentials.secret = "DHHC-1:00:a:";
  t.credentials.mutual_secret = "DHHC-1:00:b:";
  EXPECT_EQ(OrText(NvmeAttacher::ConnectOptions(t, kHostNqn, "")),
            base +
                ",reconnect_delay=2,ctrl_loss_tmo=60,dhchap_secret=DHHC-1:00:a:,"
                "dhchap_ctrl_secret=DHHC-1:00:b:");
  // A value that would add an option of its own is refused, naming the
  // field and never the value (it may be a key).
  t.credentials.secret = "DHHC-1:00:a:,traddr=10.6.6.6";
  auto bad = NvmeAttacher::ConnectOptions(t, kHostNqn, "");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("secrets.dhchapKey"), std::string::npos);
  EXPECT_EQ(bad.status().message().find("10.6.6.6"), std::string::npos);
  t.credentials.secret = "DHHC-1:00:a:";
  t.credentials.mutual_secret = "DHHC-1:00:b:\nx";
  EXPECT_EQ(NvmeAttacher::ConnectOptions(t, kHostNqn, "").status().code(), Code::kInvalidArgument);
}

TEST_F(NodeNvmeTest, TheKeyGoesToTheKernelNeverOnAnArgvNorIntoAnError) {
  const std::string key = "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2:";
  WriteText(tmp_.Sub("hostid"), "5d1b5a2e-8a5b-4bd5-9c1e-0c7b1f1a2b3c\n");
  // The kernel refuses the key; its errno text comes back without the key.
  exec_.OnOutput({"nvme-fabrics"}, "", 1, "Key was rejected by service " + key);
  RemoteTarget t = Target();
  t.credentials.secret = key;
  auto a = Attacher();
  auto dev = a.Attach(t);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().message().find(key), std::string::npos) << dev.status().message();
  ASSERT_FALSE(exec_.calls().empty());
  for (const auto& argv : exec_.calls()) {
    ASSERT_EQ(argv[0], "nvme-fabrics") << "only the connect device was used";
    EXPECT_NE(argv[1].find(",hostid=5d1b5a2e-8a5b-4bd5-9c1e-0c7b1f1a2b3c"), std::string::npos);
  }
  // A malformed host ID file is refused before anything is written.
  exec_.ClearCalls();
  WriteText(tmp_.Sub("hostid"), "not-a-uuid\n");
  EXPECT_EQ(a.Attach(t).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeNvmeTest, ConnectsThenFindsTheDevice) {
  exec_.On({"nvme-fabrics"}, [&](const Command&) -> StatusOr<ExecResult> {
    sys_.AddSubsystem(0, kNqn);
    sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
    sys_.AddNamespace(0, 1, 0, 1);
    return ExecResult{0, "", ""};
  });
  auto a = Attacher();
  auto dev = a.Attach(Target());
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/nvme0n1");
  ASSERT_EQ(exec_.calls().size(), 1u);
  EXPECT_EQ(exec_.calls()[0][0], "nvme-fabrics");
}

TEST_F(NodeNvmeTest, AlreadyConnectedIsDetectedThroughSysfs) {
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
  sys_.AddNamespace(0, 1, 0, 1);
  auto a = Attacher();
  auto dev = a.Attach(Target());
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/nvme0n1");
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeNvmeTest, ReconnectingControllerIsNotConnectedAgain) {
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420, "connecting");
  sys_.AddNamespace(0, 1, 0, 1);
  auto a = Attacher();
  ASSERT_TRUE(a.Attach(Target()).ok());
  EXPECT_TRUE(exec_.calls().empty());
  EXPECT_FALSE(a.Check(Target()).connected);
  EXPECT_NE(a.Check(Target()).problem.find("reconnecting"), std::string::npos);
}

TEST_F(NodeNvmeTest, DeletingControllerMeansConnect) {
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 1, kNqn, "10.0.0.1", 4420, "deleting");
  sys_.AddNamespace(0, 1, 0, 1);
  exec_.OnOutput({"nvme-fabrics"}, "");
  auto a = Attacher();
  ASSERT_TRUE(a.Attach(Target()).ok());
  ASSERT_EQ(exec_.calls().size(), 1u);
  EXPECT_EQ(exec_.calls()[0][0], "nvme-fabrics");
}

TEST_F(NodeNvmeTest, MissingHostNqnFailsBeforeConnecting) {
  std::filesystem::remove(tmp_.Sub("hostnqn"));
  auto a = Attacher();
  auto dev = a.Attach(Target());
  EXPECT_EQ(dev.status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeNvmeTest, FailedConnectIsAClearError) {
  exec_.OnOutput({"nvme-fabrics"}, "", 1,
                 "could not add new controller: failed to write to nvme-fabrics device\n");
  auto a = Attacher();
  auto dev = a.Attach(Target());
  EXPECT_EQ(dev.status().code(), Code::kUnavailable);
  EXPECT_NE(dev.status().message().find("failed to write to nvme-fabrics"), std::string::npos);
}

// nvme-cli loads no module: without nvme-tcp (and so nvme-fabrics) the
// connect could only fail to open /dev/nvme-fabrics, so the attacher loads it
// first, once: a second connect finds it in sysfs.
TEST_F(NodeNvmeTest, LoadsTheTcpTransportBeforeConnectingWhenSysfsLacksIt) {
  std::filesystem::remove(tmp_.Sub("sys/module/nvme_tcp"));
  exec_.On({"modprobe"}, [&](const Command&) -> StatusOr<ExecResult> {
    std::filesystem::create_directories(tmp_.Sub("sys/module/nvme_tcp"));
    return ExecResult{0, "", ""};
  });
  exec_.On({"nvme-fabrics"}, [&](const Command& c) -> StatusOr<ExecResult> {
    const bool second = c.argv[1].find(std::string(",nqn=") + kOtherNqn + ",") != std::string::npos;
    const std::string nqn = second ? kOtherNqn : kNqn;
    sys_.AddSubsystem(second ? 1 : 0, nqn);
    sys_.AddController(second ? 1 : 0, second ? 1 : 0, nqn, "10.0.0.1", 4420);
    sys_.AddNamespace(second ? 1 : 0, 1, second ? 1 : 0, 1);
    return ExecResult{0, "", ""};
  });
  auto a = Attacher();
  ASSERT_TRUE(a.Attach(Target()).ok());
  ASSERT_TRUE(a.Attach(Target(kOtherNqn)).ok());
  auto lines = exec_.CallLines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "modprobe nvme-tcp");
  EXPECT_EQ(exec_.calls()[1][0], "nvme-fabrics");
  EXPECT_EQ(exec_.calls()[2][0], "nvme-fabrics");
}

TEST_F(NodeNvmeTest, AFailedModprobeLeavesTheConnectsErrorToSpeak) {
  std::filesystem::remove(tmp_.Sub("sys/module/nvme_tcp"));
  exec_.OnOutput({"modprobe"}, "", 1, "modprobe: FATAL: Module nvme-tcp not found\n");
  exec_.OnOutput({"nvme-fabrics"}, "", 1, "No such file or directory");
  auto a = Attacher();
  auto dev = a.Attach(Target());
  EXPECT_EQ(dev.status().code(), Code::kUnavailable);
  EXPECT_NE(dev.status().message().find("/dev/nvme-fabrics"), std::string::npos);
  EXPECT_EQ(exec_.calls().size(), 2u);
}

// Seed 003: the subsystem is connected, the namespace's device never came.
TEST_F(NodeNvmeTest, MissingDeviceOnConnectedSubsystemIsRescannedOnEachController) {
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
  sys_.AddController(0, 1, kNqn, "10.0.0.1", 4420);  // a second path to the same portal
  int rescans = 0;
  exec_.On({"nvme", "ns-rescan"}, [&](const Command&) -> StatusOr<ExecResult> {
    if (++rescans == 2) sys_.AddNamespace(0, 4, 0, 1);  // appears after the last rescan
    return ExecResult{0, "", ""};
  });
  auto a = Attacher();
  auto dev = a.Attach(Target());
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/nvme0n4");
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{"nvme ns-rescan /dev/nvme0", "nvme ns-rescan /dev/nvme1"}));
  EXPECT_TRUE(exec_.calls().size() == 2);  // no connect: it was connected
}

TEST_F(NodeNvmeTest, DeviceThatNeverAppearsEndsWithAClearDeadlineError) {
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
  exec_.OnOutput({"nvme", "ns-rescan"}, "");
  AttachOptions o;
  o.device_timeout_ms = 10000;
  o.poll_interval_ms = 500;
  o.rescan_after_ms = 2000;
  auto a = Attacher(o);
  auto dev = a.Attach(Target());
  EXPECT_EQ(dev.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(dev.status().message().find("namespace 1 of subsystem " + std::string(kNqn)),
            std::string::npos);
  EXPECT_NE(dev.status().message().find("ns-rescan"), std::string::npos);
  EXPECT_GE(clock_.elapsed().count(), 10000);
  EXPECT_LT(clock_.elapsed().count(), 11000);
  // t=0, 2, 4, 6, 8 s: one rescan per interval, not one per poll.
  EXPECT_EQ(exec_.calls().size(), 5u);
}

TEST_F(NodeNvmeTest, FreshConnectGivesTheKernelTimeBeforeRescanning) {
  exec_.On({"nvme-fabrics"}, [&](const Command&) -> StatusOr<ExecResult> {
    sys_.AddSubsystem(0, kNqn);
    sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
    return ExecResult{0, "", ""};
  });
  exec_.On({"nvme", "ns-rescan"}, [&](const Command&) -> StatusOr<ExecResult> {
    sys_.AddNamespace(0, 1, 0, 1);
    return ExecResult{0, "", ""};
  });
  auto a = Attacher();
  ASSERT_TRUE(a.Attach(Target()).ok());
  EXPECT_EQ(clock_.elapsed().count(), 2500);  // rescanned at 2 s, found on the next poll
  EXPECT_EQ(exec_.CallLines().back(), "nvme ns-rescan /dev/nvme0");
}

TEST_F(NodeNvmeTest, DisconnectOnlyWhenConnected) {
  auto a = Attacher();
  EXPECT_TRUE(a.Detach(Target()).ok());
  EXPECT_TRUE(exec_.calls().empty());
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
  exec_.On({"nvme", "disconnect"}, [&](const Command&) -> StatusOr<ExecResult> {
    sys_.RemoveSubsystem(0);
    return ExecResult{0, "NQN:... disconnected 1 controller(s)\n", ""};
  });
  EXPECT_TRUE(a.Detach(Target()).ok());
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{std::string("nvme disconnect -n ") + kNqn}));
}

TEST_F(NodeNvmeTest, InvalidNqnRunsNothing) {
  auto a = Attacher();
  RemoteTarget t = Target("nqn.2026-01.com.x:a;reboot");
  EXPECT_EQ(a.Attach(t).status().code(), Code::kInvalidArgument);
  t = Target();
  t.address = "10.0.0.1 -n x";
  EXPECT_EQ(a.Attach(t).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeNvmeTest, HealConnectsALostSubsystemAndRescansAMissingDevice) {
  exec_.OnOutput({"nvme-fabrics"}, "");
  exec_.OnOutput({"nvme", "ns-rescan"}, "");
  auto a = Attacher();
  ASSERT_TRUE(a.Heal(Target()).ok());
  EXPECT_EQ(exec_.calls().back()[0], "nvme-fabrics");
  exec_.ClearCalls();
  sys_.AddSubsystem(0, kNqn);
  sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
  ASSERT_TRUE(a.Heal(Target()).ok());
  EXPECT_EQ(exec_.CallLines(), (std::vector<std::string>{"nvme ns-rescan /dev/nvme0"}));
  exec_.ClearCalls();
  sys_.AddNamespace(0, 1, 0, 1);
  ASSERT_TRUE(a.Heal(Target()).ok());
  EXPECT_TRUE(exec_.calls().empty());
  EXPECT_TRUE(a.Check(Target()).problem.empty());
}

}  // namespace
}  // namespace pillar::node
