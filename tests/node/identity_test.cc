#include "node/identity.h"

#include <gtest/gtest.h>

#include "common/fake_exec.h"
#include "common/temp_dir.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;
using testing::WriteText;

// `ip -j addr show` as captured on a Debian 12 host (trimmed).
constexpr const char* kIpJson =
    R"([{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,)"
    R"("qdisc":"noqueue","operstate":"UNKNOWN","group":"default","txqlen":1000,)"
    R"("link_type":"loopback","address":"00:00:00:00:00:00","broadcast":"00:00:00:00:00:00",)"
    R"("addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8,"scope":"host",)"
    R"("label":"lo","valid_life_time":4294967295,"preferred_life_time":4294967295},)"
    R"({"family":"inet6","local":"::1","prefixlen":128,"scope":"host",)"
    R"("valid_life_time":4294967295,"preferred_life_time":4294967295}]},)"
    R"({"ifindex":2,"ifname":"ifb0","flags":["BROADCAST","NOARP"],"mtu":1500,"qdisc":"noop",)"
    R"("operstate":"DOWN","group":"default","txqlen":32,"link_type":"ether",)"
    R"("address":"9a:cd:1e:b5:68:20","broadcast":"ff:ff:ff:ff:ff:ff","addr_info":[]},)"
    R"({"ifindex":4,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],)"
    R"("mtu":1400,"qdisc":"pfifo_fast","operstate":"UP","group":"default","txqlen":1000,)"
    R"("link_type":"ether","address":"02:fc:00:00:00:01","broadcast":"ff:ff:ff:ff:ff:ff",)"
    R"("addr_info":[{"family":"inet","local":"192.0.2.2","prefixlen":24,)"
    R"("broadcast":"192.0.2.255","scope":"global","label":"eth0",)"
    R"("valid_life_time":4294967295,"preferred_life_time":4294967295},)"
    R"({"family":"inet6","local":"fd00::2","prefixlen":64,"scope":"global","nodad":true,)"
    R"("valid_life_time":4294967295,"preferred_life_time":4294967295},)"
    R"({"family":"inet6","local":"fe80::fc:ff:fe00:1","prefixlen":64,"scope":"link",)"
    R"("valid_life_time":4294967295,"preferred_life_time":4294967295}]}])";

constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:5d1b5a2e-8a5b-4bd5-9c1e-0c7b1f1a2b3c";
constexpr const char* kIqn = "iqn.1993-08.org.debian:01:7c5b2d8e9f10";

class FakeRegistry : public RegistryClient {
 public:
  Status Register(const NodeIdentityInfo& id) override {
    calls.push_back(id);
    return fail ? Unavailable("registry down") : Status::Ok();
  }
  void Reset() override { resets_before_call.push_back(calls.size()); }
  std::vector<NodeIdentityInfo> calls;
  std::vector<size_t> resets_before_call;  // calls made before each Reset
  bool fail = false;
};

class NodeIdentityTest : public ::testing::Test {
 protected:
  NodeIdentityTest() {
    WriteText(tmp_.Sub("hostnqn"), std::string(kHostNqn) + "\n");
    WriteText(tmp_.Sub("initiatorname.iscsi"),
              std::string("## DO NOT EDIT OR REMOVE THIS FILE!\nInitiatorName=") + kIqn + "\n");
    exec_.OnOutput({"ip", "-j", "addr", "show"}, kIpJson);
    opts_.node_id = "worker-1";
    opts_.host_nqn_file = tmp_.Sub("hostnqn");
    opts_.iscsi_initiator_file = tmp_.Sub("initiatorname.iscsi");
  }
  IdentitySource Source() {
    return IdentitySource(exec_, fs_, opts_, [] {
      return StatusOr<std::vector<InterfaceAddress>>(Unavailable("no fallback in tests"));
    });
  }

  TempDir tmp_;
  PosixFs fs_;
  FakeExec exec_;
  IdentityOptions opts_;
};

TEST_F(NodeIdentityTest, ParsesIpJson) {
  auto a = ParseIpAddrJson(kIpJson);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 5u);
  EXPECT_EQ((*a)[2].ifname, "eth0");
  EXPECT_EQ((*a)[2].address, "192.0.2.2");
  EXPECT_FALSE(ParseIpAddrJson("not json").ok());
  EXPECT_TRUE(ParseIpAddrJson("[]")->empty());
  EXPECT_TRUE(ParseIpAddrJson(R"([1, {"addr_info": 3}, {"addr_info":[{"local":5}]}])")->empty());
}

TEST_F(NodeIdentityTest, ReadsIdentitiesAndSkipsLoopbackAndLinkLocal) {
  auto id = Source().Read();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->node_id, "worker-1");
  EXPECT_EQ(id->host_nqn, kHostNqn);
  EXPECT_EQ(id->initiator_iqn, kIqn);
  EXPECT_EQ(id->ip_addresses, (std::vector<std::string>{"192.0.2.2", "fd00::2"}));
  opts_.include_loopback = true;
  opts_.include_link_local = true;
  EXPECT_EQ(
      Source().Read()->ip_addresses,
      (std::vector<std::string>{"127.0.0.1", "192.0.2.2", "::1", "fd00::2", "fe80::fc:ff:fe00:1"}));
}

