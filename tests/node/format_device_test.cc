// DeviceFormatter on real loop devices with the real blkid and mkfs: a file
// system, once there, is never overwritten, whichever way the request or a
// concurrent writer comes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/exec.h"
#include "common/temp_dir.h"
#include "node/format.h"

namespace pillar::node {
namespace {

// Large enough for mkfs.xfs (300 MB at least); sparse, so cheap.
constexpr int64_t kImageBytes = int64_t{320} << 20;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs a claimer's claim only after `before_claim` ran: a writer that slips
// in between the formatter's first probe and its claim.
class RacingClaimer : public DeviceClaimer {
 public:
  explicit RacingClaimer(std::function<void()> before_claim)
      : before_claim_(std::move(before_claim)) {}
  StatusOr<std::unique_ptr<Claim>> ClaimExclusive(const std::string& device) override {
    before_claim_();
    return real_.ClaimExclusive(device);
  }

 private:
  std::function<void()> before_claim_;
  PosixDeviceClaimer real_;
};

class FormatDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || !std::filesystem::exists("/dev/loop-control")) {
      GTEST_SKIP() << "needs root and loop devices";
    }
    std::string image = tmp_.Sub("disk.img");
    std::ofstream(image).close();
    ASSERT_EQ(truncate(image.c_str(), kImageBytes), 0);
    auto r = exec_.Run({{"losetup", "--find", "--show", "--", image}});
    ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
    dev_ = Trim(r->out);
    ASSERT_EQ(dev_.rfind("/dev/loop", 0), 0U) << dev_;
  }
  void TearDown() override {
    if (!dev_.empty()) (void)exec_.Run({{"losetup", "--detach", dev_}});
  }

  // The file system's UUID as blkid reads it now ("" when blank).
  std::string Uuid() {
    auto r = exec_.Run({{"blkid", "-p", "-o", "value", "-s", "UUID", dev_}});
    return r.ok() ? Trim(r->out) : "error";
  }
  std::string Type() {
    auto r = exec_.Run({{"blkid", "-p", "-o", "value", "-s", "TYPE", dev_}});
    return r.ok() ? Trim(r->out) : "error";
  }
  std::string Head() {  // the first MiB: superblocks of ext4 and xfs
    std::ifstream in(dev_, std::ios::binary);
    std::string buf(1 << 20, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    return buf;
  }
  void MakeExt4() {
    auto r = exec_.Run({{"mkfs.ext4", "-q", dev_}});
    ASSERT_TRUE(r.ok() && r->exit_code == 0);
    ASSERT_EQ(Type(), "ext4");
  }

  testing::TempDir tmp_;
  SystemExec exec_;
  PosixDeviceClaimer claimer_;
  std::string dev_;
};

TEST_F(FormatDeviceTest, ABlankDeviceIsFormattedOnceThenOnlyMounted) {
  DeviceFormatter f(exec_, claimer_);
  auto fs = f.EnsureFilesystem(dev_, "ext4");
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  EXPECT_EQ(Type(), "ext4");
  std::string uuid = Uuid();
  ASSERT_FALSE(uuid.empty());
  EXPECT_EQ(f.EnsureFilesystem(dev_, "ext4").value(), "ext4");
  EXPECT_EQ(f.EnsureFilesystem(dev_, "").value(), "ext4");
  EXPECT_EQ(Uuid(), uuid);
}

TEST_F(FormatDeviceTest, AnExistingFileSystemIsNeverOverwritten) {
  MakeExt4();
  std::string uuid = Uuid();
  std::string head = Head();
  DeviceFormatter f(exec_, claimer_);
  auto other = f.EnsureFilesystem(dev_, "xfs");
  EXPECT_EQ(other.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("ext4"), std::string::npos);
  EXPECT_EQ(f.EnsureFilesystem(dev_, "ext4").value(), "ext4");
  EXPECT_EQ(Uuid(), uuid);
  EXPECT_TRUE(Head() == head) << "the first MiB changed";
}

TEST_F(FormatDeviceTest, AFileSystemWrittenBetweenProbeAndClaimIsNotOverwritten) {
  std::string uuid;
  RacingClaimer racing([&] {
    MakeExt4();
    uuid = Uuid();
  });
  DeviceFormatter f(exec_, racing);
  auto fs = f.EnsureFilesystem(dev_, "ext4");
  EXPECT_EQ(fs.status().code(), Code::kFailedPrecondition) << fs.status().ToString();
  EXPECT_NE(fs.status().message().find("now holds ext4"), std::string::npos);
  ASSERT_FALSE(uuid.empty());
  EXPECT_EQ(Uuid(), uuid);
}

TEST_F(FormatDeviceTest, ABlankDeviceHeldByAnotherProgramIsNotFormatted) {
  int held = open(dev_.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC);
  ASSERT_GE(held, 0);
  DeviceFormatter f(exec_, claimer_);
  auto fs = f.EnsureFilesystem(dev_, "ext4");
  close(held);
  EXPECT_EQ(fs.status().code(), Code::kFailedPrecondition) << fs.status().ToString();
  EXPECT_NE(fs.status().message().find("in use"), std::string::npos);
  EXPECT_EQ(Type(), "");
}

TEST_F(FormatDeviceTest, TheMkfsCommandOfXfsRefusesAnExistingFileSystem) {
  MakeExt4();
  std::string uuid = Uuid();
  auto r = exec_.Run(DeviceFormatter::MkfsCommand(dev_, "xfs"));
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0) << r->out;
  EXPECT_EQ(Type(), "ext4");
  EXPECT_EQ(Uuid(), uuid);
}

}  // namespace
}  // namespace pillar::node
