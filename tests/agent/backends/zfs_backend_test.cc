#include "agent/backends/zfs_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "agent/backends/backend_test_util.h"
#include "common/fake_exec.h"
#include "common/temp_dir.h"

namespace pillar::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;

// `zfs list -Hp -o name,type,volsize,refquota,volblocksize,pillar-csi:volume-uid,
// pillar-csi:root-pending,mountpoint -r -d 1 -t volume,filesystem tank/pillar`
// in the format of OpenZFS 2.1: tab separated, exact numbers, "-" where a
// property does not apply or a user property is unset, refquota 0 for none.
// The parent dataset itself comes first.
constexpr char kList[] =
    "tank/pillar\tfilesystem\t-\t-\t0\t-\t-\t-\t/tank/pillar\n"
    "tank/pillar/"
    "vol-1\tvolume\t-\t10737418240\t-\t16384\t11111111-2222-4333-8444-555555555555\t-\t-\n"
    "tank/pillar/fs-1\tfilesystem\t-\t-\t5368709120\t-\t11111111-2222-4333-8444-555555555555\t-\t/"
    "tank/"
    "pillar/fs-1\n"
    "tank/pillar/"
    "legacy\tfilesystem\t-\t-\t1073741824\t-\t11111111-2222-4333-8444-555555555555\t-\tlegacy\n";
constexpr char kListParentOnly[] = "tank/pillar\tfilesystem\t-\t-\t0\t-\t-\t-\t/tank/pillar\n";
constexpr char kListCmd[] =
    "zfs list -Hp -o "
    "name,type,pillar-csi:origin,volsize,refquota,volblocksize,pillar-csi:volume-uid,pillar-csi:"
    "root-pending,"
    "mountpoint -r "
    "-d 1 -t "
    "volume,filesystem -- tank/pillar";

// PosixFs, except that the zvol device nodes named in `present` exist.
class ZvolFs : public PosixFs {
 public:
  bool Exists(const std::string& path) override {
    return present.count(path) != 0 || PosixFs::Exists(path);
  }
  std::set<std::string> present;
};

class ZfsBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<ZfsBackend> Backend() {
    return std::make_unique<ZfsBackend>("tank/pillar", exec_, fs_);
  }
  // zfs list answers `before` until a command starting with `change` ran.
  void OnListChangingAfter(std::vector<std::string> change, const std::string& before,
                           const std::string& after) {
    auto changed = std::make_shared<bool>(false);
    exec_.On(std::move(change), [changed](const Command&) -> StatusOr<ExecResult> {
      *changed = true;
      return ExecResult{0, "", ""};
    });
    exec_.On({"zfs", "list"}, [changed, before, after](const Command&) -> StatusOr<ExecResult> {
      return ExecResult{0, *changed ? after : before, ""};
    });
  }

  testing::FakeExec exec_;
  ZvolFs fs_;
};

