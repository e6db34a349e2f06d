// The node daemon's flags: durations parse or are refused naming the flag.
#include "node/node_daemon.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

namespace pillar::node {
namespace {

using std::chrono::milliseconds;

TEST(ParseDurationTest, UnitsAndPlainSeconds) {
  EXPECT_EQ(*ParseDuration("--x", "500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDuration("--x", "5s"), milliseconds(5000));
  EXPECT_EQ(*ParseDuration("--x", "7"), milliseconds(7000));
  EXPECT_EQ(*ParseDuration("--x", "2m"), milliseconds(120000));
}

TEST(ParseDurationTest, BadValuesNameTheFlag) {
  for (const char* bad : {"", "s", "5h", "-1s", "1234567890s", "5 s"}) {
    auto d = ParseDuration("--device-timeout", bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
    EXPECT_NE(d.status().message().find("--device-timeout"), std::string::npos) << bad;
  }
}

TEST(NodeFlagsTest, DurationsLandInTheOptions) {
  CLI::App app;
  NodeDaemonOptions o;
  AddNodeFlags(app, o);
  app.parse("--selfheal-interval 250ms --device-timeout 1m", false);
  EXPECT_EQ(o.selfheal_interval, milliseconds(250));
  EXPECT_EQ(o.device_timeout, milliseconds(60000));
  EXPECT_EQ(o.identity_interval, milliseconds(5000));  // the default stays
}

TEST(NodeFlagsTest, ABadDurationIsACliError) {
  CLI::App app;
  NodeDaemonOptions o;
  AddNodeFlags(app, o);
  EXPECT_THROW(app.parse("--device-timeout soon", false), CLI::ValidationError);
}

}  // namespace
}  // namespace pillar::node
