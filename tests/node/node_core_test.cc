#include "node/node_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>

#include "common/fake_exec.h"
#include "common/temp_dir.h"
#include "node/attach/iscsi.h"
#include "node/attach/nvme.h"
#include "node/selfheal.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;
using testing::FakeClock;
using testing::FakeMounter;
using testing::NvmeSysfsBuilder;
using testing::WriteText;

constexpr const char* kNqn = "nqn.2026-01.com.bhyoo.pillar:tank.pvc-1";
// Another volume's subsystem: a target of its own, like every pillar volume's.
constexpr const char* kNqn2 = "nqn.2026-01.com.bhyoo.pillar:tank.pvc-2";
constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:5d1b5a2e-8a5b-4bd5-9c1e-0c7b1f1a2b3c";

// Holds `name` on a thread of its own, as a running operation would, until
// destroyed.
class HeldLock {
 public:
  HeldLock(NamedLocks& locks, const std::string& name)
      : thread_([this, &locks, name] {
          auto guard = locks.Lock(name);
          held_.set_value();
          release_.get_future().wait();
        }) {
    held_.get_future().wait();
  }
  ~HeldLock() {
    release_.set_value();
    thread_.join();
  }
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

 private:
  std::promise<void> held_;
  std::promise<void> release_;
  std::thread thread_;
};

int CountCalls(FakeExec& exec, const std::string& prefix) {
  int n = 0;
  for (const auto& line : exec.CallLines()) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// One node: the real NodeCore and attachers over a temp sysfs, FakeExec and
// FakeMounter. Reopen() builds a fresh instance over the same state dir, as a
// restarted plugin would.
class Node {
 public:
  Node(const std::string& root, FakeExec& exec, FakeMounter& mounter)
      : fabrics_(exec),
        nvme_(exec, fabrics_, fs_, clock_, root + "/sys", root + "/hostnqn", Opts()),
        iscsi_(exec, fs_, clock_, root + "/sys", root + "/iscsi-nodes", Opts()),
        nfs_(exec),
        formatter_(exec, claimer_),
        records_(fs_, root + "/state/volumes"),
        core_(NodeDeps{fs_, mounter, Attachers{&nvme_, &iscsi_}, nfs_, formatter_, records_,
                       volume_locks_, connection_locks_, root + "/sys"}),
        healer_(records_, Attachers{&nvme_, &iscsi_}, mounter, nfs_, volume_locks_,
                connection_locks_) {
    EXPECT_TRUE(records_.Init().ok());
  }
  static AttachOptions Opts() {
    AttachOptions o;
    o.device_timeout_ms = 5000;
    return o;
  }
  NodeCore& core() { return core_; }
  SelfHealer& healer() { return healer_; }
  StageRecordStore& records() { return records_; }
  VolumeLocks& volume_locks() { return volume_locks_; }

 private:
  PosixFs fs_;
  FakeClock clock_;
  testing::ExecFabrics fabrics_;
  NvmeAttacher nvme_;
  IscsiAttacher iscsi_;
  NfsMounter nfs_;
  testing::FakeDeviceClaimer claimer_;
  DeviceFormatter formatter_;
  StageRecordStore records_;
  VolumeLocks volume_locks_;
  NamedLocks connection_locks_;
  NodeCore core_;
  SelfHealer healer_;
};

class NodeCoreTest : public ::testing::Test {
 protected:
  NodeCoreTest() : sys_(tmp_.Sub("sys")) {
    WriteText(tmp_.Sub("hostnqn"), std::string(kHostNqn) + "\n");
    std::filesystem::create_directories(tmp_.Sub("sys/class/nvme-subsystem"));
    std::filesystem::create_directories(tmp_.Sub("sys/block"));
    std::filesystem::create_directories(tmp_.Sub("sys/module/nvme_tcp"));  // loaded
    std::filesystem::create_directories(tmp_.Sub("kubelet"));
    // The target: connecting creates the subsystem, controller and the
    // namespaces this test exported.
    exec_.On({"nvme-fabrics"}, [this](const Command& c) {
      // "...,nqn=NQN,...": pvc-2's subsystem is nvme-subsys1.
      if (c.argv[1].find(std::string(",nqn=") + kNqn2 + ",") != std::string::npos) {
        sys_.AddSubsystem(1, kNqn2);
        sys_.AddController(1, 1, kNqn2, "10.0.0.1", 4420);
        sys_.AddNamespace(1, 1, 1, 1);
        return StatusOr<ExecResult>(ExecResult{0, "", ""});
      }
      return ConnectTarget();
    });
    exec_.On({"nvme", "disconnect"}, [this](const Command&) -> StatusOr<ExecResult> {
      sys_.RemoveSubsystem(0);
      for (int64_t nsid : exported_) sys_.RemoveNamespace(0, static_cast<int>(nsid));
      return ExecResult{0, "", ""};
    });
    exec_.OnOutput({"nvme", "ns-rescan"}, "");
    exec_.OnOutput({"blkid"}, "", 2);
    exec_.OnOutput({"mkfs.ext4"}, "");
    exec_.OnOutput({"resize2fs"}, "");
    node_ = std::make_unique<Node>(tmp_.path(), exec_, mounter_);
  }

  std::string Staging(const std::string& vol = "pvc-1") {
    return tmp_.Sub("kubelet/plugins/pillar/" + vol + "/globalmount");
  }
  std::string Target(const std::string& vol = "pvc-1") {
    return tmp_.Sub("kubelet/pods/u1/volumes/" + vol + "/mount");
  }

  // pvc-2 has a subsystem of its own unless `nqn` says otherwise.
  StageRequest Stage(const std::string& vol = "pvc-1", const std::string& nqn = "") {
    StageRequest r;
    r.volume_id = vol;
    r.staging_path = Staging(vol);
    r.context = {{"protocol", "nvmeof-tcp"},
                 {"targetID", !nqn.empty() ? nqn : vol == "pvc-2" ? kNqn2 : kNqn},
                 {"address", "10.0.0.1"},
                 {"port", "4420"},
                 {"fsType", "ext4"},
                 {"agentVolumeID", "tank/" + vol}};
    return r;
  }
  PublishRequest Publish(const std::string& vol = "pvc-1") {
    PublishRequest p;
    p.volume_id = vol;
    p.staging_path = Staging(vol);
    p.target_path = Target(vol);
    return p;
  }
  NodeCore& core() { return node_->core(); }
  // The stage record's state, or why there is none.
  std::string RecordState(const std::string& vol = "pvc-1") {
    auto rec = node_->records().Get(vol);
    return rec.ok() ? rec->state : rec.status().ToString();
  }
  StatusOr<ExecResult> ConnectTarget() {
    sys_.AddSubsystem(0, kNqn);
    sys_.AddController(0, 0, kNqn, "10.0.0.1", 4420);
    for (int64_t nsid : exported_) sys_.AddNamespace(0, static_cast<int>(nsid), 0, nsid);
    return ExecResult{0, "", ""};
  }

  TempDir tmp_;
  FakeExec exec_;
  FakeMounter mounter_;
  NvmeSysfsBuilder sys_;
  std::vector<int64_t> exported_{1};
  std::unique_ptr<Node> node_;
};

TEST_F(NodeCoreTest, StageConnectsFormatsTheBlankDeviceAndMounts) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  EXPECT_EQ(exec_.CallLines(), (std::vector<std::string>{
                                   std::string("nvme-fabrics transport=tcp,traddr=10.0.0.1,"
                                               "trsvcid=4420,nqn=") +
                                       kNqn + ",hostnqn=" + kHostNqn,
                                   "blkid -p -o export /dev/nvme0n1",
                                   // probed again under the exclusive claim
                                   "blkid -p -o export /dev/nvme0n1", "mkfs.ext4 /dev/nvme0n1"}));
  ASSERT_EQ(mounter_.mount_calls.size(), 1u);
  EXPECT_EQ(mounter_.mount_calls[0].source, "/dev/nvme0n1");
  EXPECT_EQ(mounter_.mount_calls[0].target, Staging());
  EXPECT_EQ(mounter_.mount_calls[0].fs_type, "ext4");
  EXPECT_FALSE(mounter_.mount_calls[0].bind);
  auto rec = node_->records().Get("pvc-1");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->state, "staged");
  EXPECT_EQ(rec->device, "/dev/nvme0n1");
  EXPECT_EQ(rec->fs_type, "ext4");
}