TEST_F(ZfsBackendTest, BadDatasetNamesRefuseEverything) {
  for (const char* bad : {"../x", "-rf", "a;b", "", "tank//x", "/tank", "tank/", "tank@snap"}) {
    SCOPED_TRACE(bad);
    ZfsBackend b(bad, exec_, fs_);
    ExpectEveryOperationRefused(b);
  }
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(ZfsBackendTest, RefusesBadVolumeNamesBeforeRunningAnything) {
  auto b = Backend();
  for (const char* bad : {"../x", "-rf", "a;b", "", "x/y", "vol@snap"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(b->Create(bad, kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
              Code::kInvalidArgument);
    EXPECT_EQ(b->Expand(bad, kGiB, kOwner).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Delete(bad, kOwner).code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Get(bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Expose(bad, VolumeMode::kBlock).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Unexpose(bad).code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(b->Create("v", 0, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
            Code::kInvalidArgument);
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(ZfsBackendTest, ParametersAreAllowlistedAndStrictlyFormed) {
  auto b = Backend();
  struct Case {
    VolumeMode mode;
    std::string key, value;
  };
  for (const Case& c : std::vector<Case>{
           {VolumeMode::kBlock, "mountpoint", "/etc"},
           {VolumeMode::kBlock, "volmode", "geom"},
           {VolumeMode::kFilesystem, "sharenfs", "on"},
           {VolumeMode::kBlock, "compression", "lz4;rm"},
           {VolumeMode::kBlock, "compression", "-o"},
           {VolumeMode::kBlock, "compression", "lz4 -o mountpoint=/"},
           {VolumeMode::kBlock, "recordsize", "1M"},
           {VolumeMode::kFilesystem, "volblocksize", "16K"},
           {VolumeMode::kFilesystem, "thin", "true"},
           {VolumeMode::kBlock, "thin", "yes"},
           {VolumeMode::kBlock, "volblocksize", "3K"},
           {VolumeMode::kBlock, "volblocksize", "1G"},
       }) {
    SCOPED_TRACE(c.key + "=" + c.value);
    auto r = b->Create("v", kGiB, c.mode, {{c.key, c.value}}, kOwner, std::nullopt);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.key));
  }
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(ZfsBackendTest, CreateZvol) {
  OnListChangingAfter(
      {"zfs", "create"}, kList,
      std::string(kList) +
          "tank/pillar/"
          "vol-2\tvolume\t-\t1073741824\t-\t16384\t11111111-2222-4333-8444-555555555555\t-\t-\n");
  auto vol = Backend()->Create("vol-2", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->size_bytes, kGiB);
  EXPECT_EQ(vol->mode, VolumeMode::kBlock);
  EXPECT_EQ(vol->device_path, "/dev/zvol/tank/pillar/vol-2");
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(kListCmd,
                  "zfs create -V 1073741824 -o volmode=dev -o "
                  "pillar-csi:volume-uid=11111111-2222-4333-8444-555555555555 -- tank/pillar/vol-2",
                  kListCmd));
}

TEST_F(ZfsBackendTest, CreateSparseZvolWithPropertiesRoundsToTheBlockSize) {
  OnListChangingAfter(
      {"zfs", "create"}, kList,
      std::string(kList) +
          "tank/pillar/"
          "vol-2\tvolume\t-\t1073807360\t-\t65536\t11111111-2222-4333-8444-555555555555\t-\t-\n");
  auto vol = Backend()->Create(
      "vol-2", kGiB + 1, VolumeMode::kBlock,
      {{"thin", "true"}, {"compression", "zstd-3"}, {"volblocksize", "64K"}}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(
          kListCmd,
          "zfs create -s -V 1073807360 -o volmode=dev -o compression=zstd-3 "
          "-o volblocksize=64K -o pillar-csi:volume-uid=11111111-2222-4333-8444-555555555555 -- "
          "tank/pillar/vol-2",
          kListCmd));
}

TEST_F(ZfsBackendTest, CreateFilesystemWithRefquota) {
  OnListChangingAfter(
      {"zfs", "create"}, kList,
      std::string(kList) +
          "tank/pillar/"
          "fs-2\tfilesystem\t-\t-\t2147483648\t-\t11111111-2222-4333-8444-555555555555\t-\t/"
          "tank/pillar/fs-2\n");
  auto vol = Backend()->Create("fs-2", 2 * kGiB, VolumeMode::kFilesystem,
                               {{"recordsize", "1M"}, {"atime", "off"}}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->mode, VolumeMode::kFilesystem);
  EXPECT_EQ(vol->size_bytes, 2 * kGiB);
  EXPECT_EQ(vol->export_path, "/tank/pillar/fs-2");
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(kListCmd,
                  "zfs create -o refquota=2147483648 -o atime=off -o recordsize=1M -o "
                  "pillar-csi:volume-uid=11111111-2222-4333-8444-555555555555 -- tank/pillar/fs-2",
                  kListCmd));
}

TEST_F(ZfsBackendTest, CreateIsIdempotentAndRefusesMismatches) {
  exec_.OnOutput({"zfs", "list"}, kList);
  auto b = Backend();
  auto same = b->Create("vol-1", 10 * kGiB, VolumeMode::kBlock, {{"compression", "lz4"}}, kOwner,
                        std::nullopt);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->size_bytes, 10 * kGiB);
  EXPECT_TRUE(b->Create("fs-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  auto bigger = b->Create("vol-1", 20 * kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(bigger.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(bigger.status().message(), HasSubstr("tank/pillar/vol-1"));
  auto mode = b->Create("fs-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(mode.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(mode.status().message(), HasSubstr("tank/pillar/fs-1"));
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line, kListCmd);
}

TEST_F(ZfsBackendTest, CreateReportsZfsFailure) {
  exec_.OnOutput({"zfs", "list"}, kListParentOnly);
  exec_.OnOutput({"zfs", "create"}, "", 1, "cannot create 'tank/pillar/big': out of space\n");
  auto r = Backend()->Create("big", 100 * kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("zfs create -V"));
  EXPECT_THAT(r.status().message(), HasSubstr("out of space"));
}

TEST_F(ZfsBackendTest, ExpandZvolRoundsToVolblocksizeAndNeverShrinks) {
  OnListChangingAfter(
      {"zfs", "set"}, kList,
      "tank/pillar/"
      "vol-1\tvolume\t-\t10737434624\t-\t16384\t11111111-2222-4333-8444-555555555555\t-\t-\n");
  auto b = Backend();
  auto same = b->Expand("vol-1", 10 * kGiB - 100, kOwner);  // rounds to the current size
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->size_bytes, 10 * kGiB);
  auto shrink = b->Expand("vol-1", 5 * kGiB, kOwner);
  EXPECT_EQ(shrink.status().code(), Code::kOutOfRange);
  EXPECT_THAT(shrink.status().message(), HasSubstr("tank/pillar/vol-1"));
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kListCmd, kListCmd));

  exec_.ClearCalls();
  auto grown = b->Expand("vol-1", 10 * kGiB + 1, kOwner);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(grown->size_bytes, 10 * kGiB + 16384);
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kListCmd, "zfs set volsize=10737434624 tank/pillar/vol-1", kListCmd));
}

TEST_F(ZfsBackendTest, ExpandFilesystemRaisesRefquota) {
  OnListChangingAfter(
      {"zfs", "set"}, kList,
      "tank/pillar/"
      "fs-1\tfilesystem\t-\t-\t10737418240\t-\t11111111-2222-4333-8444-555555555555\t-\t/"
      "tank/pillar/fs-1\n");
  auto grown = Backend()->Expand("fs-1", 10 * kGiB, kOwner);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(grown->size_bytes, 10 * kGiB);
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kListCmd, "zfs set refquota=10737418240 tank/pillar/fs-1", kListCmd));
  EXPECT_EQ(Backend()->Expand("nope", kGiB, kOwner).status().code(), Code::kNotFound);
}

TEST_F(ZfsBackendTest, DeleteDestroysWithoutRecursionOrForce) {
  exec_.OnOutput({"zfs", "list"}, kList);
  exec_.OnOutput({"zfs", "destroy"}, "");
  ASSERT_TRUE(Backend()->Delete("vol-1", kOwner).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kListCmd, "zfs destroy -- tank/pillar/vol-1"));
  exec_.ClearCalls();
  EXPECT_TRUE(Backend()->Delete("nope", kOwner).ok());  // missing is success
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kListCmd));
}

