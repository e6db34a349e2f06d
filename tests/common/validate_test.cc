#include "common/validate.h"

#include <gtest/gtest.h>

#include "common/protocol.h"

namespace pillar::validate {
namespace {

TEST(ValidateTest, Nqn) {
  EXPECT_TRUE(
      Nqn("hostNqn", "nqn.2014-08.org.nvmexpress:uuid:0b1f7a3e-9c2d-4e5f-8a6b-1c2d3e4f5a6b").ok());
  EXPECT_TRUE(Nqn("hostNqn", "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fvol-1").ok());
  EXPECT_TRUE(Nqn("hostNqn", "nqn.2014-08.com.example:node_A.1").ok());
  for (const char* bad :
       {"", "nqn.", "nqn.2014-13.com.x", "iqn.2014-08.com.x", "nqn.2014-08.com.x:a/b",
        "nqn.2014-08.com.x:../../etc", "nqn.2014-08.com.x: a", "nqn.2014-08..com",
        "nqn.2014-08.org.nvmexpress:uuid:not-a-uuid", "nqn.2014-08.com.x:a\nb"}) {
    Status s = Nqn("hostNqn", bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("hostNqn"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(Nqn("n", "nqn.2014-08.com.x:" + std::string(220, 'a')).ok());
}

TEST(ValidateTest, Iqn) {
  EXPECT_TRUE(Iqn("iqn", "iqn.1993-08.org.debian:01:8a2b3c4d5e6f").ok());
  EXPECT_TRUE(Iqn("iqn", "eui.02004567a425678d").ok());
  EXPECT_TRUE(Iqn("iqn", "naa.52004567ba64678d").ok());
  for (const char* bad :
       {"iqn.1993-08.org.Debian:01", "iqn.1993-08.org.debian:01/x", "iqn.93-08.org", "eui.123",
        "naa.zz04567ba64678d0", "iqn.1993-08.org.debian:a b"}) {
    EXPECT_EQ(Iqn("iqn", bad).code(), Code::kInvalidArgument) << bad;
  }
}

TEST(ValidateTest, VolumeAndPoolNames) {
  EXPECT_TRUE(VolumeName("name", "pvc-0b1f7a3e").ok());
  EXPECT_TRUE(VolumeName("name", "Data_vol.1+x").ok());
  for (const char* bad : {"", ".", "..", "-rf", "a/b", "a b", "a;b", "$(x)", "a\x01"}) {
    EXPECT_EQ(VolumeName("name", bad).code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(VolumeName("name", std::string(129, 'a')).ok());
  EXPECT_TRUE(PoolName("pool", "tank").ok());
  EXPECT_TRUE(PoolName("pool", "tank/pillar/k8s").ok());
  for (const char* bad : {"", "/tank", "tank/", "tank//x", "tank/../etc", "tank/./x", "-o"}) {
    EXPECT_EQ(PoolName("pool", bad).code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(AgentVolumeId("agentVolumeID", "tank/pillar/pvc-1").ok());
  EXPECT_FALSE(AgentVolumeId("agentVolumeID", "pvc-1").ok());
  EXPECT_FALSE(AgentVolumeId("agentVolumeID", "tank/..").ok());
}

TEST(ValidateTest, Addresses) {
  EXPECT_TRUE(IpAddress("bindAddress", "10.0.0.1").ok());
  EXPECT_TRUE(IpAddress("bindAddress", "fd00::1").ok());
  for (const char* bad :
       {"", "localhost", "10.0.0.256", "10.0.0.1/24", "fe80::1%eth0", "1.2.3.4 "}) {
    EXPECT_EQ(IpAddress("bindAddress", bad).code(), Code::kInvalidArgument) << bad;
  }
  // Found by fuzz/validate_fuzz.cc: an embedded NUL must not truncate the check.
  EXPECT_FALSE(IpAddress("bindAddress", std::string("::\0\0junk", 9)).ok());
  EXPECT_FALSE(IpOrCidr("client", std::string("10.0.0.1\0;rm", 12)).ok());
  EXPECT_TRUE(IpOrCidr("client", "10.0.0.0/24").ok());
  EXPECT_TRUE(IpOrCidr("client", "fd00::/64").ok());
  EXPECT_FALSE(IpOrCidr("client", "10.0.0.0/33").ok());
  EXPECT_FALSE(IpOrCidr("client", "10.0.0.0/").ok());
  EXPECT_FALSE(IpOrCidr("client", "10.0.0.0/2a").ok());
  EXPECT_TRUE(Port("port", 4420).ok());
  EXPECT_FALSE(Port("port", 0).ok());
  EXPECT_FALSE(Port("port", 65536).ok());
}

TEST(ValidateTest, UuidAndObjectName) {
  EXPECT_TRUE(Uuid("uid", "0b1f7a3e-9c2d-4e5f-8a6b-1c2d3e4f5a6b").ok());
  EXPECT_FALSE(Uuid("uid", "0b1f7a3e9c2d4e5f8a6b1c2d3e4f5a6b").ok());
  EXPECT_TRUE(ObjectName("nodeID", "worker-1.example").ok());
  EXPECT_FALSE(ObjectName("nodeID", "Worker").ok());
  EXPECT_FALSE(ObjectName("nodeID", "-a").ok());
}

}  // namespace
}  // namespace pillar::validate

namespace pillar {
namespace {

TEST(ProtocolTest, NamesRoundTripAndUnknownNamesTheField) {
  for (Protocol p : kAllProtocols) {
    auto parsed = ParseProtocol("spec.protocol", ProtocolName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  auto bad = ParseProtocol("parameters.protocol", "fc");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("parameters.protocol"), std::string::npos);
  EXPECT_EQ(DefaultPort(Protocol::kNvmeofTcp), 4420);
  EXPECT_EQ(DefaultPort(Protocol::kIscsi), 3260);
  EXPECT_EQ(DefaultPort(Protocol::kNfs), 2049);
}

}  // namespace
}  // namespace pillar
