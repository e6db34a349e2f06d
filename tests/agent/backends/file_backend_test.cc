#include "agent/backends/file_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/backends/backend_test_util.h"
#include "agent/exporters/configfs_test_util.h"
#include "common/fake_exec.h"
#include "common/temp_dir.h"

namespace pillar::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

// `losetup --list --json --output NAME,BACK-FILE --associated <img>` as
// util-linux 2.38.1 prints it (captured on Debian 12), one or no device.
std::string LoopJson(const std::string& device, const std::string& image) {
  return "{\n   \"loopdevices\": [\n      {\n         \"name\": \"" + device +
         "\",\n         \"back-file\": \"" + image + "\"\n      }\n   ]\n}\n";
}
constexpr char kNoLoops[] = "{\n   \"loopdevices\": [\n\n   ]\n}\n";

// The path the kernel shows for a file it holds: every symlink resolved.
std::string KernelPath(const std::string& path) {
  return std::filesystem::weakly_canonical(path).string();
}

class FileBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs_.MakeDirs(sys_.Sub("block")).ok());
    backend_ = std::make_unique<FileBackend>("images", tmp_.path(), exec_, fs_, sys_.path());
  }

  std::string Image(const std::string& name) { return tmp_.Sub(name + ".img"); }
  std::string ListCmd(const std::string& name) {
    return "losetup --list --json --output NAME,BACK-FILE --associated " + Image(name);
  }
  std::string AttachCmd(const std::string& name) {
    return "losetup --find --show --direct-io=on -- " + Image(name);
  }
  void OnLoopList(std::string out) { exec_.OnOutput({"losetup", "--list"}, std::move(out)); }
  // What the kernel shows of an attached loopN: <sysfs>/block/loopN/loop/
  // backing_file, the path and a newline.
  void AttachInSysfs(int n, const std::string& backing) {
    const std::string dir = sys_.Sub("block/loop" + std::to_string(n) + "/loop");
    ASSERT_TRUE(fs_.MakeDirs(dir).ok());
    ASSERT_TRUE(fs_.WriteFile(dir + "/backing_file", backing + "\n").ok());
  }
  // A detached device keeps its block/loopN, without loop/.
  void DetachInSysfs(int n) {
    ASSERT_TRUE(fs_.RemoveTree(sys_.Sub("block/loop" + std::to_string(n) + "/loop")).ok());
  }
  // `losetup --find` attaches the image at loopN, as the kernel would.
  void OnAttach(int n) {
    exec_.On({"losetup", "--find"}, [this, n](const Command& cmd) -> StatusOr<ExecResult> {
      AttachInSysfs(n, KernelPath(cmd.argv.back()));
      return ExecResult{0, "/dev/loop" + std::to_string(n) + "\n", ""};
    });
  }
  // `losetup --detach /dev/loopN` detaches it in sysfs too.
  void OnDetach() {
    exec_.On({"losetup", "--detach"}, [this](const Command& cmd) -> StatusOr<ExecResult> {
      DetachInSysfs(std::stoi(cmd.argv.back().substr(9)));
      return ExecResult{0, "", ""};
    });
  }

  testing::TempDir tmp_;
  testing::TempDir sys_;
  PosixFs fs_;
  testing::FakeExec exec_;
  std::unique_ptr<FileBackend> backend_;
};

TEST(FileBackendConfigTest, BadPoolNamesAndDirectoriesRefuseEverything) {
  testing::TempDir tmp;
  PosixFs fs;
  testing::FakeExec exec;
  for (const char* bad : {"../x", "-rf", "a;b", "", "a//b"}) {
    SCOPED_TRACE(bad);
    FileBackend b(bad, tmp.path(), exec, fs);
    ExpectEveryOperationRefused(b);
  }
  for (const std::string& dir :
       {std::string("relative/dir"), tmp.path() + "/../x", tmp.path() + "/.."}) {
    SCOPED_TRACE(dir);
    FileBackend b("p", dir, exec, fs);
    ExpectEveryOperationRefused(b);
  }
  EXPECT_THAT(exec.calls(), IsEmpty());
  EXPECT_THAT(*fs.ListDir(tmp.path()), IsEmpty());

  FileBackend missing("p", tmp.Sub("missing"), exec, fs);
  EXPECT_EQ(missing.List().status().code(), Code::kNotFound);
  EXPECT_EQ(missing.Capacity().status().code(), Code::kNotFound);
}