// Issue 11, ZFS form: a child dataset without pillar-csi:volume-uid (or
// with another lifecycle's) is never adopted, grown or destroyed.
TEST_F(ZfsBackendTest, OwnershipPropertyGuardsCreateExpandDelete) {
  const std::string list = std::string(kListParentOnly) +
                           "tank/pillar/precious\tvolume\t-\t1073741824\t-\t16384\t-\t-\t-\n"
                           "tank/pillar/theirs\tfilesystem\t-\t-\t1073741824\t-\t" +
                           kOtherOwner + "\t-\t/tank/pillar/theirs\n";
  exec_.OnOutput({"zfs", "list"}, list);
  auto b = Backend();
  auto adopt = b->Create("precious", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(adopt.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(adopt.status().message(),
              HasSubstr("dataset tank/pillar/precious exists and is not pillar's"));
  EXPECT_EQ(
      b->Create("theirs", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).status().code(),
      Code::kAlreadyExists);
  for (const char* name : {"precious", "theirs"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(b->Expand(name, 2 * kGiB, kOwner).status().code(), Code::kFailedPrecondition);
    EXPECT_EQ(b->Delete(name, kOwner).code(), Code::kFailedPrecondition);
  }
  auto got = b->Get("theirs");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->owner_uid, kOtherOwner);
  EXPECT_EQ(b->SetOwner("theirs", kOwner).code(), Code::kAlreadyExists);
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line, kListCmd);

  exec_.OnOutput({"zfs", "set"}, "");
  ASSERT_TRUE(b->SetOwner("precious", kOwner).ok());
  EXPECT_EQ(exec_.CallLines().back(),
            "zfs set pillar-csi:volume-uid=" + std::string(kOwner) + " tank/pillar/precious");
}

TEST_F(ZfsBackendTest, AParentCarryingTheOwnershipPropertyIsRefused) {
  // User properties inherit: every child would look like the parent's.
  exec_.OnOutput({"zfs", "list"}, std::string("tank/pillar\tfilesystem\t-\t-\t0\t-\t") + kOwner +
                                      "\t-\t/tank/pillar\n");
  auto r = Backend()->Create("vol-9", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("zfs inherit pillar-csi:volume-uid tank/pillar"));
  EXPECT_EQ(Backend()->List().status().code(), Code::kFailedPrecondition);
}

// A `zfs list` row of file system fs-2 (2 GiB, kOwner's) mounted at
// `mountpoint`, with pillar-csi:root-pending `pending` ("-": none).
std::string Fs2Row(const std::string& pending, const std::string& mountpoint) {
  return std::string("tank/pillar/fs-2\tfilesystem\t-\t-\t2147483648\t-\t") + kOwner + "\t" +
         pending + "\t" + mountpoint + "\n";
}

TEST_F(ZfsBackendTest, CreateFilesystemRecordsTheRootAppliesItThenClearsIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  testing::TempDir mnt;  // where zfs mounted the new file system
  OnListChangingAfter({"zfs", "create"}, kList,
                      std::string(kList) + Fs2Row("2770:1000:2000", mnt.path()));
  exec_.OnOutput({"zfs", "get"}, "yes\n");
  exec_.OnOutput({"zfs", "inherit"}, "");
  auto vol = Backend()->Create("fs-2", 2 * kGiB, VolumeMode::kFilesystem, {}, kOwner,
                               VolumeRoot{02770, 1000, 2000});
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->export_path, mnt.path());
  VolumeRoot st = RootOf(mnt.path());
  EXPECT_EQ(st.mode, 02770u);
  EXPECT_EQ(st.uid, 1000u);
  EXPECT_EQ(st.gid, 2000u);
  // Recorded by the same zfs create that marks it, cleared only once applied.
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(kListCmd,
                  "zfs create -o refquota=2147483648 -o pillar-csi:root-pending=2770:1000:2000 "
                  "-o pillar-csi:volume-uid=11111111-2222-4333-8444-555555555555 -- "
                  "tank/pillar/fs-2",
                  kListCmd, "zfs get -Hp -o value mounted -- tank/pillar/fs-2",
                  "zfs inherit pillar-csi:root-pending tank/pillar/fs-2"));
}

TEST_F(ZfsBackendTest, ARetryFinishesAPendingRootAndNeverTouchesACompleteOne) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  testing::TempDir mnt;
  // The agent died after zfs create: marked, its root still pending, and
  // (after a reboot, say) not mounted.
  exec_.OnOutput({"zfs", "list"},
                 std::string(kListParentOnly) + Fs2Row("0770:1000:1000", mnt.path()));
  exec_.OnOutput({"zfs", "get"}, "no\n");
  exec_.OnOutput({"zfs", "mount"}, "");
  exec_.OnOutput({"zfs", "inherit"}, "");
  const VolumeRoot root{0770, 1000, 1000};
  auto b = Backend();
  EXPECT_EQ(b->Expose("fs-2", VolumeMode::kFilesystem).status().code(), Code::kFailedPrecondition);
  exec_.ClearCalls();
  auto vol = b->Create("fs-2", 2 * kGiB, VolumeMode::kFilesystem, {}, kOwner, root);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  VolumeRoot st = RootOf(mnt.path());
  EXPECT_EQ(st.mode, 0770u);
  EXPECT_EQ(st.uid, 1000u);
  EXPECT_EQ(st.gid, 1000u);
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kListCmd, "zfs get -Hp -o value mounted -- tank/pillar/fs-2",
                          "zfs mount -- tank/pillar/fs-2",
                          "zfs inherit pillar-csi:root-pending tank/pillar/fs-2"));

  // Complete now; its users changed the root since. A retry changes nothing.
  exec_.OnOutput({"zfs", "list"}, std::string(kListParentOnly) + Fs2Row("-", mnt.path()));
  ASSERT_TRUE(PosixFs().Chmod(mnt.path(), 0700).ok());
  ASSERT_TRUE(PosixFs().Chown(mnt.path(), 2000, 3000).ok());
  exec_.ClearCalls();
  ASSERT_TRUE(b->Create("fs-2", 2 * kGiB, VolumeMode::kFilesystem, {}, kOwner, root).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kListCmd));
  st = RootOf(mnt.path());
  EXPECT_EQ(st.mode, 0700u);
  EXPECT_EQ(st.uid, 2000u);
  EXPECT_EQ(st.gid, 3000u);
}

