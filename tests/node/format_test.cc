#include "node/format.h"

#include <gtest/gtest.h>

#include "common/fake_exec.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;

constexpr const char* kDev = "/dev/nvme0n1";

bool RanMkfs(FakeExec& exec) {
  for (const auto& argv : exec.calls()) {
    if (argv[0].rfind("mkfs", 0) == 0) return true;
  }
  return false;
}

TEST(NodeFormat, BlankDeviceIsFormattedWithExactArgv) {
  FakeExec exec;
  exec.OnOutput({"blkid"}, "", 2);
  exec.OnOutput({"mkfs.ext4"}, "");
  DeviceFormatter f(exec);
  auto fs = f.EnsureFilesystem(kDev, "ext4");
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_EQ(*fs, "ext4");
  EXPECT_EQ(exec.CallLines(), (std::vector<std::string>{"blkid -p -o export /dev/nvme0n1",
                                                        "mkfs.ext4 /dev/nvme0n1"}));
}

TEST(NodeFormat, BlankDeviceWithXfsAndDefault) {
  FakeExec exec;
  exec.OnOutput({"blkid"}, "", 2);
  exec.OnOutput({"mkfs.xfs"}, "");
  exec.OnOutput({"mkfs.ext4"}, "");
  DeviceFormatter f(exec);
  EXPECT_EQ(f.EnsureFilesystem(kDev, "xfs").value(), "xfs");
  EXPECT_EQ(exec.CallLines().back(), "mkfs.xfs /dev/nvme0n1");
  EXPECT_EQ(f.EnsureFilesystem(kDev, "").value(), "ext4");
  EXPECT_EQ(exec.CallLines().back(), "mkfs.ext4 /dev/nvme0n1");
}

TEST(NodeFormat, ExistingFilesystemIsMountedNotFormatted) {
  FakeExec exec;
  exec.OnOutput({"blkid"},
                "DEVNAME=/dev/nvme0n1\nUUID=0b5b3d4e-1111-2222-3333-444455556666\n"
                "VERSION=1.0\nBLOCK_SIZE=4096\nTYPE=ext4\nUSAGE=filesystem\n");
  DeviceFormatter f(exec);
  EXPECT_EQ(f.EnsureFilesystem(kDev, "ext4").value(), "ext4");
  EXPECT_EQ(f.EnsureFilesystem(kDev, "").value(), "ext4");
  EXPECT_FALSE(RanMkfs(exec));
}

TEST(NodeFormat, MismatchedFilesystemIsFailedPreconditionNeverAReformat) {
  FakeExec exec;
  exec.OnOutput({"blkid"}, "DEVNAME=/dev/nvme0n1\nUUID=abc\nTYPE=xfs\nUSAGE=filesystem\n");
  DeviceFormatter f(exec);
  auto fs = f.EnsureFilesystem(kDev, "ext4");
  EXPECT_EQ(fs.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(fs.status().message().find("xfs"), std::string::npos);
  EXPECT_FALSE(RanMkfs(exec));
}

TEST(NodeFormat, PartitionTableIsNeverFormatted) {
  FakeExec exec;
  exec.OnOutput({"blkid"},
                "DEVNAME=/dev/nvme0n1\nPTUUID=6f1f0f6e-aaaa-bbbb-cccc-ddddeeeeffff\nPTTYPE=gpt\n");
  DeviceFormatter f(exec);
  auto fs = f.EnsureFilesystem(kDev, "ext4");
  EXPECT_EQ(fs.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(fs.status().message().find("gpt partition table"), std::string::npos);
  EXPECT_FALSE(RanMkfs(exec));
}

TEST(NodeFormat, NonFilesystemSignaturesAreNeverFormatted) {
  for (const char* out : {"TYPE=LVM2_member\nUSAGE=raid\n", "TYPE=crypto_LUKS\nUSAGE=crypto\n",
                          "TYPE=swap\nUSAGE=other\n", "UUID=abc\n"}) {
    FakeExec exec;
    exec.OnOutput({"blkid"}, out);
    DeviceFormatter f(exec);
    EXPECT_EQ(f.EnsureFilesystem(kDev, "ext4").status().code(), Code::kFailedPrecondition) << out;
    EXPECT_FALSE(RanMkfs(exec)) << out;
  }
}

TEST(NodeFormat, BlkidErrorRefusesToFormat) {
  for (int code : {1, 4, 8}) {
    FakeExec exec;
    exec.OnOutput({"blkid"}, "", code, "error: /dev/nvme0n1: Input/output error\n");
    DeviceFormatter f(exec);
    auto fs = f.EnsureFilesystem(kDev, "ext4");
    EXPECT_EQ(fs.status().code(), Code::kInternal) << code;
    EXPECT_NE(fs.status().message().find("cannot tell whether the device is blank"),
              std::string::npos)
        << fs.status().message();
    EXPECT_FALSE(RanMkfs(exec)) << code;
  }
  FakeExec missing;  // blkid cannot even run
  DeviceFormatter f(missing);
  EXPECT_FALSE(f.EnsureFilesystem(kDev, "ext4").ok());
  EXPECT_FALSE(RanMkfs(missing));
}

TEST(NodeFormat, UnsupportedFsTypeRunsNothing) {
  FakeExec exec;
  DeviceFormatter f(exec);
  EXPECT_EQ(f.EnsureFilesystem(kDev, "btrfs;rm").status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(exec.calls().empty());
}

TEST(NodeFormat, ParsesBlkidExport) {
  auto kv = ParseBlkidExport("TYPE=ext4\nLABEL=my disk\nbroken\n=x\n");
  EXPECT_EQ(kv["TYPE"], "ext4");
  EXPECT_EQ(kv["LABEL"], "my disk");
  EXPECT_EQ(kv.size(), 2u);
}

TEST(NodeFormat, GrowArgv) {
  FakeExec exec;
  exec.OnOutput({"resize2fs"}, "");
  exec.OnOutput({"xfs_growfs"}, "");
  DeviceFormatter f(exec);
  ASSERT_TRUE(f.Grow(kDev, "ext4", "/staging").ok());
  ASSERT_TRUE(f.Grow(kDev, "xfs", "/staging").ok());
  EXPECT_EQ(exec.CallLines(),
            (std::vector<std::string>{"resize2fs /dev/nvme0n1", "xfs_growfs /staging"}));
}

}  // namespace
}  // namespace pillar::node
