// The real SyscallMounter on this kernel, when the test may mount (root):
// tmpfs + bind + read-only remount, seen through the real mountinfo,
// including a mount point with a space (the kernel escapes it as \040).
#include "node/mounter.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include "common/temp_dir.h"
#include "node/mountinfo.h"
#include "node/unmount.h"

namespace pillar::node {
namespace {

using pillar::testing::TempDir;

TEST(NodeSplitMountOptions, FlagsAndData) {
  SplitOptions s = SplitMountOptions({"ro", "noatime", "discard", "errors=remount-ro", "defaults"});
  EXPECT_EQ(s.flags, static_cast<unsigned long>(MS_RDONLY | MS_NOATIME));
  EXPECT_EQ(s.data, "discard,errors=remount-ro");
  EXPECT_EQ(SplitMountOptions({"ro", "rw"}).flags, 0ul);
  EXPECT_TRUE(ValidateMountOptions({"vers=4.2", "nconnect=4", "sec=sys"}).ok());
  EXPECT_FALSE(ValidateMountOptions({"a,b"}).ok());
  EXPECT_FALSE(ValidateMountOptions({"a b"}).ok());
  EXPECT_FALSE(ValidateMountOptions({"-o"}).ok());
  EXPECT_FALSE(ValidateMountOptions({""}).ok());
}

TEST(NodeSyscallMounter, TmpfsBindReadOnlyAndUnmountOnTheRealKernel) {
  TempDir tmp;
  std::string src = tmp.Sub("src dir");
  std::string dst = tmp.Sub("dst dir");
  PosixFs fs;
  ASSERT_TRUE(fs.MakeDirs(src).ok());
  ASSERT_TRUE(fs.MakeDirs(dst).ok());
  SyscallMounter m;
  Status s = m.Mount({"pillar-test", src, "tmpfs", {"size=1m", "noatime"}, false, false});
  if (!s.ok()) GTEST_SKIP() << "cannot mount here: " << s.ToString();
  auto mounts = ParseMountInfo(*m.ReadMountInfo());
  auto e = FindMountAt(mounts, src);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->fs_type, "tmpfs");
  EXPECT_EQ(e->source, "pillar-test");
  EXPECT_NE(e->options.find("noatime"), std::string::npos);

  ASSERT_TRUE(m.Mount({src, dst, "", {}, true, true}).ok());
  e = FindMountAt(ParseMountInfo(*m.ReadMountInfo()), dst);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->options.rfind("ro", 0), 0u) << e->options;
  VfsStat v = m.StatVfs(dst);
  EXPECT_EQ(v.err, 0);
  EXPECT_EQ(v.total_bytes, 1 << 20);
  EXPECT_TRUE(m.Stat(dst).is_dir);

  ASSERT_TRUE(UnmountPath(m, fs, dst, AfterUnmount::kRemove).ok());
  ASSERT_TRUE(UnmountPath(m, fs, src, AfterUnmount::kKeep).ok());
  mounts = ParseMountInfo(*m.ReadMountInfo());
  EXPECT_FALSE(FindMountAt(mounts, src).has_value());
  EXPECT_FALSE(FindMountAt(mounts, dst).has_value());
  EXPECT_FALSE(fs.Exists(dst));
  EXPECT_TRUE(fs.Exists(src));
  EXPECT_EQ(m.Unmount(src, UnmountMode::kNormal), EINVAL);  // not a mount point
}

}  // namespace
}  // namespace pillar::node