TEST_F(ZfsBackendTest, APendingRootIsNeverExposedAndABadOneIsRefused) {
  exec_.OnOutput({"zfs", "list"}, std::string(kListParentOnly) + Fs2Row("0770:0:0", "/tank/x"));
  auto r = Backend()->Expose("fs-2", VolumeMode::kFilesystem);
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("mode 0770, owner 0:0 still to apply"));
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kListCmd)) << "neither mounted nor exported";

  for (const char* bad : {"770:0:0", "0770:0", "0770:-1:0", "0770:4294967295:0", "0778:0:0",
                          "07770:0:0", "0770:0:0:0", "yes"}) {
    exec_.OnOutput({"zfs", "list"}, std::string(kListParentOnly) + Fs2Row(bad, "/tank/x"));
    auto got = Backend()->Get("fs-2");
    EXPECT_EQ(got.status().code(), Code::kInternal) << bad;
    EXPECT_THAT(got.status().message(), HasSubstr("pillar-csi:root-pending")) << bad;
  }

  // Inherited from the parent, it would hold back every child.
  exec_.OnOutput({"zfs", "list"},
                 "tank/pillar\tfilesystem\t-\t-\t0\t-\t-\t0777:0:0\t/tank/pillar\n");
  auto parent = Backend()->List();
  EXPECT_EQ(parent.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(parent.status().message(),
              HasSubstr("zfs inherit pillar-csi:root-pending tank/pillar"));

  // A zvol has no root directory.
  exec_.ClearCalls();
  EXPECT_EQ(Backend()
                ->Create("vol-9", kGiB, VolumeMode::kBlock, {}, kOwner, VolumeRoot{0770, 0, 0})
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

// A volume with snapshots is hidden instead (see ZfsSnapshotTest); other
// children (a dataset made below it by hand) and users refuse the delete.
TEST_F(ZfsBackendTest, DeleteOfAVolumeWithChildrenOrUsersIsFailedPrecondition) {
  exec_.OnOutput({"zfs", "list"}, kList);
  exec_.OnOutput({"zfs", "list", "-Hp", "-t", "snapshot"}, "");
  exec_.OnOutput({"zfs", "destroy"}, "", 1,
                 "cannot destroy 'tank/pillar/vol-1': volume has children\n"
                 "use '-r' to destroy the following datasets:\n"
                 "tank/pillar/vol-1/daily\n");
  Status s = Backend()->Delete("vol-1", kOwner);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("has children"));
  EXPECT_THAT(s.message(), HasSubstr("tank/pillar/vol-1/daily"));

  exec_.OnOutput({"zfs", "destroy"}, "", 1,
                 "cannot destroy 'tank/pillar/vol-1': dataset is busy\n");
  EXPECT_EQ(Backend()->Delete("vol-1", kOwner).code(), Code::kFailedPrecondition);

  exec_.OnOutput({"zfs", "destroy"}, "", 1, "cannot destroy 'tank/pillar/vol-1': I/O error\n");
  Status io = Backend()->Delete("vol-1", kOwner);
  EXPECT_EQ(io.code(), Code::kInternal);
  EXPECT_THAT(io.message(), HasSubstr("zfs destroy -- tank/pillar/vol-1"));
  EXPECT_THAT(io.message(), HasSubstr("I/O error"));

  // Destroyed by someone else between the list and the destroy.
  exec_.OnOutput({"zfs", "destroy"}, "", 1,
                 "cannot open 'tank/pillar/vol-1': dataset does not exist\n");
  EXPECT_TRUE(Backend()->Delete("vol-1", kOwner).ok());
}

// A zvol udev still probes (just unexported, just copied) is busy for a
// moment: the delete waits for udev once and tries again.
TEST_F(ZfsBackendTest, ABusyZvolIsDestroyedOnceUdevSettled) {
  exec_.OnOutput({"zfs", "list"}, kList);
  exec_.OnOutput({"zfs", "list", "-Hp", "-t", "snapshot"}, "");
  exec_.OnOutput({"udevadm"}, "");
  auto tries = std::make_shared<int>(0);
  exec_.On({"zfs", "destroy"}, [tries](const Command&) -> StatusOr<ExecResult> {
    if ((*tries)++ == 0)
      return ExecResult{1, "", "cannot destroy 'tank/pillar/vol-1': dataset is busy\n"};
    return ExecResult{0, "", ""};
  });
  EXPECT_TRUE(Backend()->Delete("vol-1", kOwner).ok());
  std::vector<std::string> changes;
  for (const auto& line : exec_.CallLines()) {
    if (!line.starts_with("zfs list")) changes.push_back(line);
  }
  EXPECT_THAT(changes,
              ElementsAre("zfs destroy -- tank/pillar/vol-1", "udevadm settle --timeout=10",
                          "zfs destroy -- tank/pillar/vol-1"));
}

TEST_F(ZfsBackendTest, GetAndList) {
  exec_.OnOutput({"zfs", "list"}, kList);
  auto vol = Backend()->Get("vol-1");
  ASSERT_TRUE(vol.ok());
  EXPECT_EQ(vol->size_bytes, 10 * kGiB);
  EXPECT_EQ(vol->device_path, "/dev/zvol/tank/pillar/vol-1");
  EXPECT_EQ(vol->export_path, "");
  auto fs = Backend()->Get("fs-1");
  ASSERT_TRUE(fs.ok());
  EXPECT_EQ(fs->mode, VolumeMode::kFilesystem);
  EXPECT_EQ(fs->size_bytes, 5 * kGiB);
  EXPECT_EQ(fs->export_path, "/tank/pillar/fs-1");
  EXPECT_EQ(Backend()->Get("legacy")->export_path, "");
  auto missing = Backend()->Get("nope");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("tank/pillar/nope"));

  auto list = Backend()->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> names;
  for (const auto& v : *list) names.push_back(v.name);
  EXPECT_THAT(names, ElementsAre("vol-1", "fs-1", "legacy"));  // not the parent
}

TEST_F(ZfsBackendTest, ListFailuresNameTheCommand) {
  exec_.OnOutput({"zfs", "list"}, "", 1, "cannot open 'tank/pillar': dataset does not exist\n");
  auto r = Backend()->List();
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(kListCmd));
  EXPECT_THAT(r.status().message(), HasSubstr("dataset does not exist"));

  for (const char* bad :
       {"tank/pillar/vol-1\tvolume\t-\t1024\n",
        "tank/pillar/vol-1\tvolume\t-\t10G\t-\t16384\t11111111-2222-4333-8444-555555555555\t-\t-\n",
        "tank/other/vol-1\tvolume\t-\t1024\t-\t16384\t11111111-2222-4333-8444-555555555555\t-\t-\n",
        "tank/pillar/snap\tsnapshot\t-\t-\t-\t11111111-2222-4333-8444-555555555555\t-\t-\n"}) {
    SCOPED_TRACE(bad);
    testing::FakeExec exec;
    exec.OnOutput({"zfs", "list"}, bad);
    auto b = std::make_unique<ZfsBackend>("tank/pillar", exec, fs_);
    auto list = b->List();
    EXPECT_EQ(list.status().code(), Code::kInternal);
    EXPECT_THAT(list.status().message(), HasSubstr("zfs list"));
    EXPECT_EQ(b->Delete("vol-1", kOwner).code(), Code::kInternal);
    for (const auto& line : exec.CallLines()) EXPECT_EQ(line, kListCmd);
  }
}

