#include "node/format.h"

#include <gtest/gtest.h>

#include "common/fake_exec.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;

constexpr const char* kDev = "/dev/nvme0n1";

class NodeFormat : public ::testing::Test {
 protected:
  testing::FakeDeviceClaimer claimer_;
};

bool RanMkfs(FakeExec& exec) {
  for (const auto& argv : exec.calls()) {
    if (argv[0].rfind("mkfs", 0) == 0) return true;
  }
  return false;
}

TEST_F(NodeFormat, BlankDeviceIsFormattedWithExactArgv) {
  FakeExec exec;
  exec.OnOutput({"blkid"}, "", 2);
  exec.OnOutput({"mkfs.ext4"}, "");
  DeviceFormatter f(exec, claimer_);
  auto fs = f.EnsureFilesystem(kDev, "ext4");
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_EQ(*fs, "ext4");
  // Probed, claimed, probed again under the claim, then formatted.
  EXPECT_EQ(exec.CallLines(), (std::vector<std::string>{"blkid -p -o export /dev/nvme0n1",
                                                        "blkid -p -o export /dev/nvme0n1",
                                                        "mkfs.ext4 /dev/nvme0n1"}));
  EXPECT_EQ(claimer_.claimed, (std::vector<std::string>{kDev}));
}

TEST_F(NodeFormat, ABlankDeviceInUseIsNotFormatted) {
  FakeExec exec;
  exec.OnOutput({"blkid"}, "", 2);
  exec.OnOutput({"mkfs.ext4"}, "");
  claimer_.busy.insert(kDev);
  DeviceFormatter f(exec, claimer_);
  EXPECT_EQ(f.EnsureFilesystem(kDev, "ext4").status().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(RanMkfs(exec));
}

TEST_F(NodeFormat, ASignatureThatAppearsBeforeTheClaimStopsTheFormat) {
  FakeExec exec;
  auto probes = std::make_shared<int>(0);
  exec.On({"blkid"}, [probes](const Command&) -> StatusOr<ExecResult> {
    if ((*probes)++ == 0) return ExecResult{2, "", ""};
    return ExecResult{0, "TYPE=ext4\nUSAGE=filesystem\n", ""};
  });
  exec.OnOutput({"mkfs.ext4"}, "");
  DeviceFormatter f(exec, claimer_);
  auto fs = f.EnsureFilesystem(kDev, "ext4");
  EXPECT_EQ(fs.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(fs.status().message().find("now holds ext4"), std::string::npos)
      << fs.status().message();
  EXPECT_FALSE(RanMkfs(exec));
}

TEST_F(NodeFormat, BlankDeviceWithXfsAndDefault) {
  FakeExec exec;
  exec.OnOutput({"blkid"}, "", 2);
  exec.OnOutput({"mkfs.xfs"}, "");
  exec.OnOutput({"mkfs.ext4"}, "");
  DeviceFormatter f(exec, claimer_);
  EXPECT_EQ(f.EnsureFilesystem(kDev, "xfs").value(), "xfs");
  EXPECT_EQ(exec.CallLines().back(), "mkfs.xfs /dev/nvme0n1");
  EXPECT_EQ(f.EnsureFilesystem(kDev, "").value(), "ext4");
  EXPECT_EQ(exec.CallLines().back(), "mkfs.ext4 /dev/nvme0n1");
}

TEST_F(NodeFormat, ExistingFilesystemIsMountedNotFormatted) {
  FakeExec exec;
  exec.OnOutput({"blkid"},
                "DEVNAME=/dev/nvme0n1\nUUID=0b5b3d4e-1111-2222-3333-444455556666\n"
                "VERSION=1.0\nBLOCK_SIZE=4096\nTYPE=ext4\nUSAGE=filesystem\n");
  DeviceFormatter f(exec, claimer_);
  EXPECT_EQ(f.EnsureFilesystem(kDev, "ext4").value(), "ext4");
  EXPECT_EQ(f.EnsureFilesystem(kDev, "").value(), "ext4");
  EXPECT_FALSE(RanMkfs(exec));
}

TEST_F(NodeFormat, MismatchedFilesystemIsFailedPreconditionNeverAReformat) {
  FakeExec exec;
  exec.OnOutput({"blkid"}, "DEVNAME=/dev/nvme0n1\nUUID=abc\nTYPE=xfs\nUSAGE=filesystem\n");
  DeviceFormatter f(exec, claimer_);
  auto fs = f.EnsureFilesystem(kDev, "ext4");
  EXPECT_EQ(fs.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(fs.status().message().find("xfs"), std::string::npos);
  EXPECT_FALSE(RanMkfs(exec));
}

TEST_F(NodeFormat, PartitionTableIsNeverFormatted) {
  FakeExec exec;
  exec.OnOutput({"blkid"},
                "DEVNAME=/dev/nvme0n1\nPTUUID=6f1f0f6e-aaaa-bbbb-cccc-ddddeeeeffff\nPTTYPE=gpt\n");
  DeviceFormatter f(exec, claimer_);
  auto fs = f.EnsureFilesystem(kDev, "ext4");
  EXPECT_EQ(fs.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(fs.status().message().find("gpt partition table"), std::string::npos);
  EXPECT_FALSE(RanMkfs(exec));
}

TEST_F(NodeFormat, NonFilesystemSignaturesAreNeverFormatted) {
  for (const char* out : {"TYPE=LVM2_member\nUSAGE=raid\n", "TYPE=crypto_LUKS\nUSAGE=crypto\n",
                          "TYPE=swap\nUSAGE=other\n", "UUID=abc\n"}) {
    FakeExec exec;
    exec.OnOutput({"blkid"}, out);
    DeviceFormatter f(exec, claimer_);
    EXPECT_EQ(f.EnsureFilesystem(kDev, "ext4").status().code(), Code::kFailedPrecondition) << out;
    EXPECT_FALSE(RanMkfs(exec)) << out;
  }
}

TEST_F(NodeFormat, BlkidErrorRefusesToFormat) {
  for (int code : {1, 4, 8}) {
    FakeExec exec;
    exec.OnOutput({"blkid"}, "", code, "error: /dev/nvme0n1: Input/output error\n");
    DeviceFormatter f(exec, claimer_);
    auto fs = f.EnsureFilesystem(kDev, "ext4");
    EXPECT_EQ(fs.status().code(), Code::kInternal) << code;
    EXPECT_NE(fs.status().message().find("cannot tell whether the device is blank"),
              std::string::npos)
        << fs.status().message();
    EXPECT_FALSE(RanMkfs(exec)) << code;
  }
  FakeExec missing;  // blkid cannot even run
  DeviceFormatter f(missing, claimer_);
  EXPECT_FALSE(f.EnsureFilesystem(kDev, "ext4").ok());
  EXPECT_FALSE(RanMkfs(missing));
}

TEST_F(NodeFormat, UnsupportedFsTypeRunsNothing) {
  FakeExec exec;
  DeviceFormatter f(exec, claimer_);
  EXPECT_EQ(f.EnsureFilesystem(kDev, "btrfs;rm").status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(exec.calls().empty());
}

TEST_F(NodeFormat, ParsesBlkidExport) {
  auto kv = ParseBlkidExport("TYPE=ext4\nLABEL=my disk\nbroken\n=x\n");
  EXPECT_EQ(kv["TYPE"], "ext4");
  EXPECT_EQ(kv["LABEL"], "my disk");
  EXPECT_EQ(kv.size(), 2u);
}

TEST_F(NodeFormat, GrowArgv) {
  FakeExec exec;
  exec.OnOutput({"resize2fs"}, "");
  exec.OnOutput({"xfs_growfs"}, "");
  DeviceFormatter f(exec, claimer_);
  ASSERT_TRUE(f.Grow(kDev, "ext4", "/staging").ok());
  ASSERT_TRUE(f.Grow(kDev, "xfs", "/staging").ok());
  EXPECT_EQ(exec.CallLines(),
            (std::vector<std::string>{"resize2fs /dev/nvme0n1", "xfs_growfs /staging"}));
}

}  // namespace
}  // namespace pillar::node