TEST_F(NodeCoreTest, StageIsIdempotent) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  exec_.ClearCalls();
  ASSERT_TRUE(core().Stage(Stage()).ok());
  EXPECT_TRUE(exec_.calls().empty());
  EXPECT_EQ(mounter_.mount_calls.size(), 1u);
}

TEST_F(NodeCoreTest, StageOfAVolumeStagedElsewhereIsAlreadyExists) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  StageRequest other = Stage();
  other.staging_path = tmp_.Sub("kubelet/elsewhere");
  EXPECT_EQ(core().Stage(other).code(), Code::kAlreadyExists);
}

TEST_F(NodeCoreTest, ExistingFilesystemIsMountedWithoutMkfs) {
  exec_.OnOutput({"blkid"}, "DEVNAME=/dev/nvme0n1\nTYPE=ext4\nUSAGE=filesystem\n");
  ASSERT_TRUE(core().Stage(Stage()).ok());
  EXPECT_EQ(CountCalls(exec_, "mkfs"), 0);
  EXPECT_EQ(mounter_.mount_calls.size(), 1u);
}

TEST_F(NodeCoreTest, MismatchedFilesystemIsFailedPreconditionNoMkfsNoMount) {
  exec_.OnOutput({"blkid"}, "DEVNAME=/dev/nvme0n1\nTYPE=xfs\nUSAGE=filesystem\n");
  Status s = core().Stage(Stage());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(CountCalls(exec_, "mkfs"), 0);
  EXPECT_TRUE(mounter_.mount_calls.empty());
}

TEST_F(NodeCoreTest, BlkidErrorMeansNoMkfsAndAnError) {
  exec_.OnOutput({"blkid"}, "", 4, "blkid: bad usage\n");
  EXPECT_FALSE(core().Stage(Stage()).ok());
  EXPECT_EQ(CountCalls(exec_, "mkfs"), 0);
  EXPECT_TRUE(mounter_.mount_calls.empty());
}