TEST_F(ZfsBackendTest, Capacity) {
  exec_.OnOutput({"zfs", "get"}, "used\t10737418240\navailable\t96636764160\n");
  auto cap = Backend()->Capacity();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  EXPECT_EQ(cap->available_bytes, 96636764160);
  EXPECT_EQ(cap->total_bytes, 96636764160 + 10737418240);
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("zfs get -Hp -o property,value available,used -- tank/pillar"));
  exec_.OnOutput({"zfs", "get"}, "available\tlots\nused\t1\n");
  EXPECT_EQ(Backend()->Capacity().status().code(), Code::kInternal);
}

TEST_F(ZfsBackendTest, ExposeZvolWaitsForItsDeviceNode) {
  exec_.OnOutput({"zfs", "list"}, kList);
  auto b = Backend();
  auto early = b->Expose("vol-1", VolumeMode::kBlock);
  EXPECT_EQ(early.status().code(), Code::kUnavailable);
  EXPECT_THAT(early.status().message(), HasSubstr("/dev/zvol/tank/pillar/vol-1"));
  fs_.present.insert("/dev/zvol/tank/pillar/vol-1");
  EXPECT_EQ(*b->Expose("vol-1", VolumeMode::kBlock), "/dev/zvol/tank/pillar/vol-1");
  EXPECT_EQ(b->Expose("vol-1", VolumeMode::kFilesystem).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(b->Expose("nope", VolumeMode::kBlock).status().code(), Code::kNotFound);
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line, kListCmd);
}

TEST_F(ZfsBackendTest, ExposeFilesystemMountsItIfNeeded) {
  exec_.OnOutput({"zfs", "list"}, kList);
  exec_.OnOutput({"zfs", "get"}, "yes\n");
  EXPECT_EQ(*Backend()->Expose("fs-1", VolumeMode::kFilesystem), "/tank/pillar/fs-1");
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kListCmd, "zfs get -Hp -o value mounted -- tank/pillar/fs-1"));

  exec_.ClearCalls();
  exec_.OnOutput({"zfs", "get"}, "no\n");
  exec_.OnOutput({"zfs", "mount"}, "");
  EXPECT_EQ(*Backend()->Expose("fs-1", VolumeMode::kFilesystem), "/tank/pillar/fs-1");
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kListCmd, "zfs get -Hp -o value mounted -- tank/pillar/fs-1",
                          "zfs mount -- tank/pillar/fs-1"));

  exec_.ClearCalls();
  auto legacy = Backend()->Expose("legacy", VolumeMode::kFilesystem);
  EXPECT_EQ(legacy.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(legacy.status().message(), HasSubstr("mountpoint"));
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kListCmd));
  EXPECT_TRUE(Backend()->Unexpose("fs-1").ok());
  EXPECT_EQ(exec_.calls().size(), 1u);
}

// Found on a live pool (issue 24): datasets mount below the pool's own
// mountpoint, which zfs makes 0755, so any local user of the storage node
// could write into a 0777 NFS volume. Exposing a file system takes group and
// other bits off the pool's mountpoint, as the file pool does its directory.
TEST_F(ZfsBackendTest, ExposeFilesystemKeepsThePoolMountpointPrivate) {
  testing::TempDir pool;  // the parent dataset's mountpoint
  ASSERT_TRUE(fs_.Chmod(pool.path(), 02755).ok());
  std::string list = kList;
  list.replace(list.find("\t/tank/pillar\n"), 14, "\t" + pool.path() + "\n");
  exec_.OnOutput({"zfs", "list"}, list);
  exec_.OnOutput({"zfs", "get"}, "yes\n");
  auto mode = [&] { return *fs_.Mode(pool.path()) & 07777; };
  ASSERT_TRUE(Backend()->Expose("fs-1", VolumeMode::kFilesystem).ok());
  EXPECT_EQ(mode(), 02700u) << "a 0777 NFS root below a searchable pool mountpoint is anyone's";
  // Block volumes have no path below it; a legacy mountpoint leaves nothing to do.
  ASSERT_TRUE(fs_.Chmod(pool.path(), 0755).ok());
  fs_.present.insert("/dev/zvol/tank/pillar/vol-1");
  ASSERT_TRUE(Backend()->Expose("vol-1", VolumeMode::kBlock).ok());
  EXPECT_EQ(mode(), 0755u);
  exec_.OnOutput({"zfs", "list"}, "tank/pillar\tfilesystem\t-\t-\t0\t-\t-\t-\tlegacy\n" +
                                      list.substr(list.find('\n') + 1));
  ASSERT_TRUE(Backend()->Expose("fs-1", VolumeMode::kFilesystem).ok());
  EXPECT_EQ(mode(), 0755u);
}

// --- Snapshots, clones, restore ----------------------------------------------

constexpr char kSnapOwner[] = "22222222-2222-4333-8444-555555555555";
constexpr char kSnapListCmd[] =
    "zfs list -Hp -t snapshot -o "
    "name,pillar-csi:snapshot-uid,pillar-csi:size-bytes,volsize,volblocksize,creation,used,"
    "defer_destroy -r -d 2 -- tank/pillar";
// `zfs list -Hp -t snapshot -o <those columns> -r -d 2 tank/pillar`: a
// marked snapshot of vol-1, pillar's internal clone snapshot (deferred), and
// a snapshot taken by hand.
const std::string kSnaps =
    std::string("tank/pillar/vol-1@snap-1\t") + kSnapOwner +
    "\t10737418240\t10737418240\t16384\t1765000000\t4096\toff\n"
    "tank/pillar/vol-1@pillar:clone:c-old\t-\t-\t10737418240\t16384\t1765000001\t0\ton\n"
    "tank/pillar/fs-1@by-hand\t-\t-\t-\t-\t1765000002\t8192\toff\n";

