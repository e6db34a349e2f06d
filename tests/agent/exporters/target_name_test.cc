#include <gtest/gtest.h>

#include "agent/exporters/exporter.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

TEST(TargetNameTest, EscapesToValidNqnAndIqnAndRoundTrips) {
  for (std::string id : {"tank/pvc-1", "Tank/pillar/Data_vol+1", "vg0/lv.a-b"}) {
    std::string nqn = TargetName(kDefaultNqnPrefix, id);
    std::string iqn = TargetName(kDefaultIqnPrefix, id);
    EXPECT_TRUE(validate::Nqn("nqn", nqn).ok()) << nqn;
    EXPECT_TRUE(validate::Iqn("iqn", iqn).ok()) << iqn;
    EXPECT_EQ(AgentVolumeIdFromTarget(kDefaultNqnPrefix, nqn), id);
    EXPECT_EQ(AgentVolumeIdFromTarget(kDefaultIqnPrefix, iqn), id);
  }
  EXPECT_EQ(TargetName(kDefaultNqnPrefix, "tank/pvc-1"),
            "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1");
}

TEST(TargetNameTest, ForeignAndMalformedNamesAreNotOurs) {
  EXPECT_FALSE(AgentVolumeIdFromTarget(kDefaultNqnPrefix, "nqn.2014-08.org.example:x"));
  EXPECT_FALSE(AgentVolumeIdFromTarget(kDefaultNqnPrefix, std::string(kDefaultNqnPrefix) + ":"));
  EXPECT_FALSE(AgentVolumeIdFromTarget(kDefaultNqnPrefix, std::string(kDefaultNqnPrefix) + ":a:2"));
  EXPECT_FALSE(
      AgentVolumeIdFromTarget(kDefaultNqnPrefix, std::string(kDefaultNqnPrefix) + ":a:zz"));
  // ":61" decodes to a plain 'a': not canonical, so not one of ours.
  EXPECT_FALSE(
      AgentVolumeIdFromTarget(kDefaultNqnPrefix, std::string(kDefaultNqnPrefix) + ":x:61"));
}

}  // namespace
}  // namespace pillar::agent