TEST_F(NodeCoreTest, InvalidRequestsRunNothing) {
  StageRequest r = Stage();
  r.volume_id = "";
  Status s = core().Stage(r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("volume_id"), std::string::npos);

  r = Stage();
  r.staging_path = "relative/path";
  s = core().Stage(r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("staging_target_path"), std::string::npos);

  r = Stage();
  r.staging_path = tmp_.Sub("kubelet/../etc");
  EXPECT_EQ(core().Stage(r).code(), Code::kInvalidArgument);

  for (auto [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"targetID", "nqn.2026-01.com.x:a b"},
                                                        {"targetID", "--help"},
                                                        {"address", "example.com"},
                                                        {"address", "10.0.0.1;reboot"},
                                                        {"port", "0"},
                                                        {"port", "70000"},
                                                        {"port", "44x"},
                                                        {"protocol", "fc"}}) {
    r = Stage();
    r.context[key] = value;
    s = core().Stage(r);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << key << "=" << value << " " << s.ToString();
  }
  r = Stage();
  r.context.erase("port");
  EXPECT_EQ(core().Stage(r).code(), Code::kInvalidArgument);
  r = Stage();
  r.mount_flags = {"noatime,exec"};
  EXPECT_EQ(core().Stage(r).code(), Code::kInvalidArgument);

  PublishRequest p = Publish();
  p.target_path = "";
  s = core().Publish(p);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("target_path"), std::string::npos);
  EXPECT_EQ(core().Unpublish("pvc-1", "/a/./b").code(), Code::kInvalidArgument);
  EXPECT_EQ(core().Unstage("pvc-1", "").code(), Code::kInvalidArgument);

  EXPECT_TRUE(exec_.calls().empty());
  EXPECT_TRUE(mounter_.mount_calls.empty());
}

TEST_F(NodeCoreTest, PublishOfAVolumeNotStagedIsFailedPrecondition) {
  Status s = core().Publish(Publish());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_TRUE(mounter_.mount_calls.empty());
}

TEST_F(NodeCoreTest, PublishBindMountsTheStagingPathAndIsIdempotent) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  PublishRequest p = Publish();
  p.read_only = true;
  ASSERT_TRUE(core().Publish(p).ok());
  ASSERT_EQ(mounter_.mount_calls.size(), 2u);
  EXPECT_TRUE(mounter_.mount_calls[1].bind);
  EXPECT_TRUE(mounter_.mount_calls[1].read_only);
  EXPECT_EQ(mounter_.mount_calls[1].source, Staging());
  EXPECT_EQ(mounter_.mount_calls[1].target, Target());
  EXPECT_TRUE(std::filesystem::is_directory(Target()));
  ASSERT_TRUE(core().Publish(p).ok());
  EXPECT_EQ(mounter_.mount_calls.size(), 2u);
}

TEST_F(NodeCoreTest, BlockStageMountsNothingAndPublishBindsTheDevice) {
  StageRequest r = Stage();
  r.block = true;
  ASSERT_TRUE(core().Stage(r).ok());
  EXPECT_TRUE(mounter_.mount_calls.empty());
  EXPECT_EQ(CountCalls(exec_, "blkid"), 0);  // a block volume's content is the pod's business
  PublishRequest p = Publish();
  p.block = true;
  p.target_path = tmp_.Sub("kubelet/pods/u1/volumeDevices/pvc-1/dev");
  ASSERT_TRUE(core().Publish(p).ok());
  ASSERT_EQ(mounter_.mount_calls.size(), 1u);
  EXPECT_EQ(mounter_.mount_calls[0].source, "/dev/nvme0n1");
  EXPECT_TRUE(mounter_.mount_calls[0].bind);
  EXPECT_TRUE(std::filesystem::is_regular_file(p.target_path));
  // A mount-access publish of a block-staged volume is refused.
  EXPECT_EQ(core().Publish(Publish()).code(), Code::kInvalidArgument);
}

// Seed 000: the mount point answers EACCES; unpublish must still unmount.
TEST_F(NodeCoreTest, UnpublishWithStatFailingEaccesStillUnmountsAndSucceeds) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  ASSERT_TRUE(core().Publish(Publish()).ok());
  mounter_.SetStatErr(Target(), EACCES);
  Status s = core().Unpublish("pvc-1", Target());
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_FALSE(mounter_.unmount_calls.empty());
  EXPECT_EQ(mounter_.unmount_calls[0].first, Target());
  EXPECT_EQ(mounter_.unmount_calls[0].second, UnmountMode::kNormal);
  EXPECT_FALSE(mounter_.IsMounted(Target()));
  EXPECT_FALSE(std::filesystem::exists(Target()));
}

TEST_F(NodeCoreTest, UnpublishEscalatesOnlyForADeadFilesystem) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  ASSERT_TRUE(core().Publish(Publish()).ok());
  mounter_.SetStatErr(Target(), ESTALE);
  mounter_.SetUnmountErr(Target(), UnmountMode::kNormal, ESTALE);
  ASSERT_TRUE(core().Unpublish("pvc-1", Target()).ok());
  ASSERT_EQ(mounter_.unmount_calls.size(), 2u);
  EXPECT_EQ(mounter_.unmount_calls[1].second, UnmountMode::kForce);
  EXPECT_FALSE(mounter_.IsMounted(Target()));
}