class ZfsSnapshotTest : public ZfsBackendTest {
 protected:
  void SetUp() override {
    exec_.OnOutput({"zfs", "list"}, kList);
    exec_.OnOutput({"zfs", "list", "-Hp", "-t", "snapshot"}, kSnaps);
    exec_.OnOutput({"zfs", "get", "-Hp", "-s", "local"}, "compression\tlz4\n");
    for (const char* verb : {"snapshot", "clone", "destroy", "set", "rename", "send", "receive"}) {
      exec_.OnOutput({"zfs", verb}, "");
    }
  }
  std::vector<std::string> Changes() {
    std::vector<std::string> out;
    for (const auto& line : exec_.CallLines()) {
      if (!line.starts_with("zfs list") && !line.starts_with("zfs get")) out.push_back(line);
    }
    return out;
  }
  // The snapshot listing is `listing` until a `zfs destroy -d` ran, then empty.
  void ListsSnapshotsUntilADeferredDestroy(const std::string& listing) {
    auto deleted = std::make_shared<bool>(false);
    exec_.On({"zfs", "destroy", "-d"}, [deleted](const Command&) -> StatusOr<ExecResult> {
      *deleted = true;
      return ExecResult{0, "", ""};
    });
    exec_.On({"zfs", "list", "-Hp", "-t", "snapshot"},
             [deleted, listing](const Command&) -> StatusOr<ExecResult> {
               return ExecResult{0, *deleted ? "" : listing, ""};
             });
  }
};

TEST_F(ZfsSnapshotTest, ListsMarkedAndHandMadeSnapshotsButNotInternalOnes) {
  auto snaps = Backend()->ListSnapshots();
  ASSERT_TRUE(snaps.ok()) << snaps.status().ToString();
  ASSERT_EQ(snaps->size(), 2u);
  const BackendSnapshot& s = (*snaps)[0];
  EXPECT_EQ(s.name, "snap-1");
  EXPECT_EQ(s.source_volume, "vol-1");
  EXPECT_EQ(s.mode, VolumeMode::kBlock);
  EXPECT_EQ(s.size_bytes, 10737418240);
  EXPECT_EQ(s.creation_time_unix_nanos, int64_t{1765000000} * 1000000000);
  EXPECT_EQ(s.used_bytes, 4096);
  EXPECT_EQ(s.owner_uid, kSnapOwner);
  EXPECT_EQ((*snaps)[1].name, "by-hand");
  EXPECT_EQ((*snaps)[1].mode, VolumeMode::kFilesystem);
  EXPECT_EQ((*snaps)[1].owner_uid, "");
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kSnapListCmd));
}

TEST_F(ZfsSnapshotTest, CreateSnapshotMarksItWithItsUidAndTheSourceSize) {
  auto snap = Backend()->CreateSnapshot("vol-1", kOwner, "snap-2", kSnapOwner, false);
  // The fake's listing never shows snap-2: the create ran, the lookup after it fails.
  EXPECT_EQ(snap.status().code(), Code::kNotFound);
  EXPECT_THAT(Changes(),
              ElementsAre(std::string("zfs snapshot -o pillar-csi:snapshot-uid=") + kSnapOwner +
                          " -o pillar-csi:size-bytes=10737418240 -- "
                          "tank/pillar/vol-1@snap-2"));
}

TEST_F(ZfsSnapshotTest, ASourceOfAnotherLifecycleIsNeverSnapshotOrCloned) {
  auto b = Backend();
  EXPECT_EQ(b->CreateSnapshot("vol-1", kOtherOwner, "snap-2", kSnapOwner, false).status().code(),
            Code::kFailedPrecondition);
  VolumeSource from_vol{VolumeSource::Kind::kVolume, "vol-1", kOtherOwner, false};
  EXPECT_EQ(b->CreateFrom("c", kGiB * 10, VolumeMode::kBlock, {}, kOwner, std::nullopt, from_vol)
                .status()
                .code(),
            Code::kFailedPrecondition);
  VolumeSource from_snap{VolumeSource::Kind::kSnapshot, "snap-1", kOwner, false};
  EXPECT_EQ(b->CreateFrom("c", kGiB * 10, VolumeMode::kBlock, {}, kOwner, std::nullopt, from_snap)
                .status()
                .code(),
            Code::kFailedPrecondition);
  EXPECT_THAT(Changes(), IsEmpty());
}

TEST_F(ZfsSnapshotTest, DeleteSnapshotIsADeferredDestroy) {
  EXPECT_TRUE(Backend()->DeleteSnapshot("snap-1", kSnapOwner).ok());
  EXPECT_THAT(Changes(), ElementsAre("zfs destroy -d -- tank/pillar/vol-1@snap-1"));
  exec_.ClearCalls();
  EXPECT_EQ(Backend()->DeleteSnapshot("snap-1", kOtherOwner).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(Backend()->DeleteSnapshot("never-was", kSnapOwner).ok());
  EXPECT_THAT(Changes(), IsEmpty());
}

TEST_F(ZfsSnapshotTest, RestoreClonesWithCarriedPropertiesAndGrows) {
  VolumeSource from{VolumeSource::Kind::kSnapshot, "snap-1", kSnapOwner, false};
  auto vol =
      Backend()->CreateFrom("r", kGiB * 20, VolumeMode::kBlock, {}, kOwner, std::nullopt, from);
  // The fake's listing never shows r: the clone ran, the lookup after it fails.
  EXPECT_EQ(vol.status().code(), Code::kNotFound);
  EXPECT_THAT(Changes(), ElementsAre(std::string("zfs clone -o volmode=dev -o compression=lz4 -o "
                                                 "pillar-csi:volume-uid=") +
                                     kOwner +
                                     " -o pillar-csi:origin=snapshot:snap-1 -- "
                                     "tank/pillar/vol-1@snap-1 tank/pillar/r"));
  EXPECT_THAT(
      exec_.CallLines(),
      ::testing::Contains("zfs get -Hp -s local -o property,value "
                          "checksum,compression,copies,logbias,primarycache,secondarycache,sync -- "
                          "tank/pillar/vol-1"));
}

TEST_F(ZfsSnapshotTest, RestoreGrowsTheCloneAndReservesLikeAThickZvol) {
  const std::string row =
      std::string("tank/pillar/r\tvolume\tsnapshot:snap-1\t10737418240\t-\t16384\t") + kOwner +
      "\t-\t-\n";
  OnListChangingAfter({"zfs", "clone"}, kList, std::string(kList) + row);
  VolumeSource from{VolumeSource::Kind::kSnapshot, "snap-1", kSnapOwner, false};
  auto vol =
      Backend()->CreateFrom("r", kGiB * 20, VolumeMode::kBlock, {}, kOwner, std::nullopt, from);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->origin, "snapshot tank/pillar/snap-1");
  auto changes = Changes();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[1], "zfs set volsize=21474836480 tank/pillar/r");
  EXPECT_EQ(changes[2], "zfs set refreservation=auto tank/pillar/r");
}