TEST_F(NodeIdentityTest, MissingFilesLeaveThatIdentityEmptyMalformedOnesFail) {
  std::filesystem::remove(tmp_.Sub("initiatorname.iscsi"));
  auto id = Source().Read();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->initiator_iqn, "");
  WriteText(tmp_.Sub("hostnqn"), "not-an-nqn\n");
  EXPECT_EQ(Source().Read().status().code(), Code::kInvalidArgument);
}

TEST_F(NodeIdentityTest, StaticAddressesReplaceDiscovery) {
  opts_.static_addresses = {"10.1.0.7", "fd00:0::7"};
  auto id = Source().Read();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->ip_addresses, (std::vector<std::string>{"10.1.0.7", "fd00::7"}));
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeIdentityTest, ReportsAtStartOnChangeAndRetriesAfterFailure) {
  IdentitySource source = Source();
  FakeRegistry registry;
  IdentityReporter reporter(source, registry);
  ASSERT_TRUE(reporter.Tick().ok());
  ASSERT_TRUE(reporter.Tick().ok());
  EXPECT_EQ(registry.calls.size(), 1u);  // unchanged: not re-reported

  // The node is re-IP'd (seed 000's trigger): reported on the next tick.
  exec_.OnOutput({"ip", "-j", "addr", "show"},
                 R"([{"ifname":"eth0","addr_info":[{"family":"inet","local":"192.0.2.9"}]}])");
  registry.fail = true;
  EXPECT_FALSE(reporter.Tick().ok());
  registry.fail = false;
  ASSERT_TRUE(reporter.Tick().ok());
  ASSERT_EQ(registry.calls.size(), 3u);
  EXPECT_EQ(registry.calls.back().ip_addresses, (std::vector<std::string>{"192.0.2.9"}));
  ASSERT_TRUE(reporter.Tick().ok());
  EXPECT_EQ(registry.calls.size(), 3u);
}

TEST_F(NodeIdentityTest, FailedReportForgetsWhatWasReportedAndUnchangedIsRefreshed) {
  IdentitySource source = Source();
  FakeRegistry registry;
  IdentityReporter reporter(source, registry, /*refresh_ticks=*/3);
  ASSERT_TRUE(reporter.Tick().ok());
  registry.fail = true;
  EXPECT_FALSE(reporter.Tick().ok() && registry.calls.size() > 1) << "unchanged: no call yet";
  // A failed call may land late: the next tick reports again even though
  // the identity did not change.
  for (int i = 0; i < 3; ++i) (void)reporter.Tick();
  EXPECT_FALSE(reporter.last_reported().has_value());
  registry.fail = false;
  size_t before = registry.calls.size();
  ASSERT_TRUE(reporter.Tick().ok());
  EXPECT_EQ(registry.calls.size(), before + 1);
  // Unchanged identities are still re-reported every refresh_ticks ticks.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reporter.Tick().ok());
  EXPECT_EQ(registry.calls.size(), before + 2);
}

// Issue 25: after the node's address changed, the report that tells the
// registry goes over a new connection: the old one may be bound to the
// address that is gone and would hang until its deadline (s4: 10 s).
TEST_F(NodeIdentityTest, AnAddressChangeStartsTheNextReportOnANewConnection) {
  IdentitySource source = Source();
  FakeRegistry registry;
  IdentityReporter reporter(source, registry);
  ASSERT_TRUE(reporter.Tick().ok());
  ASSERT_TRUE(reporter.Tick().ok());
  EXPECT_TRUE(registry.resets_before_call.empty()) << "nothing changed: the connection stays";
  exec_.OnOutput({"ip", "-j", "addr", "show"},
                 R"([{"ifname":"eth0","addr_info":[{"family":"inet","local":"192.0.2.9"}]}])");
  ASSERT_TRUE(reporter.Tick().ok());
  EXPECT_EQ(registry.resets_before_call, (std::vector<size_t>{1u})) << "reset before the report";
  ASSERT_EQ(registry.calls.size(), 2u);
  ASSERT_TRUE(reporter.Tick().ok());
  EXPECT_EQ(registry.resets_before_call.size(), 1u);
}

TEST(NodeIpClasses, LoopbackAndLinkLocal) {
  EXPECT_TRUE(IsLoopbackIp("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackIp("127.255.0.9"));
  EXPECT_TRUE(IsLoopbackIp("::1"));
  EXPECT_FALSE(IsLoopbackIp("10.0.0.1"));
  EXPECT_TRUE(IsLinkLocalIp("169.254.1.1"));
  EXPECT_TRUE(IsLinkLocalIp("fe80::1"));
  EXPECT_FALSE(IsLinkLocalIp("fd00::1"));
}

}  // namespace
}  // namespace pillar::node