TEST_F(NodeCoreTest, BusyMountIsAnErrorNeverALazyDetach) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  ASSERT_TRUE(core().Publish(Publish()).ok());
  mounter_.SetUnmountErr(Target(), UnmountMode::kNormal, EBUSY);
  EXPECT_EQ(core().Unpublish("pvc-1", Target()).code(), Code::kFailedPrecondition);
  ASSERT_EQ(mounter_.unmount_calls.size(), 1u);
  EXPECT_TRUE(mounter_.IsMounted(Target()));
}

TEST_F(NodeCoreTest, NotMountedAndNotPresentIsSuccess) {
  EXPECT_TRUE(core().Unpublish("pvc-1", Target()).ok());
  EXPECT_TRUE(core().Unstage("pvc-1", Staging()).ok());
  EXPECT_TRUE(mounter_.unmount_calls.empty());
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeCoreTest, PresentButNotMountedIsRemovedWithoutUnmount) {
  std::filesystem::create_directories(Target());
  EXPECT_TRUE(core().Unpublish("pvc-1", Target()).ok());
  EXPECT_TRUE(mounter_.unmount_calls.empty());
  EXPECT_FALSE(std::filesystem::exists(Target()));
}

TEST_F(NodeCoreTest, UnstageUnmountsDisconnectsAndForgets) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  exec_.ClearCalls();
  ASSERT_TRUE(core().Unstage("pvc-1", Staging()).ok());
  EXPECT_FALSE(mounter_.IsMounted(Staging()));
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{std::string("nvme disconnect -n ") + kNqn}));
  EXPECT_EQ(node_->records().Get("pvc-1").status().code(), Code::kNotFound);
  // Again: nothing left to do.
  exec_.ClearCalls();
  EXPECT_TRUE(core().Unstage("pvc-1", Staging()).ok());
  EXPECT_TRUE(exec_.calls().empty());
}

// Issue 22, item 2: a target is one volume's. A context that names the target
// another staged volume uses (a controller or agent claiming a victim's NQN)
// is refused before anything connects, formats or mounts.
TEST_F(NodeCoreTest, ATargetStagedForAnotherVolumeIsNeverStagedAgain) {
  ASSERT_TRUE(core().Stage(Stage("pvc-1")).ok());
  exec_.ClearCalls();
  mounter_.mount_calls.clear();
  Status s = core().Stage(Stage("pvc-2", kNqn));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("staged for volume pvc-1"), std::string::npos) << s.message();
  EXPECT_TRUE(exec_.calls().empty());
  EXPECT_TRUE(mounter_.mount_calls.empty());
  EXPECT_FALSE(node_->records().Get("pvc-2").ok());
  // Its own target stages, and each unstage disconnects its own.
  ASSERT_TRUE(core().Stage(Stage("pvc-2")).ok());
  ASSERT_TRUE(core().Unstage("pvc-1", Staging("pvc-1")).ok());
  EXPECT_EQ(exec_.CallLines().back(), std::string("nvme disconnect -n ") + kNqn);
}

TEST_F(NodeCoreTest, UnstageRefusesToDisconnectADeviceStillMounted) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  ASSERT_TRUE(core().Publish(Publish()).ok());  // the CO "forgot" to unpublish
  Status s = core().Unstage("pvc-1", Staging());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(CountCalls(exec_, "nvme disconnect"), 0);
  EXPECT_TRUE(node_->records().Get("pvc-1").ok());
}

TEST_F(NodeCoreTest, StageRecordsSurviveARestart) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  node_.reset();
  node_ = std::make_unique<Node>(tmp_.path(), exec_, mounter_);  // a new plugin process
  auto rec = node_->records().Get("pvc-1");
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->target.target_id, kNqn);
  EXPECT_EQ(rec->device, "/dev/nvme0n1");
  ASSERT_EQ(node_->records().List().size(), 1u);
  ASSERT_TRUE(core().Publish(Publish()).ok());
  ASSERT_TRUE(core().Unpublish("pvc-1", Target()).ok());
  exec_.ClearCalls();
  ASSERT_TRUE(core().Unstage("pvc-1", Staging()).ok());
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{std::string("nvme disconnect -n ") + kNqn}));
}

TEST_F(NodeCoreTest, InterruptedStageIsFinishedByTheRetry) {
  exec_.OnOutput({"blkid"}, "", 8, "ambivalent\n");
  EXPECT_FALSE(core().Stage(Stage()).ok());
  auto rec = node_->records().Get("pvc-1");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->state, "attaching");  // left for Unstage / the retry
  exec_.OnOutput({"blkid"}, "", 2);
  ASSERT_TRUE(core().Stage(Stage()).ok());
  EXPECT_EQ(node_->records().Get("pvc-1")->state, "staged");
  EXPECT_EQ(CountCalls(exec_, "nvme-fabrics"), 1);
}