TEST_F(ZfsSnapshotTest, RestoreRefusesASmallerSizeAndAnotherBlockSize) {
  VolumeSource from{VolumeSource::Kind::kSnapshot, "snap-1", kSnapOwner, false};
  auto b = Backend();
  EXPECT_EQ(
      b->CreateFrom("r", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt, from).status().code(),
      Code::kOutOfRange);
  EXPECT_EQ(b->CreateFrom("r", kGiB * 10, VolumeMode::kBlock, {{"volblocksize", "64K"}}, kOwner,
                          std::nullopt, from)
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_THAT(Changes(), IsEmpty());
}

TEST_F(ZfsSnapshotTest, CloneOfAVolumeGoesThroughADeferredInternalSnapshot) {
  VolumeSource from{VolumeSource::Kind::kVolume, "vol-1", kOwner, false};
  (void)Backend()->CreateFrom("c", kGiB * 10, VolumeMode::kBlock, {{"thin", "true"}}, kOwner,
                              std::nullopt, from);
  EXPECT_THAT(Changes(), ElementsAre("zfs snapshot -- tank/pillar/vol-1@pillar:clone:c",
                                     std::string("zfs clone -o volmode=dev -o compression=lz4 -o "
                                                 "pillar-csi:volume-uid=") +
                                         kOwner +
                                         " -o pillar-csi:origin=volume:vol-1 -- "
                                         "tank/pillar/vol-1@pillar:clone:c tank/pillar/c",
                                     "zfs destroy -d -- tank/pillar/vol-1@pillar:clone:c"));
}

TEST_F(ZfsSnapshotTest, DetachedCopyIsSendIntoReceive) {
  VolumeSource from{VolumeSource::Kind::kSnapshot, "snap-1", kSnapOwner, true};
  (void)Backend()->CreateFrom("d", kGiB * 10, VolumeMode::kBlock, {}, kOwner, std::nullopt, from);
  EXPECT_THAT(Changes(),
              ElementsAre(std::string("zfs send -- tank/pillar/vol-1@snap-1 | zfs receive -u -o "
                                      "volmode=dev -o compression=lz4 -o pillar-csi:volume-uid=") +
                              kOwner +
                              " -o pillar-csi:origin=snapshot:snap-1 -- "
                              "tank/pillar/d@pillar:copy:d",
                          "zfs destroy -- tank/pillar/d@pillar:copy:d"));
}

TEST_F(ZfsSnapshotTest, DeletingAVolumeWithSnapshotsHidesItInstead) {
  exec_.OnOutput({"zfs", "destroy", "--", "tank/pillar/vol-1"}, "", 1,
                 "cannot destroy 'tank/pillar/vol-1': volume has children\n"
                 "use '-r' to destroy the following datasets:\ntank/pillar/vol-1@snap-1\n");
  EXPECT_TRUE(Backend()->Delete("vol-1", kOwner).ok());
  EXPECT_THAT(
      Changes(),
      ElementsAre(
          "zfs destroy -- tank/pillar/vol-1",
          std::string("zfs rename -- tank/pillar/vol-1 tank/pillar/vol-1:deleted:") + kOwner));
}

TEST_F(ZfsSnapshotTest, HiddenVolumesAreNoVolumesAndGoWithTheirLastSnapshot) {
  const std::string hidden = std::string("tank/pillar/old:deleted:") + kOwner;
  exec_.OnOutput({"zfs", "list"}, std::string(kList) + hidden +
                                      "\tvolume\t-\t1073741824\t-\t16384\t" + kOwner + "\t-\t-\n");
  exec_.OnOutput({"zfs", "list", "-Hp", "-t", "snapshot"},
                 hidden + "@s-old\t" + kSnapOwner + "\t1073741824\t1073741824\t16384\t1\t0\toff\n");
  auto b = Backend();
  auto vols = b->List();
  ASSERT_TRUE(vols.ok()) << vols.status().ToString();
  for (const auto& v : *vols) EXPECT_NE(v.name.find("old"), 0u) << v.name;
  EXPECT_EQ(b->Get("old").status().code(), Code::kNotFound);
  auto snaps = b->ListSnapshots();
  ASSERT_TRUE(snaps.ok());
  ASSERT_EQ(snaps->size(), 1u);
  EXPECT_EQ((*snaps)[0].source_volume, "old");
  // Deleting its last snapshot: the snapshot (deferred), then the hidden
  // volume once the listing shows no snapshot left on it.
  ListsSnapshotsUntilADeferredDestroy(hidden + "@s-old\t" + kSnapOwner +
                                      "\t1073741824\t1073741824\t16384\t1\t0\toff\n");
  exec_.ClearCalls();
  EXPECT_TRUE(b->DeleteSnapshot("s-old", kSnapOwner).ok());
  EXPECT_THAT(Changes(),
              ElementsAre("zfs destroy -d -- " + hidden + "@s-old", "zfs destroy -- " + hidden));
}

TEST_F(ZfsSnapshotTest, AHiddenVolumeStaysWhileASnapshotStillNeedsIt) {
  const std::string hidden = std::string("tank/pillar/old:deleted:") + kOwner;
  exec_.OnOutput({"zfs", "list"}, std::string(kList) + hidden +
                                      "\tvolume\t-\t1073741824\t-\t16384\t" + kOwner + "\t-\t-\n");
  // After s-old goes, s-kept (and a clone's deferred origin) still need it.
  exec_.OnOutput(
      {"zfs", "list", "-Hp", "-t", "snapshot"},
      hidden + "@s-old\t" + kSnapOwner + "\t1073741824\t1073741824\t16384\t1\t0\toff\n" + hidden +
          "@s-kept\t" + kSnapOwner + "\t1073741824\t1073741824\t16384\t1\t0\toff\n" + hidden +
          "@gone-but-cloned\t" + kSnapOwner + "\t1073741824\t1073741824\t16384\t1\t0\ton\n");
  EXPECT_TRUE(Backend()->DeleteSnapshot("s-old", kSnapOwner).ok());
  EXPECT_THAT(Changes(), ElementsAre("zfs destroy -d -- " + hidden + "@s-old"));
  // A deleted snapshot kept for its clones is no source and listed nowhere.
  auto snaps = Backend()->ListSnapshots();
  ASSERT_TRUE(snaps.ok());
  for (const auto& snap : *snaps) EXPECT_NE(snap.name, "gone-but-cloned");
  VolumeSource from{VolumeSource::Kind::kSnapshot, "gone-but-cloned", kSnapOwner, false};
  EXPECT_EQ(Backend()
                ->CreateFrom("r", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt, from)
                .status()
                .code(),
            Code::kNotFound);
}

TEST_F(ZfsSnapshotTest, ADetachedSnapshotIsSentIntoADatasetOfItsOwn) {
  (void)Backend()->CreateSnapshot("vol-1", kOwner, "s", kSnapOwner, true);
  EXPECT_THAT(Changes(),
              ElementsAre("zfs snapshot -- tank/pillar/vol-1@pillar:send:s",
                          std::string("zfs send -- tank/pillar/vol-1@pillar:send:s | zfs receive "
                                      "-u -o pillar-csi:snapshot-uid=") +
                              kSnapOwner +
                              " -o pillar-csi:size-bytes=10737418240 -o volmode=none -o "
                              "compression=lz4 -- tank/pillar/vol-1:snapshot:s@s",
                          "zfs destroy -- tank/pillar/vol-1@pillar:send:s"));
  // A file system's is never mounted.
  exec_.ClearCalls();
  (void)Backend()->CreateSnapshot("fs-1", kOwner, "t", kSnapOwner, true);
  auto changes = Changes();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_THAT(changes[1], HasSubstr(" -o canmount=off "));
  EXPECT_THAT(changes[1], HasSubstr("-- tank/pillar/fs-1:snapshot:t@t"));
}

TEST_F(ZfsSnapshotTest, AFailedSendStillDropsWhatItSent) {
  exec_.OnOutput({"zfs", "receive"}, "", 1, "cannot receive: out of space\n");
  auto r = Backend()->CreateSnapshot("vol-1", kOwner, "s", kSnapOwner, true);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("out of space"));
  auto changes = Changes();
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.back(), "zfs destroy -- tank/pillar/vol-1@pillar:send:s");
}

