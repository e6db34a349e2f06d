#include "common/fs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

TEST(CanonicalPathTest, ResolvesLinksDotsAndSlashesAsTheKernelNamesAFile) {
  testing::TempDir tmp;
  PosixFs fs;
  const std::string root = *CanonicalPath(fs, tmp.path());  // TMPDIR may be a link itself
  ASSERT_TRUE(fs.MakeDirs(tmp.Sub("real/pool")).ok());
  ASSERT_TRUE(fs.Symlink("real", tmp.Sub("rel")).ok());
  ASSERT_TRUE(fs.Symlink(tmp.Sub("real/pool"), tmp.Sub("abs")).ok());
  ASSERT_TRUE(fs.Symlink("../rel/pool", tmp.Sub("real/up")).ok());
  EXPECT_EQ(*CanonicalPath(fs, tmp.Sub("rel/pool")), root + "/real/pool");
  EXPECT_EQ(*CanonicalPath(fs, tmp.Sub("abs")), root + "/real/pool");
  EXPECT_EQ(*CanonicalPath(fs, tmp.Sub("real/up/")), root + "/real/pool");
  EXPECT_EQ(*CanonicalPath(fs, tmp.Sub("rel//./pool/../pool/x.img")), root + "/real/pool/x.img");
  EXPECT_EQ(*CanonicalPath(fs, tmp.Sub("abs/missing/x.img")), root + "/real/pool/missing/x.img");
  EXPECT_EQ(*CanonicalPath(fs, "/"), "/");
  EXPECT_EQ(*CanonicalPath(fs, "/.."), "/");
  ASSERT_TRUE(fs.Symlink("loop-b", tmp.Sub("loop-a")).ok());
  ASSERT_TRUE(fs.Symlink("loop-a", tmp.Sub("loop-b")).ok());
  EXPECT_EQ(CanonicalPath(fs, tmp.Sub("loop-a/x")).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(CanonicalPath(fs, "relative/x").status().code(), Code::kFailedPrecondition);
}

TEST(PosixFsTest, AtomicWritesNeverFollowAPlantedLinkAndLeaveNoTemporary) {
  testing::TempDir tmp;
  PosixFs fs;
  ASSERT_TRUE(fs.MakeDirs(tmp.Sub("d")).ok());
  ASSERT_TRUE(fs.WriteFile(tmp.Sub("victim"), "precious\n").ok());
  // The names the old code used (".tmp.<pid>") and a few more, planted as
  // links to a file the writer must never touch.
  for (const std::string& suffix : {".tmp." + std::to_string(getpid()), std::string(".tmp.0")}) {
    ASSERT_EQ(symlink(tmp.Sub("victim").c_str(), tmp.Sub("d/rec" + suffix).c_str()), 0);
  }
  ASSERT_TRUE(fs.WriteFileAtomic(tmp.Sub("d/rec"), "secret").ok());
  EXPECT_EQ(*fs.ReadFile(tmp.Sub("victim")), "precious\n");
  EXPECT_EQ(*fs.ReadFile(tmp.Sub("d/rec")), "secret");
  struct stat st {};
  ASSERT_EQ(lstat(tmp.Sub("d/rec").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto list = fs.ListDir(tmp.Sub("d"));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 3u) << "the record and the two planted links; no temporary left";
}

TEST(PosixFsTest, SparseFilesHaveExactSizeAndNoBlocks) {
  testing::TempDir tmp;
  PosixFs fs;
  const std::string img = tmp.Sub("v.img");
  ASSERT_TRUE(fs.CreateSparseFile(img, int64_t{1} << 30).ok());
  EXPECT_EQ(*fs.FileSize(img), int64_t{1} << 30);
  struct stat st {};
  ASSERT_EQ(stat(img.c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, 0);
  // Never truncates an existing image.
  EXPECT_EQ(fs.CreateSparseFile(img, 4096).code(), Code::kAlreadyExists);
  EXPECT_EQ(*fs.FileSize(img), int64_t{1} << 30);
  ASSERT_TRUE(fs.ResizeFile(img, int64_t{2} << 30).ok());
  EXPECT_EQ(*fs.FileSize(img), int64_t{2} << 30);
  EXPECT_EQ(fs.ResizeFile(tmp.Sub("missing"), 1).code(), Code::kNotFound);
  EXPECT_EQ(fs.FileSize(tmp.Sub("missing")).status().code(), Code::kNotFound);
  EXPECT_EQ(fs.CreateSparseFile(tmp.Sub("neg"), -1).code(), Code::kInvalidArgument);
}

TEST(PosixFsTest, FileSizeRefusesSymlinksAndDirs) {
  testing::TempDir tmp;
  PosixFs fs;
  ASSERT_TRUE(fs.WriteFile(tmp.Sub("real"), "12345").ok());
  ASSERT_TRUE(fs.Symlink(tmp.Sub("real"), tmp.Sub("link.img")).ok());
  EXPECT_EQ(*fs.FileSize(tmp.Sub("real")), 5);
  EXPECT_EQ(fs.FileSize(tmp.Sub("link.img")).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(fs.FileSize(tmp.path()).status().code(), Code::kFailedPrecondition);
}

TEST(PosixFsTest, StatVfsReportsTheFileSystem) {
  testing::TempDir tmp;
  PosixFs fs;
  auto cap = fs.StatVfs(tmp.path());
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  EXPECT_GT(cap->total_bytes, 0);
  EXPECT_GE(cap->available_bytes, 0);
  EXPECT_LE(cap->available_bytes, cap->total_bytes);
  EXPECT_EQ(fs.StatVfs(tmp.Sub("missing")).status().code(), Code::kNotFound);
}

TEST(PosixFsTest, RemoveTreeDeletesContentsButNeverFollowsLinks) {
  testing::TempDir tmp;
  PosixFs fs;
  ASSERT_TRUE(fs.MakeDirs(tmp.Sub("outside")).ok());
  ASSERT_TRUE(fs.WriteFile(tmp.Sub("outside/keep"), "precious").ok());
  ASSERT_TRUE(fs.MakeDirs(tmp.Sub("vol/a/b/c")).ok());
  ASSERT_TRUE(fs.WriteFile(tmp.Sub("vol/a/b/c/f"), "x").ok());
  ASSERT_TRUE(fs.WriteFile(tmp.Sub("vol/top"), "y").ok());
  ASSERT_TRUE(fs.Symlink(tmp.Sub("outside"), tmp.Sub("vol/a/escape")).ok());
  ASSERT_TRUE(fs.Symlink(tmp.Sub("outside/keep"), tmp.Sub("vol/keep-link")).ok());

  ASSERT_TRUE(fs.RemoveTree(tmp.Sub("vol")).ok());
  EXPECT_FALSE(fs.Exists(tmp.Sub("vol")));
  EXPECT_EQ(*fs.ReadFile(tmp.Sub("outside/keep")), "precious");
  EXPECT_TRUE(fs.RemoveTree(tmp.Sub("vol")).ok());  // absent is fine

  // A symlink given as the root is removed itself, not its target.
  ASSERT_TRUE(fs.Symlink(tmp.Sub("outside"), tmp.Sub("root-link")).ok());
  ASSERT_TRUE(fs.RemoveTree(tmp.Sub("root-link")).ok());
  EXPECT_FALSE(fs.Exists(tmp.Sub("root-link")));
  EXPECT_TRUE(fs.Exists(tmp.Sub("outside/keep")));
  EXPECT_EQ(fs.RemoveTree(tmp.Sub("..")).code(), Code::kInvalidArgument);
}

TEST(PosixFsTest, ChmodAndChownSetExactBitsAndNeverFollowLinks) {
  testing::TempDir tmp;
  PosixFs fs;
  const std::string dir = tmp.Sub("d");
  ASSERT_TRUE(fs.MakeDir(dir).ok());
  // Root may give a file away; an unprivileged run checks only the mode.
  const bool root = geteuid() == 0;
  if (root) {
    ASSERT_TRUE(fs.Chown(dir, 1000, 2000).ok());
  }
  // setgid and sticky survive, and the umask plays no part.
  ASSERT_TRUE(fs.Chmod(dir, 03770).ok());
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 03770u);
  if (root) {
    EXPECT_EQ(st.st_uid, 1000u);
    EXPECT_EQ(st.st_gid, 2000u);
  }
  EXPECT_EQ(fs.Chmod(dir, 010000).code(), Code::kInvalidArgument);
  EXPECT_EQ(fs.Chown(dir, static_cast<uid_t>(-1), 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(fs.Chmod(tmp.Sub("missing"), 0755).code(), Code::kNotFound);
  EXPECT_EQ(fs.Chown(tmp.Sub("missing"), 0, 0).code(), Code::kNotFound);

  // A link planted where a directory was expected: its target keeps its
  // mode and owner.
  ASSERT_TRUE(fs.MakeDir(tmp.Sub("target")).ok());
  ASSERT_TRUE(fs.Chmod(tmp.Sub("target"), 0700).ok());
  ASSERT_TRUE(fs.Symlink(tmp.Sub("target"), tmp.Sub("link")).ok());
  EXPECT_EQ(fs.Chmod(tmp.Sub("link"), 0777).code(), Code::kFailedPrecondition);
  EXPECT_EQ(fs.Chown(tmp.Sub("link"), 1000, 1000).code(), Code::kFailedPrecondition);
  ASSERT_EQ(stat(tmp.Sub("target").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
}

}  // namespace
}  // namespace pillar
