#include "agent/backends/marked_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "agent/backends/backend_test_util.h"

namespace pillar::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;

// A backend whose objects are a map and whose steps only record that they
// ran, so a test sees which steps the shared checks let through.
class RecordingBackend : public MarkedBackend<BackendVolume> {
 public:
  const std::string& pool() const override { return pool_; }
  std::string kind() const override { return "recording"; }
  std::vector<VolumeMode> modes() const override {
    return {VolumeMode::kBlock, VolumeMode::kFilesystem};
  }

  void Put(const std::string& name, const std::string& owner_uid, bool is_volume = true) {
    objects_[name] = BackendVolume{name, kGiB, VolumeMode::kBlock, "", "", owner_uid};
    if (!is_volume) not_volumes_.push_back(name);
  }
  const std::vector<std::string>& steps() const { return steps_; }
  void ClearSteps() { steps_.clear(); }

 protected:
  Status CheckConfig() const override { return Status::Ok(); }
  StatusOr<std::optional<BackendVolume>> FindRow(const std::string& name) override {
    steps_.push_back("FindRow");
    auto it = objects_.find(name);
    if (it == objects_.end()) return std::optional<BackendVolume>();
    return std::optional<BackendVolume>(it->second);
  }
  Status CheckIsVolume(const std::string& name, const BackendVolume& /*vol*/,
                       bool creating) const override {
    for (const auto& n : not_volumes_) {
      if (n == name) {
        return creating ? AlreadyExists(name + " is no volume")
                        : FailedPrecondition(name + " is no volume");
      }
    }
    return Status::Ok();
  }
  BackendVolume ToVolume(const BackendVolume& vol) const override { return vol; }
  std::string Object(const std::string& name, const BackendVolume& /*vol*/) const override {
    return "recording pool " + pool_ + ": " + name;
  }
  StatusOr<BackendVolume> DoCreate(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                   const std::map<std::string, std::string>& /*params*/,
                                   const std::string& owner_uid,
                                   const std::optional<VolumeRoot>& /*root*/,
                                   std::unique_lock<std::mutex>& /*lock*/) override {
    steps_.push_back("DoCreate");
    return BackendVolume{name, size_bytes, mode, "", "", owner_uid};
  }
  StatusOr<BackendVolume> ResumeCreate(const BackendVolume& vol,
                                       std::unique_lock<std::mutex>& /*lock*/) override {
    steps_.push_back("ResumeCreate");
    return vol;
  }
  StatusOr<BackendVolume> DoExpand(const BackendVolume& vol, int64_t /*size_bytes*/,
                                   std::unique_lock<std::mutex>& /*lock*/) override {
    steps_.push_back("DoExpand");
    return vol;
  }
  Status DoDelete(const std::string& /*name*/,
                  const std::optional<BackendVolume>& /*vol*/) override {
    steps_.push_back("DoDelete");
    return Status::Ok();
  }
  Status WriteMark(const BackendVolume& /*vol*/, const std::string& /*owner_uid*/) override {
    steps_.push_back("WriteMark");
    return Status::Ok();
  }
  StatusOr<std::vector<BackendVolume>> ListVolumes() override {
    steps_.push_back("ListVolumes");
    return std::vector<BackendVolume>();
  }
  StatusOr<PoolCapacity> ReadCapacity() override {
    steps_.push_back("ReadCapacity");
    return PoolCapacity{};
  }
  StatusOr<std::string> DoExpose(const BackendVolume& /*vol*/) override {
    steps_.push_back("DoExpose");
    return std::string("/dev/recorded");
  }
  Status DoUnexpose(const std::string& /*name*/) override {
    steps_.push_back("DoUnexpose");
    return Status::Ok();
  }
  StatusOr<std::optional<BackendSnapshot>> FindSnapshotRow(const std::string& name) override {
    steps_.push_back("FindSnapshotRow");
    auto it = snapshots_.find(name);
    if (it == snapshots_.end()) return std::optional<BackendSnapshot>();
    return std::optional<BackendSnapshot>(it->second);
  }
  StatusOr<std::vector<BackendSnapshot>> ListSnapshotRows() override {
    steps_.push_back("ListSnapshotRows");
    std::vector<BackendSnapshot> out;
    for (const auto& [name, snap] : snapshots_) out.push_back(snap);
    return out;
  }
  StatusOr<BackendSnapshot> DoCreateSnapshot(const BackendVolume& vol, const std::string& name,
                                             const std::string& snapshot_uid, bool detached,
                                             std::unique_lock<std::mutex>& /*lock*/) override {
    steps_.push_back("DoCreateSnapshot");
    BackendSnapshot snap{name, vol.name, vol.mode, vol.size_bytes, 1, snapshot_uid, 0, detached};
    snapshots_[name] = snap;
    return snap;
  }
  Status DoDeleteSnapshot(const BackendSnapshot& snap) override {
    steps_.push_back("DoDeleteSnapshot");
    snapshots_.erase(snap.name);
    return Status::Ok();
  }
  StatusOr<BackendVolume> DoCreateFromSnapshot(const std::string& name, int64_t size_bytes,
                                               VolumeMode mode,
                                               const std::map<std::string, std::string>& /*params*/,
                                               const std::string& owner_uid,
                                               const BackendSnapshot& snap, bool /*detached*/,
                                               std::unique_lock<std::mutex>& /*lock*/) override {
    steps_.push_back("DoCreateFromSnapshot");
    BackendVolume vol{name, size_bytes, mode, "", "", owner_uid};
    vol.origin = OriginOf(pool_, VolumeSource::Kind::kSnapshot, snap.name);
    objects_[name] = vol;
    return vol;
  }
  StatusOr<BackendVolume> DoCloneVolume(const std::string& name, int64_t size_bytes,
                                        VolumeMode mode,
                                        const std::map<std::string, std::string>& /*params*/,
                                        const std::string& owner_uid, const BackendVolume& source,
                                        bool /*detached*/,
                                        std::unique_lock<std::mutex>& /*lock*/) override {
    steps_.push_back("DoCloneVolume");
    BackendVolume vol{name, size_bytes, mode, "", "", owner_uid};
    vol.origin = OriginOf(pool_, VolumeSource::Kind::kVolume, source.name);
    objects_[name] = vol;
    return vol;
  }

