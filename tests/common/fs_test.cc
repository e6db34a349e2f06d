#include "common/fs.h"

#include <gtest/gtest.h>

#include "common/temp_dir.h"

namespace pillar {
namespace {

TEST(PosixFsTest, FilesDirsAndLinks) {
  testing::TempDir tmp;
  PosixFs fs;
  ASSERT_TRUE(fs.MakeDirs(tmp.Sub("a/b/c")).ok());
  EXPECT_TRUE(fs.IsDir(tmp.Sub("a/b/c")));
  EXPECT_TRUE(fs.MakeDir(tmp.Sub("a/b/c")).ok());  // exists is fine
  ASSERT_TRUE(fs.WriteFile(tmp.Sub("a/f"), "1\n").ok());
  EXPECT_EQ(*fs.ReadFile(tmp.Sub("a/f")), "1\n");
  ASSERT_TRUE(fs.WriteFileAtomic(tmp.Sub("a/g"), "{}").ok());
  EXPECT_EQ(*fs.ReadFile(tmp.Sub("a/g")), "{}");
  ASSERT_TRUE(fs.Symlink("../a/f", tmp.Sub("a/b/l")).ok());
  EXPECT_EQ(*fs.ReadLink(tmp.Sub("a/b/l")), "../a/f");
  auto list = fs.ListDir(tmp.Sub("a/b"));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(fs.ReadFile(tmp.Sub("missing")).status().code(), Code::kNotFound);
  EXPECT_EQ(fs.RemoveDir(tmp.Sub("a/b")).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(fs.Unlink(tmp.Sub("a/b/l")).ok());
  EXPECT_TRUE(fs.Unlink(tmp.Sub("a/b/l")).ok());  // absent is fine
  EXPECT_TRUE(fs.RemoveDir(tmp.Sub("a/b/c")).ok());
  EXPECT_TRUE(fs.RemoveDir(tmp.Sub("a/b/c")).ok());
  EXPECT_EQ(JoinPath("/sys/kernel/config/", "/nvmet"), "/sys/kernel/config/nvmet");
}

}  // namespace
}  // namespace pillar
