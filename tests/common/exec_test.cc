#include "common/exec.h"

#include <gtest/gtest.h>

namespace pillar {
namespace {

TEST(SystemExecTest, CapturesOutputAndExitCode) {
  SystemExec exec;
  auto r = exec.Run({{"sh", "-c", "echo out; echo err >&2; exit 3"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(SystemExecTest, ArgvIsNeverInterpretedByAShell) {
  SystemExec exec;
  auto r = exec.Run({{"echo", "$(id)", ";", "rm", "-rf", "/"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "$(id) ; rm -rf /\n");
}

TEST(SystemExecTest, FeedsStdin) {
  SystemExec exec;
  std::string big(200000, 'x');
  auto r = exec.Run({{"wc", "-c"}, big});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::stoi(r->out), 200000);
}

TEST(SystemExecTest, PipesOneCommandIntoAnotherWithoutAShell) {
  SystemExec exec;
  auto r = exec.RunPipe({{"head", "-c", "300000", "/dev/zero"}}, {{"wc", "-c"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->from.exit_code, 0);
  EXPECT_EQ(r->to.exit_code, 0);
  EXPECT_EQ(std::stoi(r->to.out), 300000);
  EXPECT_TRUE(exec.RunPipeOk({{"echo", "$(id) ;"}}, {{"grep", "-qxF", "$(id) ;"}}).ok());
}

TEST(SystemExecTest, PipeReportsTheFailingSideReaderFirst) {
  SystemExec exec;
  auto r = exec.RunPipe({{"sh", "-c", "echo bad >&2; exit 4"}}, {{"sh", "-c", "cat; exit 0"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->from.exit_code, 4);
  EXPECT_EQ(r->from.err, "bad\n");
  Status s = exec.RunPipeOk({{"yes"}}, {{"sh", "-c", "echo full >&2; exit 5"}});
  EXPECT_EQ(s.code(), Code::kInternal);
  // The reader's failure is the cause; the writer only got a broken pipe.
  EXPECT_NE(s.message().find("exited 5: full"), std::string::npos) << s.ToString();
  EXPECT_EQ(exec.RunPipe({{"true"}}, {{"pillar-no-such-program"}}).status().code(),
            Code::kNotFound);
}

TEST(SystemExecTest, PipeTimesOutAndKillsBothSides) {
  SystemExec exec;
  auto start = std::chrono::steady_clock::now();
  auto r = exec.RunPipe({{"sleep", "30"}, "", std::chrono::milliseconds(200)},
                        {{"sleep", "30"}, "", std::chrono::milliseconds(100)});
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(25));
}

TEST(SystemExecTest, TimesOutAndKillsTheProcessGroup) {
  SystemExec exec;
  Command c{{"sh", "-c", "sleep 30 & sleep 30"}, "", std::chrono::milliseconds(200)};
  auto start = std::chrono::steady_clock::now();
  auto r = exec.Run(c);
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
  // Well below the 30 s the children would live if they were not killed, and
  // far above the ~0.2 s it takes, so a slow machine does not fail it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(25));
}

TEST(SystemExecTest, MissingProgramIsNotFound) {
  SystemExec exec;
  auto r = exec.Run({{"pillar-no-such-program"}});
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST(SystemExecTest, RunOkNamesCommandAndStderr) {
  SystemExec exec;
  Status s = exec.RunOk({{"sh", "-c", "echo boom >&2; exit 1"}});
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("exited 1: boom"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace pillar