 public:
  void PutSnapshot(const std::string& name, const std::string& owner_uid, bool deleted = false) {
    snapshots_[name] =
        BackendSnapshot{name, "v", VolumeMode::kBlock, kGiB, 1, owner_uid, 0, false, deleted};
  }

 private:
  std::map<std::string, BackendSnapshot> snapshots_;
  std::string pool_ = "p";
  std::map<std::string, BackendVolume> objects_;
  std::vector<std::string> not_volumes_;
  std::vector<std::string> steps_;
};

StatusOr<BackendVolume> CreateBlock(Backend& b, const std::string& name,
                                    const std::string& owner_uid) {
  return b.Create(name, kGiB, VolumeMode::kBlock, {}, owner_uid, std::nullopt);
}

// The shared decision: an object another lifecycle marked, or one without
// any mark, is only looked at; no mutating step ever runs for it.
TEST(MarkedBackendTest, AForeignVolumeNeverReachesAMutatingStep) {
  for (const std::string& found : {std::string(kOtherOwner), std::string()}) {
    SCOPED_TRACE("marked '" + found + "'");
    RecordingBackend b;
    b.Put("v", found);

    EXPECT_EQ(CreateBlock(b, "v", kOwner).status().code(), Code::kAlreadyExists);
    EXPECT_THAT(b.steps(), ElementsAre("FindRow"));
    b.ClearSteps();

    Status expand = b.Expand("v", 2 * kGiB, kOwner).status();
    EXPECT_EQ(expand.code(), Code::kFailedPrecondition);
    EXPECT_THAT(expand.message(), ::testing::HasSubstr("refusing to expand it"));
    EXPECT_THAT(b.steps(), ElementsAre("FindRow"));
    b.ClearSteps();

    Status del = b.Delete("v", kOwner);
    EXPECT_EQ(del.code(), Code::kFailedPrecondition);
    EXPECT_THAT(del.message(), ::testing::HasSubstr("refusing to delete it"));
    EXPECT_THAT(b.steps(), ElementsAre("FindRow"));
    b.ClearSteps();
  }
  // SetOwner marks an unmarked object (that is what it is for), but never
  // re-marks another lifecycle's.
  RecordingBackend b;
  b.Put("v", kOtherOwner);
  EXPECT_EQ(b.SetOwner("v", kOwner).code(), Code::kAlreadyExists);
  EXPECT_THAT(b.steps(), ElementsAre("FindRow"));
}

