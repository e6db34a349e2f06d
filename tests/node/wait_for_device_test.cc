#include "node/attach/wait_for_device.h"

#include <gtest/gtest.h>

#include "node_test_util.h"

namespace pillar::node {
namespace {

using testing::FakeClock;

constexpr const char* kTarget = "namespace 1 of subsystem nqn.2026-01.com.x:v at 10.0.0.1:4420";

// A scripted target: the device shows up once `appear_after_rescans` rescans
// have run; rescans fail while `failing_rescans` lasts.
class NodeWaitForDevice : public ::testing::Test {
 protected:
  AttachSteps Steps() {
    AttachSteps s;
    s.target = kTarget;
    s.rescan_name = "nvme ns-rescan";
    s.connected = [this] { return connected_; };
    s.connect = [this] {
      ++connects_;
      if (!connect_status_.ok()) return connect_status_;
      connected_ = true;
      return Status::Ok();
    };
    s.find_device = [this]() -> std::optional<std::string> {
      ++finds_;
      if (rescans_ >= appear_after_rescans_) return std::string("/dev/nvme0n1");
      return std::nullopt;
    };
    s.rescan = [this]() -> StatusOr<int> {
      rescan_times_.push_back(clock_.elapsed().count());
      if (failing_rescans_ > 0) {
        --failing_rescans_;
        return Internal("nvme ns-rescan /dev/nvme0: exit 1: Resource busy");
      }
      ++rescans_;
      return controllers_;
    };
    s.describe_connection = [] { return std::string("connected through 1 controller(s)"); };
    return s;
  }
  AttachOptions Options() {
    AttachOptions o;
    o.device_timeout_ms = 5000;
    o.poll_interval_ms = 500;
    o.rescan_after_ms = 2000;
    return o;
  }
  StatusOr<std::string> Wait() { return ConnectAndWaitForDevice(clock_, Options(), Steps()); }

  FakeClock clock_;
  bool connected_ = true;
  Status connect_status_;
  int connects_ = 0;
  int finds_ = 0;
  int rescans_ = 0;
  int appear_after_rescans_ = 0;
  int failing_rescans_ = 0;
  int controllers_ = 1;
  std::vector<int64_t> rescan_times_;
};

TEST_F(NodeWaitForDevice, PresentDeviceIsReturnedWithoutConnectOrRescan) {
  auto dev = Wait();
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/nvme0n1");
  EXPECT_EQ(connects_, 0);
  EXPECT_TRUE(rescan_times_.empty());
  EXPECT_EQ(clock_.elapsed().count(), 0);
}

// Seed 003: connected, but the namespace notification was missed.
TEST_F(NodeWaitForDevice, DeviceAppearsOnlyAfterARescanOfAConnectedTarget) {
  appear_after_rescans_ = 1;
  auto dev = Wait();
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/nvme0n1");
  EXPECT_EQ(connects_, 0);
  EXPECT_EQ(rescan_times_, (std::vector<int64_t>{0}));  // at once: it was connected before
  EXPECT_EQ(clock_.elapsed().count(), 500);             // found on the next poll
}

TEST_F(NodeWaitForDevice, FreshConnectGivesTheKernelRescanAfterBeforeRescanning) {
  connected_ = false;
  appear_after_rescans_ = 1;
  auto dev = Wait();
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(connects_, 1);
  EXPECT_EQ(rescan_times_, (std::vector<int64_t>{2000}));
  EXPECT_EQ(clock_.elapsed().count(), 2500);
}

TEST_F(NodeWaitForDevice, FailedConnectIsReturnedAndNothingIsAwaited) {
  connected_ = false;
  connect_status_ = Unavailable("nvme connect to nqn.2026-01.com.x:v failed (exit 1)");
  auto dev = Wait();
  EXPECT_EQ(dev.status().code(), Code::kUnavailable);
  EXPECT_EQ(dev.status().message(), connect_status_.message());
  EXPECT_EQ(finds_, 0);
  EXPECT_EQ(clock_.elapsed().count(), 0);
}

TEST_F(NodeWaitForDevice, DeviceThatNeverAppearsIsDeadlineExceededNamingTheTarget) {
  appear_after_rescans_ = 1000;
  auto dev = Wait();
  ASSERT_EQ(dev.status().code(), Code::kDeadlineExceeded) << dev.status().ToString();
  EXPECT_EQ(dev.status().message(),
            std::string("no block device for ") + kTarget +
                " after 5s: connected through 1 controller(s), 3 nvme ns-rescan round(s) found "
                "nothing");
  EXPECT_EQ(rescan_times_, (std::vector<int64_t>{0, 2000, 4000}));  // one per interval
  EXPECT_EQ(clock_.elapsed().count(), 5000);
}

TEST_F(NodeWaitForDevice, RoundsWithNothingToRescanAreNotCounted) {
  appear_after_rescans_ = 1000;
  controllers_ = 0;  // no live controller yet
  auto dev = Wait();
  ASSERT_EQ(dev.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(dev.status().message().find(", 0 nvme ns-rescan round(s)"), std::string::npos)
      << dev.status().message();
  EXPECT_EQ(rescan_times_.size(), 3u);  // still tried every interval
}

TEST_F(NodeWaitForDevice, RescanFailuresDoNotAbortTheWait) {
  failing_rescans_ = 2;
  appear_after_rescans_ = 1;
  auto dev = Wait();
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/nvme0n1");
  EXPECT_EQ(rescan_times_, (std::vector<int64_t>{0, 2000, 4000}));
}

TEST_F(NodeWaitForDevice, RescanFailuresAreNamedInTheTimeoutError) {
  failing_rescans_ = 1000;
  appear_after_rescans_ = 1;
  auto dev = Wait();
  ASSERT_EQ(dev.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(dev.status().message().find(
                "3 nvme ns-rescan round(s) found nothing (3 failed, the last with: nvme ns-rescan "
                "/dev/nvme0: exit 1: Resource busy)"),
            std::string::npos)
      << dev.status().message();
}

}  // namespace
}  // namespace pillar::node