TEST_F(FileBackendTest, RefusesBadVolumeNamesBeforeTouchingAnything) {
  for (const char* bad : {"../x", "-rf", "a;b", "", "a/b", ".pillar"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(
        backend_->Create(bad, kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
        Code::kInvalidArgument);
    EXPECT_EQ(backend_->Expand(bad, kGiB, kOwner).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(backend_->Delete(bad, kOwner).code(), Code::kInvalidArgument);
    EXPECT_EQ(backend_->Get(bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(backend_->Expose(bad, VolumeMode::kBlock).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(backend_->Unexpose(bad).code(), Code::kInvalidArgument);
  }
  EXPECT_THAT(exec_.calls(), IsEmpty());
  EXPECT_THAT(*fs_.ListDir(tmp_.path()), IsEmpty());
}

TEST_F(FileBackendTest, RefusesNonPositiveSizesAndAnyParameter) {
  EXPECT_EQ(backend_->Create("v", 0, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(
      backend_->Create("v", -1, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).status().code(),
      Code::kInvalidArgument);
  auto r = backend_->Create("v", kGiB, VolumeMode::kBlock, {{"compression", "lz4"}}, kOwner,
                            std::nullopt);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("compression"));
  EXPECT_THAT(*fs_.ListDir(tmp_.path()), IsEmpty());
}

TEST_F(FileBackendTest, CreateBlockMakesASparseImageOfExactSize) {
  auto vol = backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->name, "vol-1");
  EXPECT_EQ(vol->size_bytes, kGiB);
  EXPECT_EQ(vol->mode, VolumeMode::kBlock);
  EXPECT_EQ(*fs_.FileSize(Image("vol-1")), kGiB);
  struct stat st {};
  ASSERT_EQ(stat(Image("vol-1").c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_THAT(exec_.calls(), IsEmpty());  // attaching is Expose's job

  // A loop device drops a partial last sector, so sizes round up to 512.
  auto odd = backend_->Create("odd", 1000, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->size_bytes, 1024);
  EXPECT_EQ(*fs_.FileSize(Image("odd")), 1024);
}

TEST_F(FileBackendTest, CreateIsIdempotentAndRefusesMismatches) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  auto again = backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size_bytes, kGiB);
  auto smaller = backend_->Create("vol-1", kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(smaller.ok());
  EXPECT_EQ(smaller->size_bytes, kGiB);

  auto bigger = backend_->Create("vol-1", 2 * kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(bigger.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(bigger.status().message(), HasSubstr("images/vol-1"));
  auto other_mode =
      backend_->Create("vol-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt);
  EXPECT_EQ(other_mode.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(other_mode.status().message(), HasSubstr("images/vol-1"));
  EXPECT_EQ(*fs_.FileSize(Image("vol-1")), kGiB);  // untouched
  EXPECT_FALSE(fs_.Exists(tmp_.Sub("vol-1")));

  ASSERT_TRUE(
      backend_->Create("fs-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  EXPECT_EQ(
      backend_->Create("fs-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
      Code::kAlreadyExists);
  EXPECT_FALSE(fs_.Exists(Image("fs-1")));
}

// Issue 11: a hand-made precious.img is never adopted, grown or deleted,
// byte for byte; SetOwner (import) marks it and nothing else.
TEST_F(FileBackendTest, AnImageWithoutOwnershipMarkIsNeverTouched) {
  const std::string data = "precious bytes, not pillar's";
  {
    std::ofstream out(Image("precious"));
    out << data;
  }
  auto adopt = backend_->Create("precious", 1, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(adopt.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(adopt.status().message(),
              HasSubstr("file pool images: precious.img exists and is not pillar's"));
  EXPECT_EQ(backend_->Expand("precious", kGiB, kOwner).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(backend_->Delete("precious", kOwner).code(), Code::kFailedPrecondition);
  EXPECT_EQ(*fs_.ReadFile(Image("precious")), data);
  EXPECT_FALSE(fs_.Exists(tmp_.Sub(".pillar/precious.json")));
  EXPECT_THAT(exec_.calls(), IsEmpty());

  ASSERT_TRUE(backend_->SetOwner("precious", kOwner).ok());
  EXPECT_EQ(backend_->Get("precious")->owner_uid, kOwner);
  EXPECT_EQ(backend_->SetOwner("precious", kOtherOwner).code(), Code::kAlreadyExists);
  EXPECT_EQ(backend_->Create("precious", 1, VolumeMode::kBlock, {}, kOtherOwner, std::nullopt)
                .status()
                .code(),
            Code::kAlreadyExists);
  EXPECT_EQ(backend_->Delete("precious", kOtherOwner).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(backend_->Create("precious", 1, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  EXPECT_EQ(*fs_.ReadFile(Image("precious")), data);
  EXPECT_EQ(backend_->SetOwner("nope", kOwner).code(), Code::kNotFound);
}

TEST_F(FileBackendTest, CreatedVolumesCarryTheirOwnerInA0600Sidecar) {
  ASSERT_TRUE(backend_->Create("vol-1", kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  auto sidecar = ParseFileSidecar(*fs_.ReadFile(tmp_.Sub(".pillar/vol-1.json")));
  ASSERT_TRUE(sidecar.ok());
  EXPECT_EQ(sidecar->mode, VolumeMode::kBlock);
  EXPECT_EQ(sidecar->volume_uid, kOwner);
  struct stat st {};
  ASSERT_EQ(stat(tmp_.Sub(".pillar/vol-1.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  auto list = backend_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1U);
  EXPECT_EQ((*list)[0].owner_uid, kOwner);
  EXPECT_EQ(backend_->Create("vol-1", kMiB, VolumeMode::kBlock, {}, "not-a-uuid", std::nullopt)
                .status()
                .code(),
            Code::kInvalidArgument);
}

TEST(FileSidecarTest, ParsesOldAndNewFormsAndRefusesTheRest) {
  auto old = ParseFileSidecar("{\"mode\":\"filesystem\",\"size_bytes\":5}");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->volume_uid, "");
  EXPECT_EQ(old->size_bytes, 5);
  FileSidecar block{VolumeMode::kBlock, 0, kOwner};
  auto back = ParseFileSidecar(FormatFileSidecar(block));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->volume_uid, kOwner);
  for (const char* bad :
       {"", "[]", "{}", "{\"mode\":\"block\",\"volumeUid\":\"x\"}",
        "{\"mode\":\"block\",\"volumeUid\":1}", "{\"mode\":\"filesystem\"}",
        "{\"mode\":\"filesystem\",\"size_bytes\":-1}",
        "{\"mode\":\"filesystem\",\"size_bytes\":18446744073709551615}", "{\"mode\":\"tape\"}"}) {
    EXPECT_EQ(ParseFileSidecar(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST_F(FileBackendTest, CreateFilesystemMakesADirectoryAndRecordsItsSize) {
  auto vol = backend_->Create("fs-1", 5 * kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->mode, VolumeMode::kFilesystem);
  EXPECT_EQ(vol->export_path, tmp_.Sub("fs-1"));
  EXPECT_TRUE(fs_.IsDir(tmp_.Sub("fs-1")));
  EXPECT_EQ(*fs_.ReadFile(tmp_.Sub(".pillar/fs-1.json")),
            "{\"mode\":\"filesystem\",\"size_bytes\":5368709120,\"volumeUid\":\"" +
                std::string(kOwner) + "\"}\n");
  auto got = backend_->Get("fs-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size_bytes, 5 * kGiB);
  EXPECT_EQ(got->export_path, tmp_.Sub("fs-1"));
}

TEST_F(FileBackendTest, ThePoolDirectoryAdmitsRootOnlySoNoLocalUserReachesAVolume) {
  auto mode = [&] { return fs_.Mode(tmp_.path()).value(); };
  ASSERT_TRUE(fs_.Chmod(tmp_.path(), 0755).ok());
  ASSERT_TRUE(
      backend_->Create("fs-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  EXPECT_EQ(mode(), 0700u) << "a 0777 NFS root inside a traversable pool is anyone's";
  // A pool of an older release is tightened when a volume is served.
  ASSERT_TRUE(fs_.Chmod(tmp_.path(), 0711).ok());
  ASSERT_TRUE(backend_->Expose("fs-1", VolumeMode::kFilesystem).ok());
  EXPECT_EQ(mode(), 0700u);
  // Bits of the owner (and setgid on the pool) are the admin's: kept.
  ASSERT_TRUE(fs_.Chmod(tmp_.path(), 02750).ok());
  ASSERT_TRUE(backend_->Expose("fs-1", VolumeMode::kFilesystem).ok());
  EXPECT_EQ(mode(), 02700u);
}

TEST_F(FileBackendTest, CreateFilesystemAdoptsOnlyAnEmptyDirectoryWithoutSidecar) {
  ASSERT_TRUE(fs_.MakeDir(tmp_.Sub("empty")).ok());
  EXPECT_EQ(backend_->Get("empty").status().code(), Code::kNotFound);  // not ours yet
  EXPECT_TRUE(
      backend_->Create("empty", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());

  ASSERT_TRUE(fs_.MakeDir(tmp_.Sub("data")).ok());
  ASSERT_TRUE(fs_.WriteFile(tmp_.Sub("data/precious"), "x").ok());
  auto r = backend_->Create("data", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt);
  EXPECT_EQ(r.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(r.status().message(), HasSubstr("not empty"));
  EXPECT_FALSE(fs_.Exists(tmp_.Sub(".pillar/data.json")));

  // The block image of volume "x" occupies the path of filesystem "x.img".
  ASSERT_TRUE(backend_->Create("x", kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  EXPECT_EQ(backend_->Create("x.img", kMiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt)
                .status()
                .code(),
            Code::kAlreadyExists);
}

// PosixFs whose Chmod fails while `fail_chmod` is set: the agent dying
// between mkdir and chmod leaves the same directory behind.
class ChmodFailingFs : public PosixFs {
 public:
  Status Chmod(const std::string& path, mode_t mode) override {
    if (fail_chmod) return Internal("chmod " + path + ": injected failure");
    return PosixFs::Chmod(path, mode);
  }
  bool fail_chmod = false;
};

TEST_F(FileBackendTest, CreateFilesystemGivesItsRootTheModeAndOwnerBeforeTheSidecar) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  testing::RecordingFs recording(fs_);
  FileBackend b("images", tmp_.path(), exec_, recording);
  const std::string dir = tmp_.Sub("share");
  auto vol =
      b.Create("share", kGiB, VolumeMode::kFilesystem, {}, kOwner, VolumeRoot{02770, 1000, 2000});
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  VolumeRoot st = RootOf(dir);
  EXPECT_EQ(st.mode, 02770u) << "setgid kept, umask ignored";
  EXPECT_EQ(st.uid, 1000u);
  EXPECT_EQ(st.gid, 2000u);
  // Owner, then mode, then the mark: the directory is no volume until it
  // has both.
  EXPECT_THAT(recording.ops(),
              ElementsAre("mkdir " + dir, "chown " + dir + " = 1000:2000",
                          "chmod " + dir + " = 2770", "mkdir -p " + tmp_.Sub(".pillar"),
                          ::testing::StartsWith("write-atomic " + tmp_.Sub(".pillar/share.json"))));

  // World-writable with the sticky bit, owned by root, as a scratch share.
  ASSERT_TRUE(
      b.Create("scratch", kGiB, VolumeMode::kFilesystem, {}, kOwner, VolumeRoot{01777, 0, 0}).ok());
  st = RootOf(tmp_.Sub("scratch"));
  EXPECT_EQ(st.mode, 01777u);
  EXPECT_EQ(st.uid, 0u);
}

TEST_F(FileBackendTest, ARetryNeverChangesTheRootOfACompleteVolume) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  const std::string dir = tmp_.Sub("share");
  const VolumeRoot root{0770, 1000, 1000};
  ASSERT_TRUE(backend_->Create("share", kGiB, VolumeMode::kFilesystem, {}, kOwner, root).ok());
  // Its users changed it since (a pod ran chmod, an admin chowned it).
  ASSERT_TRUE(fs_.Chmod(dir, 0700).ok());
  ASSERT_TRUE(fs_.Chown(dir, 2000, 3000).ok());

  testing::RecordingFs recording(fs_);
  FileBackend b("images", tmp_.path(), exec_, recording);
  auto again = b.Create("share", kGiB, VolumeMode::kFilesystem, {}, kOwner, root);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_THAT(recording.ops(), IsEmpty());
  VolumeRoot st = RootOf(dir);
  EXPECT_EQ(st.mode, 0700u);
  EXPECT_EQ(st.uid, 2000u);
  EXPECT_EQ(st.gid, 3000u);
}

TEST_F(FileBackendTest, ACrashBeforeTheModeLeavesNoVolumeAndTheRetryAppliesIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  ChmodFailingFs fs;
  FileBackend b("images", tmp_.path(), exec_, fs);
  const std::string dir = tmp_.Sub("share");
  const VolumeRoot root{02775, 1000, 1000};
  fs.fail_chmod = true;
  EXPECT_EQ(b.Create("share", kGiB, VolumeMode::kFilesystem, {}, kOwner, root).status().code(),
            Code::kInternal);
  // Made and chowned, not yet chmodded: no volume, so nothing exports it.
  EXPECT_TRUE(fs.IsDir(dir));
  EXPECT_EQ(RootOf(dir).uid, 1000u);
  EXPECT_NE(RootOf(dir).mode, 02775u);
  EXPECT_FALSE(fs.Exists(tmp_.Sub(".pillar/share.json")));
  EXPECT_EQ(b.Get("share").status().code(), Code::kNotFound);
  EXPECT_EQ(b.Expose("share", VolumeMode::kFilesystem).status().code(), Code::kNotFound);
  EXPECT_THAT(*b.List(), IsEmpty());

  fs.fail_chmod = false;
  auto vol = b.Create("share", kGiB, VolumeMode::kFilesystem, {}, kOwner, root);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  VolumeRoot st = RootOf(dir);
  EXPECT_EQ(st.mode, 02775u);
  EXPECT_EQ(st.uid, 1000u);
  EXPECT_EQ(st.gid, 1000u);
  EXPECT_EQ(b.Get("share")->owner_uid, kOwner);

  // Dying right after mkdir leaves an empty root-owned 0755 directory: the
  // same retry gives it the owner as well as the mode.
  ASSERT_TRUE(fs.MakeDir(tmp_.Sub("early")).ok());
  ASSERT_TRUE(b.Create("early", kGiB, VolumeMode::kFilesystem, {}, kOwner, root).ok());
  st = RootOf(tmp_.Sub("early"));
  EXPECT_EQ(st.mode, 02775u);
  EXPECT_EQ(st.uid, 1000u);
}

TEST_F(FileBackendTest, RootIsRefusedForBlockVolumesAndOutOfRangeAndChangesNothing) {
  struct Case {
    VolumeMode mode;
    VolumeRoot root;
    const char* says;
  };
  for (const Case& c :
       std::vector<Case>{{VolumeMode::kBlock, {0770, 0, 0}, "filesystem volumes only"},
                         {VolumeMode::kFilesystem, {010000, 0, 0}, "at most 07777"},
                         {VolumeMode::kFilesystem, {0770, UINT32_MAX, 0}, "at most 4294967294"},
                         {VolumeMode::kFilesystem, {0770, 0, UINT32_MAX}, "at most 4294967294"}}) {
    auto r = backend_->Create("v", kGiB, c.mode, {}, kOwner, c.root);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.says;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says));
  }
  EXPECT_THAT(*fs_.ListDir(tmp_.path()), IsEmpty());
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, APlantedSymlinkNeverPassesTheRootOnToItsTarget) {
  testing::TempDir outside;
  ASSERT_TRUE(fs_.Chmod(outside.path(), 0700).ok());
  ASSERT_TRUE(fs_.Symlink(outside.path(), tmp_.Sub("share")).ok());
  auto r = backend_->Create("share", kGiB, VolumeMode::kFilesystem, {}, kOwner,
                            VolumeRoot{0777, 1000, 1000});
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  VolumeRoot st = RootOf(outside.path());
  EXPECT_EQ(st.mode, 0700u);
  EXPECT_EQ(st.uid, geteuid());
  EXPECT_FALSE(fs_.Exists(tmp_.Sub(".pillar/share.json")));
}

TEST_F(FileBackendTest, GetOfAMissingVolumeIsNotFound) {
  auto r = backend_->Get("nope");
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("images/nope"));
}

TEST_F(FileBackendTest, CorruptSidecarIsInternal) {
  ASSERT_TRUE(
      backend_->Create("fs-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  ASSERT_TRUE(fs_.WriteFile(tmp_.Sub(".pillar/fs-1.json"), "{\"size_bytes\": \"big\"}").ok());
  auto r = backend_->Get("fs-1");
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("fs-1.json"));
  ASSERT_TRUE(fs_.WriteFile(tmp_.Sub(".pillar/fs-1.json"), "not json").ok());
  EXPECT_EQ(backend_->Get("fs-1").status().code(), Code::kInternal);
}

TEST_F(FileBackendTest, ASymlinkedImageIsNeverTakenForAVolume) {
  ASSERT_TRUE(fs_.WriteFile(tmp_.Sub("target"), "x").ok());
  ASSERT_TRUE(fs_.Symlink(tmp_.Sub("target"), Image("evil")).ok());
  EXPECT_EQ(backend_->Get("evil").status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(backend_->Expose("evil", VolumeMode::kBlock).status().code(),
            Code::kFailedPrecondition);
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, ExpandGrowsTheImageAndTellsEveryAttachedLoopDevice) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(7, KernelPath(Image("vol-1")));
  AttachInSysfs(12, KernelPath(Image("vol-1")));
  exec_.OnOutput({"losetup", "--set-capacity"}, "");
  auto vol = backend_->Expand("vol-1", 2 * kGiB, kOwner);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->size_bytes, 2 * kGiB);
  EXPECT_EQ(*fs_.FileSize(Image("vol-1")), 2 * kGiB);
  EXPECT_THAT(exec_.CallLines(), ElementsAre("losetup --set-capacity /dev/loop7",
                                             "losetup --set-capacity /dev/loop12"));
}

TEST_F(FileBackendTest, ExpandOfADetachedImageOnlyGrowsTheFile) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(0, KernelPath(Image("other")));
  // sysfs names no device: losetup, by inode, confirms before the change.
  OnLoopList(kNoLoops);
  ASSERT_TRUE(backend_->Expand("vol-1", 3 * kGiB, kOwner).ok());
  EXPECT_EQ(*fs_.FileSize(Image("vol-1")), 3 * kGiB);
  EXPECT_THAT(exec_.CallLines(), ElementsAre(ListCmd("vol-1")));
}

TEST_F(FileBackendTest, ExpandNeverShrinksAndIsANoOpAtTheSameSize) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  auto same = backend_->Expand("vol-1", kGiB, kOwner);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->size_bytes, kGiB);
  auto shrink = backend_->Expand("vol-1", kMiB, kOwner);
  EXPECT_EQ(shrink.status().code(), Code::kOutOfRange);
  EXPECT_THAT(shrink.status().message(), HasSubstr("images/vol-1"));
  EXPECT_EQ(*fs_.FileSize(Image("vol-1")), kGiB);
  EXPECT_THAT(exec_.calls(), IsEmpty());
  EXPECT_EQ(backend_->Expand("nope", kGiB, kOwner).status().code(), Code::kNotFound);
  EXPECT_EQ(backend_->Expand("vol-1", 0, kOwner).status().code(), Code::kInvalidArgument);
}

TEST_F(FileBackendTest, ExpandFilesystemRewritesTheSidecar) {
  ASSERT_TRUE(
      backend_->Create("fs-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  auto vol = backend_->Expand("fs-1", 2 * kGiB, kOwner);
  ASSERT_TRUE(vol.ok());
  EXPECT_EQ(vol->size_bytes, 2 * kGiB);
  EXPECT_EQ(backend_->Get("fs-1")->size_bytes, 2 * kGiB);
  EXPECT_EQ(backend_->Expand("fs-1", kGiB, kOwner).status().code(), Code::kOutOfRange);
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, DeleteDetachesThenRemovesTheImage) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(3, KernelPath(Image("vol-1")));
  OnDetach();
  ASSERT_TRUE(backend_->Delete("vol-1", kOwner).ok());
  EXPECT_FALSE(fs_.Exists(Image("vol-1")));
  EXPECT_THAT(exec_.CallLines(), ElementsAre("losetup --detach /dev/loop3"));

  exec_.ClearCalls();
  EXPECT_TRUE(backend_->Delete("vol-1", kOwner).ok());  // missing is success
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, DeleteKeepsTheImageWhenDetachFails) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(3, KernelPath(Image("vol-1")));
  exec_.OnOutput({"losetup", "--detach"}, "", 1,
                 "losetup: /dev/loop3: detach failed: Permission denied\n");
  Status s = backend_->Delete("vol-1", kOwner);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("losetup --detach /dev/loop3"));
  EXPECT_THAT(s.message(), HasSubstr("Permission denied"));
  EXPECT_TRUE(fs_.Exists(Image("vol-1")));
}

TEST_F(FileBackendTest, DeleteFilesystemRemovesTheTreeAndSidecar) {
  ASSERT_TRUE(
      backend_->Create("fs-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  ASSERT_TRUE(fs_.MakeDirs(tmp_.Sub("fs-1/a/b")).ok());
  ASSERT_TRUE(fs_.WriteFile(tmp_.Sub("fs-1/a/b/file"), "data").ok());
  ASSERT_TRUE(backend_->Delete("fs-1", kOwner).ok());
  EXPECT_FALSE(fs_.Exists(tmp_.Sub("fs-1")));
  EXPECT_FALSE(fs_.Exists(tmp_.Sub(".pillar/fs-1.json")));
  EXPECT_EQ(backend_->Get("fs-1").status().code(), Code::kNotFound);
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, ListShowsVolumesOnlyAndCapacityComesFromStatvfs) {
  ASSERT_TRUE(backend_->Create("b-1", kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  ASSERT_TRUE(
      backend_->Create("f-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  ASSERT_TRUE(fs_.MakeDir(tmp_.Sub("stray-dir")).ok());          // no sidecar
  ASSERT_TRUE(fs_.WriteFile(tmp_.Sub("notes.txt"), "hi").ok());  // not an image
  ASSERT_TRUE(fs_.WriteFile(tmp_.Sub("-bad.img"), "").ok());     // not a volume name
  auto list = backend_->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "b-1");
  EXPECT_EQ((*list)[0].mode, VolumeMode::kBlock);
  EXPECT_EQ((*list)[0].size_bytes, kMiB);
  EXPECT_EQ((*list)[1].name, "f-1");
  EXPECT_EQ((*list)[1].mode, VolumeMode::kFilesystem);
  EXPECT_EQ((*list)[1].size_bytes, kGiB);

  auto cap = backend_->Capacity();
  ASSERT_TRUE(cap.ok());
  auto want = fs_.StatVfs(tmp_.path());
  EXPECT_EQ(cap->total_bytes, want->total_bytes);
  EXPECT_GT(cap->total_bytes, 0);
  EXPECT_LE(cap->available_bytes, cap->total_bytes);
}

TEST_F(FileBackendTest, ExposeAttachesADetachedImageAndRemembersItsDevice) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(0, KernelPath(Image("other")));
  ASSERT_TRUE(fs_.MakeDirs(sys_.Sub("block/loop1")).ok());  // free: no loop/
  ASSERT_TRUE(fs_.MakeDirs(sys_.Sub("block/sda")).ok());
  OnLoopList(kNoLoops);
  OnAttach(4);
  auto dev = backend_->Expose("vol-1", VolumeMode::kBlock);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/loop4");
  // sysfs names none, and losetup (by inode) agrees before a device is attached.
  EXPECT_THAT(exec_.CallLines(), ElementsAre(ListCmd("vol-1"), AttachCmd("vol-1")));

  exec_.ClearCalls();
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop4");
  EXPECT_THAT(exec_.calls(), IsEmpty()) << "an attached image's expose starts no process";
}

TEST_F(FileBackendTest, ExposeFindsAnAttachmentInSysfsWithoutAnyProcess) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  ASSERT_TRUE(backend_->Create("vol-2", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(2, KernelPath(Image("vol-2")));
  AttachInSysfs(10, KernelPath(Image("vol-1")));
  AttachInSysfs(3, KernelPath(tmp_.Sub(".pillar/snapshots/vol-1.img")));
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop10");
  EXPECT_EQ(*backend_->Expose("vol-2", VolumeMode::kBlock), "/dev/loop2");
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

// Fs that counts what it is asked under one directory (sysfs).
class CountingFs : public PosixFs {
 public:
  explicit CountingFs(std::string under) : under_(std::move(under)) {}
  StatusOr<std::string> ReadFile(const std::string& path) override {
    if (path.starts_with(under_)) reads++;
    return PosixFs::ReadFile(path);
  }
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) override {
    if (path.starts_with(under_)) lists++;
    return PosixFs::ListDir(path);
  }
  int reads = 0;
  int lists = 0;

 private:
  std::string under_;
};

TEST_F(FileBackendTest, AnExposeOfARememberedDeviceReadsOneFileWhateverTheNumberOfDevices) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  for (int n = 0; n < 50; ++n) AttachInSysfs(n, KernelPath(tmp_.Sub("x" + std::to_string(n))));
  AttachInSysfs(50, KernelPath(Image("vol-1")));
  CountingFs fs(sys_.path());
  FileBackend b("images", tmp_.path(), exec_, fs, sys_.path());
  EXPECT_EQ(*b.Expose("vol-1", VolumeMode::kBlock), "/dev/loop50");
  EXPECT_EQ(fs.lists, 1) << "the first expose scans";
  EXPECT_EQ(fs.reads, 51);
  fs.reads = fs.lists = 0;
  EXPECT_EQ(*b.Expose("vol-1", VolumeMode::kBlock), "/dev/loop50");
  EXPECT_EQ(fs.lists, 0);
  EXPECT_EQ(fs.reads, 1) << "a remembered device is checked by its backing_file alone";
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, ARememberedDeviceThatNowBacksAnotherFileIsNeverServed) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(0, KernelPath(Image("vol-1")));
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop0");
  // Detached and reused for another file behind the agent's back; vol-1 is
  // on loop3 now.
  AttachInSysfs(0, KernelPath(Image("vol-2")));
  AttachInSysfs(3, KernelPath(Image("vol-1")));
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop3");
  // Detached, no loop/ left: nothing backs vol-1 any more.
  DetachInSysfs(3);
  OnLoopList(kNoLoops);
  OnAttach(5);
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop5");
  EXPECT_THAT(exec_.CallLines(), ElementsAre(ListCmd("vol-1"), AttachCmd("vol-1")));
}

TEST_F(FileBackendTest, ADeviceWhoseImageWasUnlinkedIsNoLongerTheImages) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(0, KernelPath(Image("vol-1")));
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop0");
  // The image was replaced (unlinked, made again): loop0 holds the old one.
  AttachInSysfs(0, KernelPath(Image("vol-1")) + " (deleted)");
  OnLoopList(kNoLoops);
  OnAttach(1);
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop1");
  EXPECT_THAT(exec_.CallLines(), ElementsAre(ListCmd("vol-1"), AttachCmd("vol-1")));

  // A fresh agent finds the same: the deleted one is nobody's.
  testing::FakeExec exec;
  FileBackend b("images", tmp_.path(), exec, fs_, sys_.path());
  EXPECT_EQ(*b.Expose("vol-1", VolumeMode::kBlock), "/dev/loop1");
  EXPECT_THAT(exec.calls(), IsEmpty());
}

TEST_F(FileBackendTest, APoolDirectoryBehindASymlinkIsMatchedAsTheKernelNamesIt) {
  ASSERT_TRUE(fs_.MakeDirs(tmp_.Sub("real/pool")).ok());
  ASSERT_TRUE(fs_.Symlink("real", tmp_.Sub("link")).ok());
  const std::string dir = tmp_.Sub("link/./pool");
  FileBackend b("images", dir, exec_, fs_, sys_.path());
  ASSERT_TRUE(b.Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(6, KernelPath(tmp_.Sub("real/pool/vol-1.img")));
  ASSERT_NE(KernelPath(tmp_.Sub("real/pool/vol-1.img")), dir + "/vol-1.img");
  EXPECT_EQ(*b.Expose("vol-1", VolumeMode::kBlock), "/dev/loop6");
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

// A device the agent's previous pod attached names its image relative to a
// mount that went with that pod's namespace: sysfs cannot tell, losetup
// (by inode) can, and the device is served, never doubled.
TEST_F(FileBackendTest, ADeviceSysfsCannotNameIsFoundByInodeOnceAndThenRemembered) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  ASSERT_TRUE(backend_->Create("vol-2", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(4, "/vol-1.img");
  exec_.On({"losetup", "--list"}, [this](const Command& cmd) -> StatusOr<ExecResult> {
    return ExecResult{0,
                      cmd.argv.back() == Image("vol-1") ? LoopJson("/dev/loop4", "/vol-1.img")
                                                        : std::string(kNoLoops),
                      ""};
  });
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop4");
  EXPECT_THAT(exec_.CallLines(), ElementsAre(ListCmd("vol-1")));
  exec_.ClearCalls();
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop4");
  EXPECT_THAT(exec_.calls(), IsEmpty());
  // Another volume's attach rescans sysfs; loop4 is still remembered.
  OnAttach(5);
  EXPECT_EQ(*backend_->Expose("vol-2", VolumeMode::kBlock), "/dev/loop5");
  exec_.ClearCalls();
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop4");
  EXPECT_THAT(exec_.calls(), IsEmpty());
  // And an unexpose detaches it.
  OnDetach();
  ASSERT_TRUE(backend_->Unexpose("vol-1").ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("losetup --detach /dev/loop4"));
}

TEST_F(FileBackendTest, ExposeAcceptsTheSilentOutputOfOlderLosetup) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  OnLoopList("");
  exec_.OnOutput({"losetup", "--find"}, "/dev/loop1\n");
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop1");
}

TEST_F(FileBackendTest, ExposeNeverAttachesWhenSysfsCannotBeRead) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  FileBackend b("images", tmp_.path(), exec_, fs_, sys_.Sub("missing"));
  auto r = b.Expose("vol-1", VolumeMode::kBlock);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(sys_.Sub("missing/block")));
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, ExposeNeverCreatesAndChecksTheMode) {
  auto missing = backend_->Expose("nope", VolumeMode::kBlock);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_FALSE(fs_.Exists(Image("nope")));
  ASSERT_TRUE(
      backend_->Create("fs-1", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt).ok());
  EXPECT_EQ(*backend_->Expose("fs-1", VolumeMode::kFilesystem), tmp_.Sub("fs-1"));
  EXPECT_EQ(backend_->Expose("fs-1", VolumeMode::kBlock).status().code(),
            Code::kFailedPrecondition);
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(FileBackendTest, ExposeReportsLosetupFailuresWithCommandAndStderr) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  OnLoopList(kNoLoops);
  exec_.OnOutput(
      {"losetup", "--find"}, "", 1,
      "losetup: " + Image("vol-1") + ": failed to set up loop device: No such file or directory\n");
  auto r = backend_->Expose("vol-1", VolumeMode::kBlock);
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("losetup --find --show"));
  EXPECT_THAT(r.status().message(), HasSubstr("failed to set up loop device"));
}

TEST_F(FileBackendTest, ExposeRefusesWhatIsNotALoopDevice) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  OnLoopList(kNoLoops);
  exec_.OnOutput({"losetup", "--find"}, "/dev/sda\n");
  EXPECT_EQ(backend_->Expose("vol-1", VolumeMode::kBlock).status().code(), Code::kInternal);
}

TEST_F(FileBackendTest, MalformedLosetupJsonIsInternal) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  for (const char* bad :
       {"{\"loopdevices\": [", "{\"devices\": []}", "{\"loopdevices\": [{\"back-file\": \"/x\"}]}",
        "{\"loopdevices\": [{\"name\": \"/dev/sda; rm\"}]}"}) {
    SCOPED_TRACE(bad);
    testing::FakeExec exec;
    exec.OnOutput({"losetup", "--list"}, bad);
    FileBackend backend("images", tmp_.path(), exec, fs_, sys_.path());
    auto r = backend.Expose("vol-1", VolumeMode::kBlock);
    EXPECT_EQ(r.status().code(), Code::kInternal);
    EXPECT_THAT(r.status().message(), HasSubstr("losetup --list"));
    EXPECT_EQ(exec.calls().size(), 1u);  // never attached on a bad read
  }
}

TEST_F(FileBackendTest, UnexposeDetachesEveryDeviceOfTheImageAndForgetsThem) {
  ASSERT_TRUE(backend_->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  AttachInSysfs(0, KernelPath(Image("vol-1")));
  AttachInSysfs(1, KernelPath(Image("vol-2")));
  AttachInSysfs(2, KernelPath(Image("vol-1")));
  AttachInSysfs(3, KernelPath(Image("vol-1")) + " (deleted)");
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop0");
  OnDetach();
  ASSERT_TRUE(backend_->Unexpose("vol-1").ok());
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("losetup --detach /dev/loop0", "losetup --detach /dev/loop2"));
  EXPECT_TRUE(fs_.Exists(Image("vol-1")));
  EXPECT_TRUE(fs_.Exists(sys_.Sub("block/loop1/loop/backing_file")));

  // The next expose attaches anew, even where loop0 came back for another
  // file.
  AttachInSysfs(0, KernelPath(Image("vol-2")));
  exec_.ClearCalls();
  OnLoopList(kNoLoops);
  OnAttach(7);
  EXPECT_EQ(*backend_->Expose("vol-1", VolumeMode::kBlock), "/dev/loop7");
  EXPECT_THAT(exec_.CallLines(), ElementsAre(ListCmd("vol-1"), AttachCmd("vol-1")));

  exec_.ClearCalls();
  EXPECT_TRUE(backend_->Unexpose("nope").ok());
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

// The real losetup on a real image: runs wherever loop devices are allowed.
TEST_F(FileBackendTest, RealLoopDeviceAttachReuseGrowDetach) {
  if (geteuid() != 0 || access("/dev/loop-control", F_OK) != 0) {
    GTEST_SKIP() << "needs root and /dev/loop-control";
  }
  // The real losetup, counted.
  struct CountingExec : public SystemExec {
    StatusOr<ExecResult> Run(const Command& cmd) override {
      runs++;
      return SystemExec::Run(cmd);
    }
    int runs = 0;
  } exec;
  auto backend = std::make_unique<FileBackend>("images", tmp_.path(), exec, fs_);
  ASSERT_TRUE(
      backend->Create("real", 64 * kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  struct Detach {
    FileBackend* b;
    ~Detach() { (void)b->Unexpose("real"); }
  } detach{backend.get()};

  auto dev = backend->Expose("real", VolumeMode::kBlock);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_THAT(*dev, ::testing::StartsWith("/dev/loop"));
  exec.runs = 0;
  auto again = backend->Expose("real", VolumeMode::kBlock);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *dev);
  EXPECT_EQ(exec.runs, 0) << "the kernel's backing_file names the image";
  // A new agent finds it by a scan of the real sysfs.
  FileBackend fresh("images", tmp_.path(), exec, fs_);
  EXPECT_EQ(*fresh.Expose("real", VolumeMode::kBlock), *dev);
  EXPECT_EQ(exec.runs, 0);

  ASSERT_TRUE(backend->Expand("real", 128 * kMiB, kOwner).ok());
  std::ifstream sectors("/sys/block/" + dev->substr(5) + "/size");
  int64_t n = 0;
  sectors >> n;
  EXPECT_EQ(n * 512, 128 * kMiB);

  ASSERT_TRUE(backend->Unexpose("real").ok());
  auto after = exec.Run({{"losetup", "--list", "--noheadings", "--associated", Image("real")}});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->out, "");
  ASSERT_TRUE(backend->Delete("real", kOwner).ok());
  EXPECT_FALSE(fs_.Exists(Image("real")));
}

// --- Snapshots and copies, on a real directory ------------------------------------

constexpr char kSnapOwner[] = "22222222-2222-4333-8444-555555555555";

// Writes `data` at `offset` of an existing file.
void WriteAt(const std::string& path, int64_t offset, const std::string& data) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::string ReadAt(const std::string& path, int64_t offset, size_t n) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(offset);
  std::string out(n, '\0');
  f.read(out.data(), static_cast<std::streamsize>(n));
  return out;
}

int64_t Blocks(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return static_cast<int64_t>(st.st_blocks);
}

TEST_F(FileBackendTest, SnapshotIsASparseCopyTheVolumeNeverTouches) {
  ASSERT_TRUE(backend_->Create("v", 64 * kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  WriteAt(Image("v"), 0, "before");
  WriteAt(Image("v"), 32 * kMiB, "middle");
  auto snap = backend_->CreateSnapshot("v", kOwner, "s", kSnapOwner, false);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->size_bytes, 64 * kMiB);
  EXPECT_EQ(snap->source_volume, "v");
  EXPECT_EQ(snap->owner_uid, kSnapOwner);
  EXPECT_TRUE(snap->detached);
  EXPECT_GT(snap->creation_time_unix_nanos, 0);
  const std::string data = tmp_.Sub(".pillar/snapshots/s.img");
  // Holes stay holes: the copy takes about what the two writes took.
  EXPECT_LE(Blocks(data), Blocks(Image("v")) + 16);
  EXPECT_LT(Blocks(data) * 512, kMiB);
  EXPECT_EQ(snap->used_bytes, Blocks(data) * 512);

  // The volume changes; the snapshot does not, and a restore has the old data.
  WriteAt(Image("v"), 0, "after!");
  EXPECT_EQ(ReadAt(data, 0, 6), "before");
  auto restored =
      backend_->CreateFrom("r", 128 * kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt,
                           {VolumeSource::Kind::kSnapshot, "s", kSnapOwner, false});
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->size_bytes, 128 * kMiB);
  EXPECT_EQ(restored->origin, "snapshot images/s");
  EXPECT_EQ(ReadAt(Image("r"), 0, 6), "before");
  EXPECT_EQ(ReadAt(Image("r"), 32 * kMiB, 6), "middle");
  EXPECT_LT(Blocks(Image("r")) * 512, kMiB);
  // Listed as a volume with its origin; the snapshot among the snapshots only.
  auto got = backend_->Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->origin, "snapshot images/s");
  auto vols = backend_->List();
  ASSERT_TRUE(vols.ok());
  EXPECT_EQ(vols->size(), 2u);
  auto snaps = backend_->ListSnapshots();
  ASSERT_TRUE(snaps.ok());
  ASSERT_EQ(snaps->size(), 1u);
  EXPECT_EQ((*snaps)[0].name, "s");
  // Nothing of the copies is left in the temporary directory.
  auto tmp_entries = fs_.ListDir(tmp_.Sub(".pillar/tmp"));
  ASSERT_TRUE(tmp_entries.ok());
  EXPECT_THAT(*tmp_entries, IsEmpty());
}

TEST_F(FileBackendTest, CopiesAreIndependentOfTheirSources) {
  ASSERT_TRUE(backend_->Create("v", 8 * kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  WriteAt(Image("v"), 0, "origin");
  ASSERT_TRUE(backend_->CreateSnapshot("v", kOwner, "s", kSnapOwner, false).ok());
  auto clone = backend_->CreateFrom("c", 8 * kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt,
                                    {VolumeSource::Kind::kVolume, "v", kOwner, false});
  ASSERT_TRUE(clone.ok()) << clone.status().ToString();
  EXPECT_EQ(clone->origin, "volume images/v");
  WriteAt(Image("c"), 0, "clone!");
  EXPECT_EQ(ReadAt(Image("v"), 0, 6), "origin");
  // Deleting the source, then the snapshot, leaves the clone whole.
  OnLoopList(kNoLoops);
  ASSERT_TRUE(backend_->Delete("v", kOwner).ok());
  ASSERT_TRUE(backend_->DeleteSnapshot("s", kSnapOwner).ok());
  EXPECT_FALSE(fs_.Exists(tmp_.Sub(".pillar/snapshots/s.img")));
  EXPECT_FALSE(fs_.Exists(tmp_.Sub(".pillar/snapshots/s.json")));
  EXPECT_EQ(ReadAt(Image("c"), 0, 6), "clone!");
  // A retried create of the clone from the (now gone) source returns it.
  EXPECT_TRUE(backend_
                  ->CreateFrom("c", 8 * kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt,
                               {VolumeSource::Kind::kVolume, "v", kOwner, false})
                  .ok());
  EXPECT_EQ(backend_
                ->CreateFrom("c", 8 * kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt,
                             {VolumeSource::Kind::kSnapshot, "s", kSnapOwner, false})
                .status()
                .code(),
            Code::kAlreadyExists);
}

TEST_F(FileBackendTest, DirectorySnapshotsCopyTheTreeWithModesAndLinks) {
  ASSERT_TRUE(
      backend_->Create("d", kGiB, VolumeMode::kFilesystem, {}, kOwner, VolumeRoot{02770, 0, 0})
          .ok());
  const std::string dir = tmp_.Sub("d");
  ASSERT_TRUE(fs_.MakeDir(dir + "/sub").ok());
  ASSERT_TRUE(fs_.WriteFile(dir + "/sub/f", "data").ok());
  ASSERT_TRUE(fs_.Chmod(dir + "/sub/f", 0640).ok());
  ASSERT_TRUE(fs_.Symlink("sub/f", dir + "/link").ok());
  auto snap = backend_->CreateSnapshot("d", kOwner, "ds", kSnapOwner, false);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->mode, VolumeMode::kFilesystem);
  EXPECT_EQ(snap->size_bytes, kGiB);
  ASSERT_TRUE(fs_.WriteFile(dir + "/sub/f", "changed").ok());
  auto r = backend_->CreateFrom("dr", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt,
                                {VolumeSource::Kind::kSnapshot, "ds", kSnapOwner, false});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*fs_.ReadFile(tmp_.Sub("dr/sub/f")), "data");
  EXPECT_EQ(*fs_.ReadLink(tmp_.Sub("dr/link")), "sub/f");
  EXPECT_EQ(RootOf(tmp_.Sub("dr/sub/f")).mode, 0640u);
  EXPECT_EQ(RootOf(tmp_.Sub("dr")).mode, 02770u);
  // A block snapshot cannot become a filesystem volume, nor a smaller one.
  EXPECT_EQ(backend_
                ->CreateFrom("x", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt,
                             {VolumeSource::Kind::kSnapshot, "ds", kSnapOwner, false})
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(backend_
                ->CreateFrom("x", kMiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt,
                             {VolumeSource::Kind::kSnapshot, "ds", kSnapOwner, false})
                .status()
                .code(),
            Code::kOutOfRange);
}

TEST(FsCopyTest, CopyFileKeepsHolesAndRefusesToOverwrite) {
  testing::TempDir tmp;
  PosixFs fs;
  const std::string from = tmp.Sub("from"), to = tmp.Sub("to");
  ASSERT_TRUE(fs.CreateSparseFile(from, 256 * kMiB).ok());
  WriteAt(from, 100 * kMiB, std::string(4096, 'x'));
  ASSERT_TRUE(fs.CopyFile(from, to).ok());
  EXPECT_EQ(*fs.FileSize(to), 256 * kMiB);
  EXPECT_EQ(ReadAt(to, 100 * kMiB, 4096), std::string(4096, 'x'));
  EXPECT_LT(Blocks(to) * 512, 4 * kMiB) << "holes were filled";
  EXPECT_EQ(*fs.AllocatedBytes(to), Blocks(to) * 512);
  EXPECT_EQ(fs.CopyFile(from, to).code(), Code::kAlreadyExists);
  ASSERT_TRUE(fs.Symlink(from, tmp.Sub("link")).ok());
  EXPECT_FALSE(fs.CopyFile(tmp.Sub("link"), tmp.Sub("to2")).ok()) << "a symlink is never followed";
}

}  // namespace
}  // namespace pillar::agent