// The counterpart, so the test above is not passing by never calling steps.
TEST(MarkedBackendTest, TheOwnersVolumeReachesEachStep) {
  RecordingBackend b;
  b.Put("v", kOwner);
  EXPECT_TRUE(CreateBlock(b, "v", kOwner).ok());
  EXPECT_TRUE(b.Expand("v", 2 * kGiB, kOwner).ok());
  EXPECT_TRUE(b.SetOwner("v", kOwner).ok());  // already marked: nothing to write
  EXPECT_TRUE(b.Expose("v", VolumeMode::kBlock).ok());
  EXPECT_TRUE(b.Unexpose("v").ok());
  EXPECT_TRUE(b.Delete("v", kOwner).ok());
  EXPECT_THAT(b.steps(), ElementsAre("FindRow", "ResumeCreate", "FindRow", "DoExpand", "FindRow",
                                     "FindRow", "DoExpose", "DoUnexpose", "FindRow", "DoDelete"));

  RecordingBackend fresh;
  fresh.Put("old", "");
  EXPECT_TRUE(CreateBlock(fresh, "new", kOwner).ok());
  EXPECT_TRUE(fresh.SetOwner("old", kOwner).ok());
  EXPECT_TRUE(fresh.Delete("gone", kOwner).ok());  // a missing volume: the step clears leftovers
  EXPECT_THAT(fresh.steps(),
              ElementsAre("FindRow", "DoCreate", "FindRow", "WriteMark", "FindRow", "DoDelete"));
}

