// The connection timing of a StorageClass: each key checked by name and
// range, another protocol's key refused, defaults filled only when asked.
#include "common/connection_timing.h"

#include <gtest/gtest.h>

namespace pillar {
namespace {

using Params = std::map<std::string, std::string>;

TEST(ConnectionTimingTest, DefaultsAreFilledForTheProtocolOnlyWhenAsked) {
  auto nvme = ParseConnectionTiming({}, Protocol::kNvmeofTcp, "parameters.", true);
  ASSERT_TRUE(nvme.ok()) << nvme.status().ToString();
  EXPECT_EQ(nvme->nvme_reconnect_delay, 1);
  EXPECT_EQ(nvme->nvme_ctrl_loss_tmo, 600);
  EXPECT_EQ(nvme->nvme_keep_alive_tmo, 5);
  EXPECT_FALSE(nvme->iscsi_replacement_timeout.has_value());
  auto iscsi = ParseConnectionTiming({}, Protocol::kIscsi, "parameters.", true);
  ASSERT_TRUE(iscsi.ok());
  EXPECT_EQ(iscsi->iscsi_replacement_timeout, 600);
  EXPECT_EQ(iscsi->iscsi_noop_out_interval, 5);
  EXPECT_EQ(iscsi->iscsi_noop_out_timeout, 5);
  EXPECT_FALSE(iscsi->nvme_reconnect_delay.has_value());
  EXPECT_TRUE(ParseConnectionTiming({}, Protocol::kNfs, "parameters.", true)->empty());
  EXPECT_TRUE(ParseConnectionTiming({}, Protocol::kNvmeofTcp, "x", false)->empty());
}

TEST(ConnectionTimingTest, GivenValuesWinAndFormatRoundTrips) {
  Params p = {{"nvmeReconnectDelay", "2"},
              {"nvmeCtrlLossTimeout", "1800"},
              {"nvmeKeepAliveTimeout", "10"},
              {"csi.storage.k8s.io/pvc/name", "x"}};
  auto t = ParseConnectionTiming(p, Protocol::kNvmeofTcp, "parameters.", true);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->nvme_reconnect_delay, 2);
  EXPECT_EQ(t->nvme_ctrl_loss_tmo, 1800);
  EXPECT_EQ(t->nvme_keep_alive_tmo, 10);
  Params out;
  FormatConnectionTiming(*t, &out);
  EXPECT_EQ(out, (Params{{"nvmeReconnectDelay", "2"},
                         {"nvmeCtrlLossTimeout", "1800"},
                         {"nvmeKeepAliveTimeout", "10"}}));
  EXPECT_EQ(ParseConnectionTiming(out, Protocol::kNvmeofTcp, "", false).value(), *t);
  Params i = {{"iscsiNoopOutInterval", "0"}};  // 0: NOP-outs off
  EXPECT_EQ(ParseConnectionTiming(i, Protocol::kIscsi, "", true)->iscsi_noop_out_interval, 0);
  EXPECT_TRUE(IsConnectionTimingKey("iscsiReplacementTimeout"));
  EXPECT_FALSE(IsConnectionTimingKey("fsType"));
}

TEST(ConnectionTimingTest, BadValuesAreRefusedNamingTheParameter) {
  struct Case {
    Protocol protocol;
    const char* key;
    const char* value;
  };
  for (const Case& c : {
           Case{Protocol::kNvmeofTcp, "nvmeReconnectDelay", "0"},
           Case{Protocol::kNvmeofTcp, "nvmeReconnectDelay", "3601"},
           Case{Protocol::kNvmeofTcp, "nvmeReconnectDelay", ""},
           Case{Protocol::kNvmeofTcp, "nvmeReconnectDelay", "1s"},
           Case{Protocol::kNvmeofTcp, "nvmeReconnectDelay", " 1"},
           Case{Protocol::kNvmeofTcp, "nvmeCtrlLossTimeout", "-1"},
           Case{Protocol::kNvmeofTcp, "nvmeCtrlLossTimeout", "86401"},
           Case{Protocol::kNvmeofTcp, "nvmeKeepAliveTimeout", "0"},
           Case{Protocol::kNvmeofTcp, "nvmeKeepAliveTimeout", "99999999999"},
           Case{Protocol::kIscsi, "iscsiReplacementTimeout", "0"},
           Case{Protocol::kIscsi, "iscsiNoopOutInterval", "-1"},
           Case{Protocol::kIscsi, "iscsiNoopOutTimeout", "0"},
           // Another protocol's key is a mistake, not a no-op.
           Case{Protocol::kIscsi, "nvmeReconnectDelay", "1"},
           Case{Protocol::kNvmeofTcp, "iscsiNoopOutTimeout", "5"},
           Case{Protocol::kNfs, "nvmeCtrlLossTimeout", "600"},
       }) {
    auto r = ParseConnectionTiming({{c.key, c.value}}, c.protocol, "parameters.", true);
    ASSERT_FALSE(r.ok()) << c.key << "=" << c.value;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("parameters.") + c.key), std::string::npos)
        << r.status().message();
  }
  auto late = ParseConnectionTiming({{"nvmeReconnectDelay", "30"}, {"nvmeCtrlLossTimeout", "10"}},
                                    Protocol::kNvmeofTcp, "parameters.", true);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("must not exceed parameters.nvmeCtrlLossTimeout"),
            std::string::npos)
      << late.status().message();
  // Against the default loss timeout too.
  EXPECT_FALSE(
      ParseConnectionTiming({{"nvmeReconnectDelay", "900"}}, Protocol::kNvmeofTcp, "", true).ok());
}

}  // namespace
}  // namespace pillar