TEST_F(ZfsSnapshotTest, ADetachedSnapshotIsListedAsDetachedAndItsDatasetIsNoVolume) {
  const std::string holder = "tank/pillar/vol-1:snapshot:s";
  // Its dataset carries the marks; its snapshot inherits them.
  exec_.OnOutput({"zfs", "list"},
                 std::string(kList) + holder + "\tvolume\t-\t10737418240\t-\t16384\t-\t-\t-\n");
  exec_.OnOutput({"zfs", "list", "-Hp", "-t", "snapshot"},
                 holder + "@s\t" + kSnapOwner + "\t10737418240\t10737418240\t16384\t1\t0\toff\n");
  auto b = Backend();
  auto vols = b->List();
  ASSERT_TRUE(vols.ok()) << vols.status().ToString();
  for (const auto& v : *vols) EXPECT_EQ(v.name.find(':'), std::string::npos) << v.name;
  auto snaps = b->ListSnapshots();
  ASSERT_TRUE(snaps.ok()) << snaps.status().ToString();
  ASSERT_EQ(snaps->size(), 1u);
  EXPECT_EQ((*snaps)[0].name, "s");
  EXPECT_EQ((*snaps)[0].source_volume, "vol-1");
  EXPECT_TRUE((*snaps)[0].detached);
  EXPECT_EQ((*snaps)[0].owner_uid, kSnapOwner);
  // A retry of the same create is that snapshot (a detached one also serves
  // a request for a dependent one); nothing is sent again.
  exec_.ClearCalls();
  EXPECT_TRUE(b->CreateSnapshot("vol-1", kOwner, "s", kSnapOwner, true).ok());
  EXPECT_TRUE(b->CreateSnapshot("vol-1", kOwner, "s", kSnapOwner, false).ok());
  EXPECT_EQ(b->CreateSnapshot("vol-1", kOwner, "s", kOtherOwner, true).status().code(),
            Code::kAlreadyExists);
  EXPECT_THAT(Changes(), IsEmpty());
  // A restore clones the holder's snapshot.
  VolumeSource from{VolumeSource::Kind::kSnapshot, "s", kSnapOwner, false};
  (void)b->CreateFrom("r", kGiB * 10, VolumeMode::kBlock, {}, kOwner, std::nullopt, from);
  ASSERT_EQ(Changes().size(), 1u);
  EXPECT_THAT(Changes()[0], HasSubstr("-- " + holder + "@s tank/pillar/r"));
  // Deleting it: the snapshot (deferred), then its dataset once it holds none.
  ListsSnapshotsUntilADeferredDestroy(holder + "@s\t" + kSnapOwner +
                                      "\t10737418240\t10737418240\t16384\t1\t0\toff\n");
  exec_.ClearCalls();
  EXPECT_TRUE(b->DeleteSnapshot("s", kSnapOwner).ok());
  EXPECT_THAT(Changes(),
              ElementsAre("zfs destroy -d -- " + holder + "@s", "zfs destroy -- " + holder));
}

}  // namespace
}  // namespace pillar::agent
