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
  EXPECT_EQ(ProjectVersion(), PILLAR_TEST_PROJECT_VERSION);
  const std::string version(Version());
  const std::string project(ProjectVersion());
  const std::string commit(GitCommit());
  ASSERT_FALSE(version.empty());
  EXPECT_TRUE(std::regex_match(version, std::regex(R"(\d+\.\d+\.\d+(\+g[0-9a-f]{7}(\.dirty)?)?)")))
      << version;
  EXPECT_EQ(version.substr(0, project.size()), project) << version;
  if (commit.empty()) {
    EXPECT_EQ(version, project);
  } else {
    EXPECT_TRUE(std::regex_match(commit, std::regex("[0-9a-f]{40,64}")));
    EXPECT_EQ(version.substr(project.size(), 9), "+g" + commit.substr(0, 7));
  }
}

TEST(VersionTest, EveryBinaryPrintsNameAndVersion) {
  const std::pair<const char*, const char*> binaries[] = {
      {"pillar-agent", PILLAR_AGENT_BIN},
      {"pillar-controller", PILLAR_CONTROLLER_BIN},
      {"pillar-node", PILLAR_NODE_BIN},
      {"pillarctl", PILLARCTL_BIN},
  };
  const std::string version(Version());
  SystemExec exec;
  for (const auto& [name, path] : binaries) {
    StatusOr<ExecResult> r = exec.Run({.argv = {path, "--version"}});
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << name << ": " << r->err;
    EXPECT_EQ(r->out, std::string(name) + " " + version + "\n") << name;
  }
}

}  // namespace
}  // namespace pillar