TEST_F(NodeCoreTest, StatsReportUsageAndAbnormalConditions) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  ASSERT_TRUE(core().Publish(Publish()).ok());
  auto st = core().Stats("pvc-1", Target());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_FALSE(st->abnormal);
  EXPECT_TRUE(st->has_usage);
  EXPECT_EQ(st->total_bytes, 1 << 30);

  mounter_.SetVfs(Target(), VfsStat{EACCES});
  st = core().Stats("pvc-1", Target());
  ASSERT_TRUE(st.ok()) << st.status().ToString();  // a condition, not an RPC error
  EXPECT_TRUE(st->abnormal);
  EXPECT_NE(st->message.find("Permission denied"), std::string::npos) << st->message;

  mounter_.SetVfs(Target(), VfsStat{ESTALE});
  st = core().Stats("pvc-1", Target());
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->abnormal);

  mounter_.SetVfs(Target(), VfsStat{});
  sys_.RemoveNamespace(0, 1);
  st = core().Stats("pvc-1", Target());
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->abnormal);
  EXPECT_NE(st->message.find("no block device"), std::string::npos) << st->message;

  EXPECT_EQ(core().Stats("pvc-9", Target()).status().code(), Code::kNotFound);
}

TEST_F(NodeCoreTest, BlockStatsReportTheDeviceSize) {
  StageRequest r = Stage();
  r.block = true;
  ASSERT_TRUE(core().Stage(r).ok());
  auto st = core().Stats("pvc-1", Staging());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_FALSE(st->abnormal);
  EXPECT_EQ(st->total_bytes, int64_t{2097152} * 512);
}

// CSI: NOT_FOUND when the volume is unknown (checked before the path) or is
// neither staged nor published at volume_path (csi-sanity's "some/path").
TEST_F(NodeCoreTest, StatsAndExpandOfAVolumeNotAtThePathAreNotFound) {
  EXPECT_EQ(core().Stats("pvc-9", "some/path").status().code(), Code::kNotFound);
  EXPECT_EQ(core().Expand("pvc-9", "some/path", 0).status().code(), Code::kNotFound);
  ASSERT_TRUE(core().Stage(Stage()).ok());
  ASSERT_TRUE(core().Publish(Publish()).ok());
  EXPECT_EQ(core().Stats("pvc-1", "some/path").status().code(), Code::kNotFound);
  std::filesystem::create_directories(tmp_.Sub("elsewhere"));
  auto st = core().Stats("pvc-1", tmp_.Sub("elsewhere"));  // a directory, not a mount
  EXPECT_EQ(st.status().code(), Code::kNotFound) << st.status().ToString();
  EXPECT_TRUE(core().Stats("pvc-1", Staging()).ok());
  EXPECT_TRUE(core().Stats("pvc-1", Target()).ok());
  // A known volume with a path that is not one stays INVALID_ARGUMENT.
  EXPECT_EQ(core().Expand("pvc-1", "some/path", 0).status().code(), Code::kInvalidArgument);
}

TEST_F(NodeCoreTest, ExpandRescansAndGrowsTheFilesystem) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  exec_.ClearCalls();
  auto size = core().Expand("pvc-1", Target(), 0);
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, int64_t{2097152} * 512);
  EXPECT_EQ(exec_.CallLines(),
            (std::vector<std::string>{"nvme ns-rescan /dev/nvme0", "resize2fs /dev/nvme0n1"}));
  EXPECT_EQ(core().Expand("pvc-1", Target(), int64_t{4} << 30).status().code(), Code::kUnavailable);
}

TEST_F(NodeCoreTest, SelfHealingRescansAMissingDeviceAndReconnects) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  exec_.ClearCalls();
  HealReport r = node_->healer().RunOnce();
  EXPECT_EQ(r.checked, 1);
  EXPECT_EQ(r.healthy, 1);
  EXPECT_TRUE(exec_.calls().empty());

  sys_.RemoveNamespace(0, 1);  // the namespace notification was missed
  r = node_->healer().RunOnce();
  EXPECT_EQ(r.repaired, 1);
  EXPECT_EQ(exec_.CallLines(), (std::vector<std::string>{"nvme ns-rescan /dev/nvme0"}));

  exec_.ClearCalls();
  sys_.RemoveSubsystem(0);  // the controller was lost for good
  r = node_->healer().RunOnce();
  EXPECT_EQ(r.repaired, 1);
  ASSERT_EQ(exec_.calls().size(), 1u);
  EXPECT_EQ(exec_.calls()[0][0], "nvme-fabrics");
  EXPECT_EQ(CountCalls(exec_, "nvme disconnect"), 0);
}

// CSI: a second call for a volume with an operation pending is ABORTED, and
// runs nothing.
TEST_F(NodeCoreTest, EveryOperationOnAVolumeAlreadyInProgressIsAborted) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  ASSERT_TRUE(core().Publish(Publish()).ok());
  exec_.ClearCalls();
  mounter_.mount_calls.clear();
  HeldLock in_progress(node_->volume_locks().calls(), "pvc-1");
  EXPECT_EQ(core().Stage(Stage()).code(), Code::kAborted);
  EXPECT_EQ(core().Publish(Publish()).code(), Code::kAborted);
  EXPECT_EQ(core().Unpublish("pvc-1", Target()).code(), Code::kAborted);
  EXPECT_EQ(core().Unstage("pvc-1", Staging()).code(), Code::kAborted);
  Status expand = core().Expand("pvc-1", Target(), 0).status();
  EXPECT_EQ(expand.code(), Code::kAborted);
  EXPECT_NE(expand.message().find("pvc-1"), std::string::npos) << expand.message();
  EXPECT_TRUE(exec_.calls().empty());
  EXPECT_TRUE(mounter_.mount_calls.empty());
  EXPECT_TRUE(mounter_.unmount_calls.empty());
  EXPECT_TRUE(mounter_.IsMounted(Target()));
  // Another volume is not held up.
  EXPECT_TRUE(core().Stage(Stage("pvc-2")).ok());
}