// An object that is no volume of the backend is refused before its mark is
// even looked at, by every operation that finds it.
TEST(MarkedBackendTest, AnObjectThatIsNoVolumeIsRefusedFirst) {
  RecordingBackend b;
  b.Put("thing", kOwner, /*is_volume=*/false);
  EXPECT_EQ(CreateBlock(b, "thing", kOwner).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(b.Expand("thing", 2 * kGiB, kOwner).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(b.Delete("thing", kOwner).code(), Code::kFailedPrecondition);
  EXPECT_EQ(b.SetOwner("thing", kOwner).code(), Code::kFailedPrecondition);
  EXPECT_EQ(b.Get("thing").status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(b.Expose("thing", VolumeMode::kBlock).status().code(), Code::kFailedPrecondition);
  for (const auto& step : b.steps()) EXPECT_EQ(step, "FindRow");
}

// Names, sizes and uids are checked before any step runs, lookups included.
TEST(MarkedBackendTest, BadArgumentsRunNoStep) {
  RecordingBackend b;
  EXPECT_EQ(CreateBlock(b, "../x", kOwner).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(CreateBlock(b, "v", "not-a-uuid").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Create("v", 0, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(
      b.Create("v", kGiB, VolumeMode::kBlock, {{"k", "v"}}, kOwner, std::nullopt).status().code(),
      Code::kInvalidArgument);
  EXPECT_EQ(b.Expand("a;b", kGiB, kOwner).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Expand("v", kGiB, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Delete("-rf", kOwner).code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Delete("v", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(b.SetOwner("", kOwner).code(), Code::kInvalidArgument);
  EXPECT_EQ(b.SetOwner("v", "x").code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Get("a/b").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Expose("a/b", VolumeMode::kBlock).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Unexpose("a/b").code(), Code::kInvalidArgument);
  EXPECT_THAT(b.steps(), IsEmpty());
}

VolumeSource FromSnapshot(const std::string& name, const std::string& uid) {
  return VolumeSource{VolumeSource::Kind::kSnapshot, name, uid, false};
}
VolumeSource FromVolume(const std::string& name, const std::string& uid) {
  return VolumeSource{VolumeSource::Kind::kVolume, name, uid, false};
}
StatusOr<BackendVolume> CreateBlockFrom(Backend& b, const std::string& name,
                                        const VolumeSource& source, int64_t size = kGiB) {
  return b.CreateFrom(name, size, VolumeMode::kBlock, {}, kOwner, std::nullopt, source);
}

// A source is read only when it carries the mark the request names: a
// snapshot or volume of another lifecycle (or of none) reaches no step.
TEST(MarkedBackendTest, ASourceMarkedOtherwiseIsNeverRead) {
  for (const std::string& found : {std::string(kOtherOwner), std::string()}) {
    SCOPED_TRACE("marked '" + found + "'");
    RecordingBackend b;
    b.Put("v", found);
    b.PutSnapshot("s", found);
    Status s = CreateBlockFrom(b, "new", FromSnapshot("s", kOwner)).status();
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    EXPECT_THAT(s.message(), ::testing::HasSubstr("refusing to copy it"));
    s = CreateBlockFrom(b, "new", FromVolume("v", kOwner)).status();
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    s = b.CreateSnapshot("v", kOwner, "s2", kOwner, false).status();
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    EXPECT_THAT(s.message(), ::testing::HasSubstr("refusing to snapshot it"));
    s = b.DeleteSnapshot("s", kOwner);
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    for (const auto& step : b.steps()) {
      EXPECT_THAT(step, ::testing::AnyOf("FindRow", "FindSnapshotRow"));
    }
  }
}

TEST(MarkedBackendTest, SnapshotsAndCopiesOfTheOwnersSourcesReachTheirSteps) {
  RecordingBackend b;
  b.Put("v", kOtherOwner);
  auto snap = b.CreateSnapshot("v", kOtherOwner, "s", kOwner, false);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->owner_uid, kOwner);
  EXPECT_EQ(snap->size_bytes, kGiB);
  // A retry returns it; another uid, volume or detachment is ALREADY_EXISTS.
  EXPECT_TRUE(b.CreateSnapshot("v", kOtherOwner, "s", kOwner, false).ok());
  b.Put("w", kOtherOwner);
  EXPECT_EQ(b.CreateSnapshot("w", kOtherOwner, "s", kOwner, false).status().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(b.CreateSnapshot("v", kOtherOwner, "s", kOtherOwner, false).status().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(b.CreateSnapshot("v", kOtherOwner, "s", kOwner, true).status().code(),
            Code::kAlreadyExists);

  auto restored = CreateBlockFrom(b, "r", FromSnapshot("s", kOwner), 2 * kGiB);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->origin, "snapshot p/s");
  // Retried: the same volume, even with the snapshot gone; from another
  // source, or none, ALREADY_EXISTS.
  EXPECT_TRUE(b.DeleteSnapshot("s", kOwner).ok());
  EXPECT_TRUE(CreateBlockFrom(b, "r", FromSnapshot("s", kOwner), 2 * kGiB).ok());
  EXPECT_EQ(CreateBlockFrom(b, "r", FromVolume("v", kOtherOwner), 2 * kGiB).status().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(CreateBlock(b, "r", kOwner).status().code(), Code::kAlreadyExists);
  auto clone = CreateBlockFrom(b, "c", FromVolume("v", kOtherOwner));
  ASSERT_TRUE(clone.ok()) << clone.status().ToString();
  EXPECT_EQ(clone->origin, "volume p/v");
  EXPECT_THAT(b.steps(), ::testing::Contains("DoCreateFromSnapshot"));
  EXPECT_THAT(b.steps(), ::testing::Contains("DoCloneVolume"));
  EXPECT_THAT(b.steps(), ::testing::Contains("DoDeleteSnapshot"));
}

TEST(MarkedBackendTest, MissingDeletedOrMismatchedSourcesAreRefused) {
  RecordingBackend b;
  b.Put("v", kOwner);
  b.PutSnapshot("gone", kOwner, /*deleted=*/true);
  EXPECT_EQ(CreateBlockFrom(b, "n", FromSnapshot("none", kOwner)).status().code(), Code::kNotFound);
  EXPECT_EQ(CreateBlockFrom(b, "n", FromSnapshot("gone", kOwner)).status().code(), Code::kNotFound);
  EXPECT_EQ(CreateBlockFrom(b, "n", FromVolume("none", kOwner)).status().code(), Code::kNotFound);
  EXPECT_EQ(b.CreateSnapshot("none", kOwner, "s", kOwner, false).status().code(), Code::kNotFound);
  // Smaller than the source, or another mode.
  EXPECT_EQ(CreateBlockFrom(b, "n", FromVolume("v", kOwner), kGiB / 2).status().code(),
            Code::kOutOfRange);
  EXPECT_EQ(b.CreateFrom("n", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt,
                         FromVolume("v", kOwner))
                .status()
                .code(),
            Code::kInvalidArgument);
  // Deleted snapshots are listed nowhere, and deleting them again succeeds.
  auto list = b.ListSnapshots();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, IsEmpty());
  EXPECT_EQ(b.GetSnapshot("gone").status().code(), Code::kNotFound);
  EXPECT_TRUE(b.DeleteSnapshot("gone", kOwner).ok());
  EXPECT_TRUE(b.DeleteSnapshot("none", kOwner).ok());
}

TEST(MarkedBackendTest, BadSnapshotArgumentsRunNoStep) {
  RecordingBackend b;
  EXPECT_EQ(b.CreateSnapshot("v", kOwner, "../s", kOwner, false).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(b.CreateSnapshot("v", kOwner, "s", "x", false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.CreateSnapshot("v", "x", "s", kOwner, false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.CreateSnapshot("a;b", kOwner, "s", kOwner, false).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(b.DeleteSnapshot("s@x", kOwner).code(), Code::kInvalidArgument);
  EXPECT_EQ(b.DeleteSnapshot("s", "").code(), Code::kInvalidArgument);
  EXPECT_EQ(b.GetSnapshot("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(CreateBlockFrom(b, "n", FromSnapshot("-rf", kOwner)).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(CreateBlockFrom(b, "n", FromVolume("v", "nope")).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(CreateBlockFrom(b, "n", FromVolume("n", kOwner)).status().code(),
            Code::kInvalidArgument);
  EXPECT_THAT(b.steps(), IsEmpty());
}

}  // namespace
}  // namespace pillar::agent
