#include "node/mountinfo.h"

#include <gtest/gtest.h>

namespace pillar::node {
namespace {

// Lines as the kernel writes them (proc(5) example, a kubelet CSI mount, NFS).
constexpr const char* kMountInfo =
    "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
    "25 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw\n"
    "612 25 259:5 / /var/lib/kubelet/plugins/kubernetes.io/csi/pillar-csi.bhyoo.com/abc/globalmount"
    " rw,relatime shared:301 - ext4 /dev/nvme1n1 rw\n"
    "640 25 259:5 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-1/mount rw,relatime "
    "shared:301 - ext4 /dev/nvme1n1 rw\n"
    "700 25 0:55 / /mnt/with\\040space\\011tab rw,relatime - nfs4 10.0.0.1:/exports/a\\040b "
    "rw,vers=4.2,addr=10.0.0.1\n"
    "701 25 0:5 /nvme1n1 /var/lib/kubelet/pods/u2/volumeDevices/dev rw - devtmpfs udev rw\n";

TEST(NodeMountInfo, ParsesKernelLines) {
  auto m = ParseMountInfo(kMountInfo);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].id, 36);
  EXPECT_EQ(m[0].parent_id, 35);
  EXPECT_EQ(m[0].major_minor, "98:0");
  EXPECT_EQ(m[0].root, "/mnt1");
  EXPECT_EQ(m[0].mount_point, "/mnt2");
  EXPECT_EQ(m[0].options, "rw,noatime");
  EXPECT_EQ(m[0].fs_type, "ext3");
  EXPECT_EQ(m[0].source, "/dev/root");
  EXPECT_EQ(m[0].super_options, "rw,errors=continue");
  EXPECT_EQ(m[2].source, "/dev/nvme1n1");
  EXPECT_EQ(m[5].root, "/nvme1n1");
  EXPECT_EQ(m[5].fs_type, "devtmpfs");
}

TEST(NodeMountInfo, UnescapesSpacesTabsNewlinesAndBackslashes) {
  auto m = ParseMountInfo(kMountInfo);
  EXPECT_EQ(m[4].mount_point, "/mnt/with space\ttab");
  EXPECT_EQ(m[4].source, "10.0.0.1:/exports/a b");
  m = ParseMountInfo("9 1 0:1 / /a\\134b\\012c rw - tmpfs none rw\n");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].mount_point, "/a\\b\nc");
}

TEST(NodeMountInfo, NoOptionalFieldsAndManyOptionalFields) {
  auto m = ParseMountInfo(
      "1 0 0:1 / /a rw - tmpfs none rw\n"
      "2 0 0:1 / /b rw shared:1 master:2 propagate_from:3 unbindable - tmpfs none rw\n");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].fs_type, "tmpfs");
  EXPECT_EQ(m[1].mount_point, "/b");
  EXPECT_EQ(m[1].fs_type, "tmpfs");
}

TEST(NodeMountInfo, SkipsMalformedLinesOnly) {
  auto m = ParseMountInfo(
      "garbage\n"
      "x 1 0:1 / /a rw - tmpfs none rw\n"             // id not a number
      "3 1 0:1 / /nosep rw shared:1 tmpfs none rw\n"  // no "-" separator
      "4 1 0:1 / /short rw -\n"
      "\n"
      "5 1 0:1 / /good rw - tmpfs none rw");  // no trailing newline
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].mount_point, "/good");
}

TEST(NodeMountInfo, FindsTheTopOfStackedMounts) {
  auto m = ParseMountInfo(
      "1 0 0:1 / /t rw - tmpfs first rw\n"
      "2 1 0:2 / /t rw - ext4 /dev/sdb rw\n"
      "3 1 0:2 / /t/inner rw - ext4 /dev/sdc rw\n");
  auto top = FindMountAt(m, "/t");
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(top->source, "/dev/sdb");
  EXPECT_EQ(CountMountsAt(m, "/t"), 2);
  EXPECT_FALSE(FindMountAt(m, "/t/").has_value());
  EXPECT_FALSE(FindMountAt(m, "/").has_value());
}

}  // namespace
}  // namespace pillar::node