// The same, with a real NodeStage blocked in nvme connect: the lock must be
// held for the whole stage, not just taken and dropped.
TEST_F(NodeCoreTest, CallsDuringARunningStageAreAbortedAndConnectOnce) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> connects{0};
  exec_.On({"nvme-fabrics"}, [&](const Command&) -> StatusOr<ExecResult> {
    if (connects++ == 0) {
      entered.set_value();
      // Bounded, so a broken lock fails the test instead of hanging it.
      released.wait_for(std::chrono::seconds(10));
    }
    return ConnectTarget();
  });
  Status first;
  std::thread stage([&] { first = core().Stage(Stage()); });
  bool running =
      entered.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(running);
  if (running) {
    Status publish = core().Publish(Publish());
    EXPECT_EQ(publish.code(), Code::kAborted) << publish.ToString();
    Status again = core().Stage(Stage());
    EXPECT_EQ(again.code(), Code::kAborted) << again.ToString();
    Status unstage = core().Unstage("pvc-1", Staging());
    EXPECT_EQ(unstage.code(), Code::kAborted) << unstage.ToString();
  }
  release.set_value();
  stage.join();
  EXPECT_TRUE(first.ok()) << first.ToString();
  EXPECT_EQ(connects.load(), 1);
  EXPECT_EQ(RecordState(), "staged");
  EXPECT_TRUE(core().Publish(Publish()).ok());  // and once staged, publish works
}

// A self-heal pass is not a CSI call: a call that arrives during one waits
// for it and succeeds (csi-sanity saw ABORTED from a NodePublish that met a
// pass over the volume it had just staged), while a pass skips a volume a
// call holds.
TEST_F(NodeCoreTest, CallsWaitForASelfHealPassAndPassesSkipCalls) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  std::optional<HeldLock> pass;
  pass.emplace(node_->volume_locks().work(), "pvc-1");
  std::promise<Status> published;
  std::future<Status> result = published.get_future();
  std::thread publish([&] { published.set_value(core().Publish(Publish())); });
  // Still waiting, not ABORTED, while the pass holds the volume.
  EXPECT_EQ(result.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  pass.reset();
  publish.join();
  Status s = result.get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(mounter_.IsMounted(Target()));

  HeldLock call(node_->volume_locks().calls(), "pvc-1");
  HeldLock working(node_->volume_locks().work(), "pvc-1");
  HealReport r = node_->healer().RunOnce();
  EXPECT_EQ(r.checked, 1);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.repaired + r.healthy, 0);
}

// CSI: staged at this path but incompatible with the request: ALREADY_EXISTS,
// and the staged volume is left as it is.
TEST_F(NodeCoreTest, StageAtTheSamePathWithOtherParametersIsAlreadyExists) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  exec_.ClearCalls();

  StageRequest block = Stage();
  block.block = true;
  Status s = core().Stage(block);
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();
  EXPECT_NE(s.message().find("access type"), std::string::npos) << s.message();

  StageRequest other_target = Stage();
  other_target.context["targetID"] = "nqn.2026-01.com.bhyoo.pillar:tank.pvc-other";
  s = core().Stage(other_target);
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();

  StageRequest other_protocol = Stage();
  other_protocol.context["protocol"] = "iscsi";
  other_protocol.context["targetID"] = "iqn.2026-01.com.bhyoo.pillar:tank.pvc-1";
  other_protocol.context["port"] = "3260";
  s = core().Stage(other_protocol);
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();

  EXPECT_TRUE(exec_.calls().empty());
  EXPECT_EQ(mounter_.mount_calls.size(), 1u);
  EXPECT_TRUE(mounter_.unmount_calls.empty());
  auto rec = node_->records().Get("pvc-1");
  ASSERT_TRUE(rec.ok());
  EXPECT_FALSE(rec->block);
  EXPECT_EQ(rec->target.target_id, kNqn);
  EXPECT_EQ(rec->state, "staged");
}

// CSI: NodePublish before NodeStage has finished is FAILED_PRECONDITION. A
// stage that stopped half-way ("attaching") is not staged.
TEST_F(NodeCoreTest, PublishOfAnUnfinishedStageIsFailedPreconditionAndMountsNothing) {
  exec_.OnOutput({"blkid"}, "", 8, "ambivalent\n");
  ASSERT_FALSE(core().Stage(Stage()).ok());
  ASSERT_EQ(RecordState(), "attaching");
  Status s = core().Publish(Publish());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("still being staged"), std::string::npos) << s.message();
  EXPECT_TRUE(mounter_.mount_calls.empty());
  EXPECT_FALSE(std::filesystem::exists(Target()));

  PublishRequest block = Publish();
  block.block = true;
  EXPECT_EQ(core().Publish(block).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(mounter_.mount_calls.empty());
}

TEST_F(NodeCoreTest, PublishAtAnotherStagingPathIsFailedPrecondition) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  PublishRequest p = Publish();
  p.staging_path = tmp_.Sub("kubelet/elsewhere");
  EXPECT_EQ(core().Publish(p).code(), Code::kFailedPrecondition);
  EXPECT_EQ(mounter_.mount_calls.size(), 1u);  // the stage's own mount only
}

