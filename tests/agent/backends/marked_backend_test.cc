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

 private:
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

}  // namespace
}  // namespace pillar::agent
