// The version string and every binary's --version (the images' labels and
// tests/images/test.sh rely on both).
#include "common/version.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "common/exec.h"

namespace pillar {
namespace {

TEST(VersionTest, IsTheProjectVersionPlusTheCommit) {
  EXPECT_EQ(kProjectVersion, PILLAR_TEST_PROJECT_VERSION);
  const std::string version(kVersion);
  const std::string project(kProjectVersion);
  ASSERT_FALSE(version.empty());
  EXPECT_TRUE(std::regex_match(version, std::regex(R"(\d+\.\d+\.\d+(\+g[0-9a-f]{7}(\.dirty)?)?)")))
      << version;
  EXPECT_EQ(version.substr(0, project.size()), project) << version;
  if (kGitCommit.empty()) {
    EXPECT_EQ(version, project);
  } else {
    EXPECT_TRUE(std::regex_match(std::string(kGitCommit), std::regex("[0-9a-f]{40,64}")));
    EXPECT_EQ(version.substr(project.size(), 9), "+g" + std::string(kGitCommit.substr(0, 7)));
  }
}

TEST(VersionTest, EveryBinaryPrintsNameAndVersion) {
  const std::pair<const char*, const char*> binaries[] = {
      {"pillar-agent", PILLAR_AGENT_BIN},
      {"pillar-controller", PILLAR_CONTROLLER_BIN},
      {"pillar-node", PILLAR_NODE_BIN},
      {"pillarctl", PILLARCTL_BIN},
  };
  SystemExec exec;
  for (const auto& [name, path] : binaries) {
    StatusOr<ExecResult> r = exec.Run({.argv = {path, "--version"}});
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << name << ": " << r->err;
    EXPECT_EQ(r->out, std::string(name) + " " + std::string(kVersion) + "\n") << name;
  }
}

}  // namespace
}  // namespace pillar