// Data safety: only a device blkid finds blank is ever formatted.
TEST_F(NodeCoreTest, DevicesThatAreNotBlankAreNeverFormattedNorMounted) {
  for (const char* probe :
       {"DEVNAME=/dev/nvme0n1\nPTUUID=6f1f0f6e\nPTTYPE=gpt\n", "DEVNAME=/dev/nvme0n1\nPTTYPE=dos\n",
        "DEVNAME=/dev/nvme0n1\nTYPE=LVM2_member\nUSAGE=raid\n",
        "DEVNAME=/dev/nvme0n1\nTYPE=crypto_LUKS\nUSAGE=crypto\n",
        "DEVNAME=/dev/nvme0n1\nTYPE=swap\nUSAGE=other\n",
        "DEVNAME=/dev/nvme0n1\nUUID=0b5b3d4e\n"}) {
    exec_.OnOutput({"blkid"}, probe);
    Status s = core().Stage(Stage());
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << probe << s.ToString();
    EXPECT_EQ(CountCalls(exec_, "mkfs"), 0) << probe;
    EXPECT_TRUE(mounter_.mount_calls.empty()) << probe;
    EXPECT_EQ(RecordState(), "attaching") << probe;
  }
  EXPECT_EQ(CountCalls(exec_, "blkid"), 6);
}

TEST_F(NodeCoreTest, ReadOnlyStageOfABlankDeviceNeverFormats) {
  StageRequest r = Stage();
  r.read_only = true;
  Status s = core().Stage(r);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("no file system to mount read-only"), std::string::npos)
      << s.message();
  EXPECT_EQ(CountCalls(exec_, "mkfs"), 0);
  EXPECT_TRUE(mounter_.mount_calls.empty());

  exec_.OnOutput({"blkid"}, "DEVNAME=/dev/nvme0n1\nTYPE=ext4\nUSAGE=filesystem\n");
  ASSERT_TRUE(core().Stage(r).ok());
  EXPECT_EQ(CountCalls(exec_, "mkfs"), 0);
  ASSERT_EQ(mounter_.mount_calls.size(), 1u);
  EXPECT_TRUE(mounter_.mount_calls[0].read_only);
}

TEST_F(NodeCoreTest, StagingPathHoldingAnotherDeviceIsFailedPreconditionNeverFormatted) {
  std::filesystem::create_directories(Staging());
  mounter_.AddMount({"/dev/sdz", Staging(), "ext4"});
  Status s = core().Stage(Stage());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(CountCalls(exec_, "blkid"), 0);
  EXPECT_EQ(CountCalls(exec_, "mkfs"), 0);
  EXPECT_TRUE(mounter_.mount_calls.empty());
}

// Seed 000 for every errno a dead or denied mount answers stat with: the
// unmount still happens, for publish and staging paths alike.
TEST_F(NodeCoreTest, UnmountHappensEvenWhenStatFails) {
  for (int err : {EACCES, EIO, ESTALE, ENOTCONN}) {
    SCOPED_TRACE(strerror(err));
    ASSERT_TRUE(core().Stage(Stage()).ok());
    ASSERT_TRUE(core().Publish(Publish()).ok());
    mounter_.SetStatErr(Target(), err);
    Status s = core().Unpublish("pvc-1", Target());
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(mounter_.IsMounted(Target()));

    mounter_.SetStatErr(Staging(), err);
    exec_.ClearCalls();
    s = core().Unstage("pvc-1", Staging());
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_FALSE(mounter_.IsMounted(Staging()));
    EXPECT_EQ(CountCalls(exec_, "nvme disconnect"), 1);
    EXPECT_EQ(node_->records().Get("pvc-1").status().code(), Code::kNotFound);
  }
}

// umount2 failing with what a dead or denied file system answers is
// escalated to MNT_FORCE; any other failure is not.
TEST_F(NodeCoreTest, UnmountFailingOnADeadFilesystemIsForced) {
  ASSERT_TRUE(core().Stage(Stage()).ok());
  for (int err : {EACCES, EPERM, EIO, ESTALE, ENOTCONN}) {
    SCOPED_TRACE(strerror(err));
    ASSERT_TRUE(core().Publish(Publish()).ok());
    mounter_.unmount_calls.clear();
    mounter_.SetUnmountErr(Target(), UnmountMode::kNormal, err);
    Status s = core().Unpublish("pvc-1", Target());
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(mounter_.unmount_calls.size(), 2u);
    EXPECT_EQ(mounter_.unmount_calls[1].second, UnmountMode::kForce);
    EXPECT_FALSE(mounter_.IsMounted(Target()));
  }
  ASSERT_TRUE(core().Publish(Publish()).ok());
  mounter_.unmount_calls.clear();
  mounter_.SetUnmountErr(Target(), UnmountMode::kNormal, ENOMEM);
  EXPECT_EQ(core().Unpublish("pvc-1", Target()).code(), Code::kInternal);
  EXPECT_EQ(mounter_.unmount_calls.size(), 1u);
  EXPECT_TRUE(mounter_.IsMounted(Target()));
}

// A path this mount namespace does not list but whose stat fails may be
// mounted under another spelling: umount2 is asked, not skipped.
TEST_F(NodeCoreTest, UnlistedPathWhoseStatFailsIsStillUnmounted) {
  for (int err : {EACCES, EIO, ESTALE, ENOTCONN}) {
    SCOPED_TRACE(strerror(err));
    mounter_.unmount_calls.clear();
    mounter_.SetStatErr(Target(), err);
    Status s = core().Unpublish("pvc-1", Target());
    EXPECT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(mounter_.unmount_calls.size(), 1u);
    EXPECT_EQ(mounter_.unmount_calls[0].first, Target());
  }
}

class NodeNfsTest : public NodeCoreTest {
 protected:
  NodeNfsTest() {
    exec_.On({"mount", "-t", "nfs4"}, [this](const Command& c) -> StatusOr<ExecResult> {
      mounter_.AddMount({c.argv[c.argv.size() - 2], c.argv.back(), "nfs4"});
      return ExecResult{0, "", ""};
    });
  }
  StageRequest NfsStage() {
    StageRequest r;
    r.volume_id = "pvc-n";
    r.staging_path = Staging("pvc-n");
    r.mount_flags = {"noatime", "nconnect=4"};
    r.context = {{"protocol", "nfs"},
                 {"targetID", "/exports/tank/pvc-n"},
                 {"address", "10.0.0.5"},
                 {"port", "2049"}};
    return r;
  }
};

TEST_F(NodeNfsTest, StageMountsTheExportAtTheStagingPath) {
  ASSERT_TRUE(core().Stage(NfsStage()).ok());
  EXPECT_EQ(
      exec_.CallLines(),
      (std::vector<std::string>{
          "mount -t nfs4 -o noatime,nconnect=4 10.0.0.5:/exports/tank/pvc-n " + Staging("pvc-n")}));
  ASSERT_TRUE(core().Stage(NfsStage()).ok());
  EXPECT_EQ(exec_.calls().size(), 1u);
  PublishRequest p = Publish("pvc-n");
  ASSERT_TRUE(core().Publish(p).ok());
  EXPECT_EQ(mounter_.mount_calls.back().source, Staging("pvc-n"));
  ASSERT_TRUE(core().Unpublish("pvc-n", p.target_path).ok());
  ASSERT_TRUE(core().Unstage("pvc-n", Staging("pvc-n")).ok());
  EXPECT_FALSE(mounter_.IsMounted(Staging("pvc-n")));
  EXPECT_EQ(exec_.calls().size(), 1u);  // no disconnect command for NFS
}

TEST_F(NodeNfsTest, BadExportPathRunsNothing) {
  StageRequest r = NfsStage();
  r.context["targetID"] = "/exports/../etc";
  EXPECT_EQ(core().Stage(r).code(), Code::kInvalidArgument);
  r.context["targetID"] = "/exports/a,b";
  EXPECT_EQ(core().Stage(r).code(), Code::kInvalidArgument);
  r = NfsStage();
  r.block = true;
  EXPECT_EQ(core().Stage(r).code(), Code::kInvalidArgument);
  EXPECT_TRUE(exec_.calls().empty());
}

TEST_F(NodeNfsTest, SelfHealingRemountsAVanishedNfsStagingMount) {
  ASSERT_TRUE(core().Stage(NfsStage()).ok());
  mounter_.Unmount(Staging("pvc-n"), UnmountMode::kNormal);
  exec_.ClearCalls();
  EXPECT_EQ(node_->healer().RunOnce().repaired, 1);
  EXPECT_EQ(CountCalls(exec_, "mount -t nfs4"), 1);
  EXPECT_TRUE(mounter_.IsMounted(Staging("pvc-n")));
}

TEST_F(NodeCoreTest, ChapVolumeNeedsItsSecretsAndConnectsWithTheKey) {
  const std::string key = "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2:";
  StageRequest r = Stage();
  r.context["auth"] = "chap";
  Status s = core().Stage(r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("secrets.dhchapKey"), std::string::npos) << s.message();
  EXPECT_TRUE(exec_.CallLines().empty()) << "nothing ran";
  r.secrets = {{"dhchapKey", "DHHC-1:00:bm90LWEta2V5:"}};
  s = core().Stage(r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message().find("bm90LWEta2V5"), std::string::npos);
  r.secrets = {{"dhchapKey", key}};
  s = core().Stage(r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_FALSE(exec_.CallLines().empty());
  // The key goes to the kernel's connect device only, never on an argv.
  EXPECT_NE(exec_.CallLines()[0].find("nvme-fabrics "), std::string::npos);
  EXPECT_NE(exec_.CallLines()[0].find(",dhchap_secret=" + key), std::string::npos);
  for (const auto& argv : exec_.calls()) {
    if (argv[0] == "nvme-fabrics") continue;
    for (const auto& arg : argv) EXPECT_EQ(arg.find(key), std::string::npos) << arg;
  }
  // The stage record (on disk, read back after a restart) holds no secret.
  auto rec = node_->records().Get("pvc-1");
  ASSERT_TRUE(rec.ok());
  EXPECT_TRUE(rec->target.credentials.empty());
  for (const auto& entry : std::filesystem::recursive_directory_iterator(tmp_.path())) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find(key), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace pillar::node
