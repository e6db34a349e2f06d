#include "agent/backends/lvm_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>
#include <map>
#include <mutex>

#include "agent/backends/backend_test_util.h"
#include "common/fake_exec.h"

namespace pillar::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kGiB = int64_t{1} << 30;

constexpr int64_t kMiB = int64_t{1} << 20;

// lvm2 2.03.16 (Debian 12) JSON reports. The layout, indentation and the
// empty-report form are captured from the real tools; the rows follow the
// same format with the attributes lvs(8) documents for each LV type.
constexpr char kLvsHeader[] =
    "  {\n"
    "      \"report\": [\n"
    "          {\n"
    "              \"lv\": [\n";
constexpr char kLvsFooter[] =
    "              ]\n"
    "          }\n"
    "      ]\n"
    "  }\n";

std::string LvRow(const std::string& name, int64_t size, const std::string& attr,
                  const std::string& pool = "",
                  const std::string& tags = std::string("pillar-csi.volume-uid.") + kOwner) {
  return "                  {\"lv_name\":\"" + name + "\", \"lv_size\":\"" + std::to_string(size) +
         "\", \"lv_attr\":\"" + attr + "\", \"pool_lv\":\"" + pool +
         "\", \"vg_extent_size\":\"4194304\", \"lv_tags\":\"" + tags + "\"}";
}

std::string Lvs(const std::vector<std::string>& rows) {
  std::string out = kLvsHeader;
  for (size_t i = 0; i < rows.size(); ++i) out += rows[i] + (i + 1 < rows.size() ? ",\n" : "\n");
  return out + kLvsFooter;
}

// A VG that holds a bit of everything: linear LVs (one inactive), a thin
// pool with one thin LV, a thick snapshot, and (as lvs -a would show them)
// the pool's hidden parts.
std::string FullVg() {
  return Lvs({LvRow("vol-1", kGiB, "-wi-a-----"), LvRow("vol-off", 2 * kGiB, "-wi-------"),
              LvRow("tp", 10 * kGiB, "twi-aotz--"), LvRow("thin-1", 5 * kGiB, "Vwi-a-tz--", "tp"),
              LvRow("snap", 100 * kMiB, "swi-a-s---"), LvRow("[tp_tdata]", 10 * kGiB, "Twi-ao----"),
              LvRow("[lvol0_pmspare]", 8 * kMiB, "ewi-------")});
}

constexpr char kLvsCmd[] =
    "lvs --reportformat json --units b --nosuffix -o "
    "lv_name,lv_size,lv_attr,pool_lv,vg_extent_size,lv_tags -- vg0";

class LvmBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<LvmBackend> Linear() { return std::make_unique<LvmBackend>("vg0", "", exec_); }
  std::unique_ptr<LvmBackend> Thin() { return std::make_unique<LvmBackend>("vg0", "tp", exec_); }
  // lvs answers `before` until a command named `change` ran, then `after`.
  void OnLvsChangingAfter(const std::string& change, const std::string& before,
                          const std::string& after) {
    auto changed = std::make_shared<bool>(false);
    exec_.On({change}, [changed](const Command&) -> StatusOr<ExecResult> {
      *changed = true;
      return ExecResult{0, "", ""};
    });
    exec_.On({"lvs"}, [changed, before, after](const Command&) -> StatusOr<ExecResult> {
      return ExecResult{0, *changed ? after : before, ""};
    });
  }

  testing::FakeExec exec_;
};

TEST_F(LvmBackendTest, BadVgOrThinPoolNamesRefuseEverything) {
  std::vector<std::pair<std::string, std::string>> bad = {
      {"../x", ""},    {"-rf", ""},    {"a;b", ""},     {"", ""},
      {"vg0/sub", ""}, {"vg0", "-rf"}, {"vg0", "tp/x"}, {"vg0", "a;b"}};
  for (const auto& [vg, thin] : bad) {
    SCOPED_TRACE(vg);
    SCOPED_TRACE(thin);
    LvmBackend b(vg, thin, exec_);
    ExpectEveryOperationRefused(b);
  }
  EXPECT_EQ(Linear()->kind(), "lvm");
  EXPECT_EQ(Thin()->kind(), "lvm-thin");
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(LvmBackendTest, RefusesBadVolumeNamesBeforeRunningAnything) {
  auto b = Linear();
  for (const char* bad : {"../x", "-rf", "a;b", "", "vg0/x", "[tp_tdata]"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(b->Create(bad, kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
              Code::kInvalidArgument);
    EXPECT_EQ(b->Expand(bad, kGiB, kOwner).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Delete(bad, kOwner).code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Get(bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Expose(bad, VolumeMode::kBlock).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(b->Unexpose(bad).code(), Code::kInvalidArgument);
  }
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(LvmBackendTest, RefusesFilesystemModeSizesAndParameters) {
  auto b = Linear();
  auto fs = b->Create("v", kGiB, VolumeMode::kFilesystem, {}, kOwner, std::nullopt);
  EXPECT_EQ(fs.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(fs.status().message(), HasSubstr("filesystem"));
  EXPECT_EQ(b->Create("v", 0, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
            Code::kInvalidArgument);
  auto p = b->Create("v", kGiB, VolumeMode::kBlock, {{"stripes", "2"}}, kOwner, std::nullopt);
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("stripes"));
  EXPECT_EQ(b->Expose("v", VolumeMode::kFilesystem).status().code(), Code::kInvalidArgument);
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

TEST_F(LvmBackendTest, CreateLinearWipesAndReportsTheRealSize) {
  OnLvsChangingAfter("lvcreate", FullVg(), Lvs({LvRow("new", kGiB + 4 * kMiB, "-wi-a-----")}));
  auto vol = Linear()->Create("new", kGiB + 1, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->size_bytes, kGiB + 4 * kMiB);  // lvm rounded up to extents
  EXPECT_EQ(vol->device_path, "/dev/vg0/new");
  EXPECT_EQ(vol->mode, VolumeMode::kBlock);
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(kLvsCmd,
                  // byte sizes must be whole sectors for lvcreate
                  "lvcreate --yes --wipesignatures y --zero y --type linear --size "
                  "1073742336b --addtag pillar-csi.volume-uid.11111111-2222-4333-8444-555555555555 "
                  "--addtag pillar-csi.zero-from.0 --name new -- vg0",
                  kLvsCmd));
}

TEST_F(LvmBackendTest, CreateThinUsesTheThinPool) {
  OnLvsChangingAfter(
      "lvcreate", FullVg(),
      Lvs({LvRow("tp", 10 * kGiB, "twi-aotz--"), LvRow("new", 20 * kGiB, "Vwi-a-tz--", "tp")}));
  auto vol = Thin()->Create("new", 20 * kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->size_bytes, 20 * kGiB);
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(
          kLvsCmd,
          "lvcreate --yes --type thin --virtualsize 21474836480b --thinpool tp "
          "--addtag pillar-csi.volume-uid.11111111-2222-4333-8444-555555555555 --name new -- vg0",
          kLvsCmd));
}

TEST_F(LvmBackendTest, CreateIsIdempotentAndRefusesMismatches) {
  exec_.OnOutput({"lvs"}, FullVg());
  auto b = Linear();
  auto same = b->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->size_bytes, kGiB);
  EXPECT_TRUE(b->Create("vol-1", kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  auto bigger = b->Create("vol-1", 2 * kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(bigger.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(bigger.status().message(), HasSubstr("vg0/vol-1"));
  // Names held by LVs that are not linear volumes: never adopted.
  for (const char* foreign : {"tp", "thin-1", "snap"}) {
    auto r = b->Create(foreign, kMiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
    EXPECT_EQ(r.status().code(), Code::kAlreadyExists) << foreign;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("vg0/") + foreign));
  }
  auto t = Thin();
  EXPECT_TRUE(t->Create("thin-1", 5 * kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  EXPECT_EQ(t->Create("vol-1", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(t->Create("tp", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
            Code::kAlreadyExists);
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line, kLvsCmd);
}

TEST_F(LvmBackendTest, CreateReportsLvcreateFailure) {
  exec_.OnOutput({"lvs"}, Lvs({}));
  exec_.OnOutput({"lvcreate"}, "", 5,
                 "  Volume group \"vg0\" has insufficient free space (255 extents): 257 "
                 "required.\n");
  auto r = Linear()->Create("big", 257 * (4 * kMiB), VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("lvcreate --yes"));
  EXPECT_THAT(r.status().message(), HasSubstr("insufficient free space"));
}

TEST_F(LvmBackendTest, ExpandRoundsToExtentsAndNeverShrinks) {
  OnLvsChangingAfter("lvextend", FullVg(), Lvs({LvRow("vol-1", kGiB + 4 * kMiB, "-wi-a-----")}));
  auto b = Linear();
  // Already this size after rounding: a retried Expand is a no-op.
  auto same = b->Expand("vol-1", kGiB - 1, kOwner);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->size_bytes, kGiB);
  auto shrink = b->Expand("vol-1", kGiB - 4 * kMiB, kOwner);
  EXPECT_EQ(shrink.status().code(), Code::kOutOfRange);
  EXPECT_THAT(shrink.status().message(), HasSubstr("vg0/vol-1"));
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kLvsCmd, kLvsCmd));

  exec_.ClearCalls();
  exec_.OnOutput({"lvchange"}, "");
  auto grown = b->Expand("vol-1", kGiB + 1, kOwner);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(grown->size_bytes, kGiB + 4 * kMiB);
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kLvsCmd, "lvchange --addtag pillar-csi.zero-from.1073741824 -- vg0/vol-1",
                          "lvextend --size 1077936128b -- vg0/vol-1", kLvsCmd));
}

TEST_F(LvmBackendTest, ExpandRefusesMissingAndForeignLvs) {
  exec_.OnOutput({"lvs"}, FullVg());
  EXPECT_EQ(Linear()->Expand("nope", kGiB, kOwner).status().code(), Code::kNotFound);
  auto pool = Linear()->Expand("tp", 20 * kGiB, kOwner);
  EXPECT_EQ(pool.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(pool.status().message(), HasSubstr("vg0/tp"));
  EXPECT_EQ(Thin()->Expand("tp", 20 * kGiB, kOwner).status().code(), Code::kFailedPrecondition);
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line, kLvsCmd);
}

TEST_F(LvmBackendTest, DeleteRemovesOnlyTheNamedVolume) {
  exec_.OnOutput({"lvs"}, FullVg());
  exec_.OnOutput({"lvremove"}, "  Logical volume \"vol-1\" successfully removed.\n");
  ASSERT_TRUE(Linear()->Delete("vol-1", kOwner).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kLvsCmd, "lvremove --yes -- vg0/vol-1"));

  exec_.ClearCalls();
  EXPECT_TRUE(Linear()->Delete("nope", kOwner).ok());  // missing is success
  ASSERT_TRUE(Thin()->Delete("thin-1", kOwner).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kLvsCmd, kLvsCmd, "lvremove --yes -- vg0/thin-1"));
}

TEST_F(LvmBackendTest, DeleteNeverTouchesAThinPoolOrAnotherKindOfLv) {
  exec_.OnOutput({"lvs"}, FullVg());
  exec_.OnOutput({"lvremove"}, "");
  for (const char* foreign : {"tp", "snap", "thin-1"}) {
    Status s = Linear()->Delete(foreign, kOwner);
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << foreign;
  }
  EXPECT_EQ(Thin()->Delete("tp", kOwner).code(), Code::kFailedPrecondition);
  EXPECT_EQ(Thin()->Delete("vol-1", kOwner).code(), Code::kFailedPrecondition);
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line, kLvsCmd);
}

// Issue 11: an LV pillar did not make (no tag) or another lifecycle's is
// never adopted, grown or removed; SetOwner is the explicit way in.
TEST_F(LvmBackendTest, OwnershipTagGuardsCreateExpandDelete) {
  const std::string other_tag = std::string("pillar-csi.volume-uid.") + kOtherOwner;
  exec_.OnOutput({"lvs"}, Lvs({LvRow("precious", kGiB, "-wi-a-----", "", ""),
                               LvRow("theirs", kGiB, "-wi-a-----", "", "backup," + other_tag),
                               LvRow("mine", kGiB, "-wi-a-----", "",
                                     "backup,pillar-csi.volume-uid." + std::string(kOwner))}));
  auto b = Linear();
  auto adopt = b->Create("precious", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(adopt.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(adopt.status().message(),
              HasSubstr("lvm pool vg0: LV precious exists and is not pillar's"));
  EXPECT_THAT(adopt.status().message(), HasSubstr("import=true"));
  auto taken = b->Create("theirs", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  EXPECT_EQ(taken.status().code(), Code::kAlreadyExists);
  EXPECT_THAT(taken.status().message(), HasSubstr(kOtherOwner));
  auto mine = b->Create("mine", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->owner_uid, kOwner);
  for (const char* name : {"precious", "theirs"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(b->Expand(name, 2 * kGiB, kOwner).status().code(), Code::kFailedPrecondition);
    Status del = b->Delete(name, kOwner);
    EXPECT_EQ(del.code(), Code::kFailedPrecondition);
    EXPECT_THAT(del.message(), HasSubstr(std::string("LV ") + name));
  }
  EXPECT_EQ(b->SetOwner("theirs", kOwner).code(), Code::kAlreadyExists);
  EXPECT_TRUE(b->SetOwner("mine", kOwner).ok());  // already marked: nothing to run
  for (const auto& line : exec_.CallLines()) EXPECT_EQ(line, kLvsCmd);

  exec_.OnOutput({"lvchange"}, "");
  ASSERT_TRUE(b->SetOwner("precious", kOwner).ok());
  EXPECT_EQ(exec_.CallLines().back(),
            "lvchange --addtag pillar-csi.volume-uid." + std::string(kOwner) + " -- vg0/precious");
}

TEST_F(LvmBackendTest, OwnershipTagsAreParsedStrictly) {
  EXPECT_EQ(*LvmBackend::OwnerFromTags(""), "");
  EXPECT_EQ(*LvmBackend::OwnerFromTags("a,b"), "");
  EXPECT_EQ(*LvmBackend::OwnerFromTags("a," + LvmBackend::OwnerTag(kOwner)), kOwner);
  EXPECT_FALSE(LvmBackend::OwnerFromTags("pillar-csi.volume-uid.nope").ok());
  EXPECT_FALSE(LvmBackend::OwnerFromTags(LvmBackend::OwnerTag(kOwner) + "," +
                                         LvmBackend::OwnerTag(kOtherOwner))
                   .ok());
  // A report with a bad tag is refused as a whole: never "unmarked".
  exec_.OnOutput({"lvs"}, Lvs({LvRow("v", kGiB, "-wi-a-----", "", "pillar-csi.volume-uid.x")}));
  EXPECT_EQ(Linear()->Get("v").status().code(), Code::kInternal);
}

TEST_F(LvmBackendTest, DeleteReportsAnLvInUse) {
  exec_.OnOutput({"lvs"}, FullVg());
  exec_.OnOutput({"lvremove"}, "", 5, "  Logical volume vg0/vol-1 in use.\n");
  Status s = Linear()->Delete("vol-1", kOwner);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("lvremove --yes -- vg0/vol-1"));
  EXPECT_THAT(s.message(), HasSubstr("in use"));
}

TEST_F(LvmBackendTest, GetAndListSeeOnlyThisBackendsVolumes) {
  exec_.OnOutput({"lvs"}, FullVg());
  auto vol = Linear()->Get("vol-1");
  ASSERT_TRUE(vol.ok());
  EXPECT_EQ(vol->size_bytes, kGiB);
  EXPECT_EQ(vol->device_path, "/dev/vg0/vol-1");
  auto missing = Linear()->Get("nope");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("vg0/nope"));
  EXPECT_EQ(Linear()->Get("tp").status().code(), Code::kFailedPrecondition);

  auto linear = Linear()->List();
  ASSERT_TRUE(linear.ok()) << linear.status().ToString();
  std::vector<std::string> names;
  for (const auto& v : *linear) names.push_back(v.name);
  EXPECT_THAT(names, ElementsAre("vol-1", "vol-off"));

  auto thin = Thin()->List();
  ASSERT_TRUE(thin.ok());
  ASSERT_EQ(thin->size(), 1u);
  EXPECT_EQ((*thin)[0].name, "thin-1");
  EXPECT_EQ((*thin)[0].size_bytes, 5 * kGiB);
  EXPECT_EQ((*thin)[0].device_path, "/dev/vg0/thin-1");
}

TEST_F(LvmBackendTest, ListOfAnEmptyVgIsEmpty) {
  exec_.OnOutput({"lvs"}, Lvs({}));  // the real empty report
  auto list = Linear()->List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, IsEmpty());
}

TEST_F(LvmBackendTest, AcceptsJsonStdNumbers) {
  // --reportformat json_std (lvm2 >= 2.03.17) prints numbers unquoted.
  exec_.OnOutput({"lvs"}, Lvs({"{\"lv_name\":\"vol-1\", \"lv_size\":1073741824, "
                               "\"lv_attr\":\"-wi-a-----\", \"pool_lv\":null, "
                               "\"vg_extent_size\":4194304, \"lv_tags\":null}"}));
  auto vol = Linear()->Get("vol-1");
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->size_bytes, kGiB);
}

TEST_F(LvmBackendTest, MalformedReportsAreInternalAndNameTheCommand) {
  for (const std::string& bad :
       {std::string("  {\n      \"report\": ["), std::string("{\"report\": []}"),
        std::string("{\"report\": [{\"vg\": []}]}"), std::string("[]"),
        Lvs({"{\"lv_name\":\"vol-1\", \"lv_attr\":\"-wi-a-----\", \"pool_lv\":\"\", "
             "\"vg_extent_size\":\"4194304\"}"}),
        Lvs({"{\"lv_name\":\"vol-1\", \"lv_size\":\"1G\", \"lv_attr\":\"-wi-a-----\", "
             "\"pool_lv\":\"\", \"vg_extent_size\":\"4194304\"}"}),
        Lvs({"{\"lv_name\":\"vol-1\", \"lv_size\":\"1\", \"lv_attr\":\"-w\", "
             "\"pool_lv\":\"\", \"vg_extent_size\":\"4194304\"}"})}) {
    SCOPED_TRACE(bad);
    testing::FakeExec exec;
    exec.OnOutput({"lvs"}, bad);
    auto b = std::make_unique<LvmBackend>("vg0", "", exec);
    auto r = b->Get("vol-1");
    EXPECT_EQ(r.status().code(), Code::kInternal);
    EXPECT_THAT(r.status().message(), HasSubstr("lvs --reportformat json"));
    EXPECT_EQ(b->Delete("vol-1", kOwner).code(), Code::kInternal);
    for (const auto& line : exec.CallLines()) EXPECT_EQ(line, kLvsCmd);
  }
}

TEST_F(LvmBackendTest, AMissingVgFailsNamingTheCommandAndStderr) {
  // Captured: lvs on a VG that does not exist exits 5 with this stderr.
  exec_.OnOutput({"lvs"}, Lvs({}), 5,
                 "  Volume group \"vg0\" not found\n  Cannot process volume group vg0\n");
  auto r = Linear()->List();
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(kLvsCmd));
  EXPECT_THAT(r.status().message(), HasSubstr("Volume group \"vg0\" not found"));
}

TEST_F(LvmBackendTest, CapacityOfALinearPoolIsTheVg) {
  // Captured from vgs on Debian 12.
  exec_.OnOutput({"vgs"},
                 "  {\n      \"report\": [\n          {\n              \"vg\": [\n"
                 "                  {\"vg_name\":\"vg0\", \"vg_size\":\"264241152\", "
                 "\"vg_free\":\"251658240\"}\n"
                 "              ]\n          }\n      ]\n  }\n");
  auto cap = Linear()->Capacity();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  EXPECT_EQ(cap->total_bytes, 264241152);
  EXPECT_EQ(cap->available_bytes, 251658240);
  EXPECT_THAT(exec_.CallLines(), ElementsAre("vgs --reportformat json --units b --nosuffix -o "
                                             "vg_name,vg_size,vg_free -- vg0"));
}

TEST_F(LvmBackendTest, CapacityOfAThinPoolIsItsUnusedData) {
  exec_.OnOutput({"lvs"},
                 "  {\n      \"report\": [\n          {\n              \"lv\": [\n"
                 "                  {\"lv_name\":\"tp\", \"lv_size\":\"10737418240\", "
                 "\"lv_attr\":\"twi-aotz--\", \"data_percent\":\"25.00\"}\n"
                 "              ]\n          }\n      ]\n  }\n");
  auto cap = Thin()->Capacity();
  ASSERT_TRUE(cap.ok()) << cap.status().ToString();
  EXPECT_EQ(cap->total_bytes, 10 * kGiB);
  EXPECT_EQ(cap->available_bytes, 10 * kGiB / 4 * 3);
  EXPECT_THAT(exec_.CallLines(), ElementsAre("lvs --reportformat json --units b --nosuffix -o "
                                             "lv_name,lv_size,lv_attr,data_percent -- vg0/tp"));
}

TEST_F(LvmBackendTest, CapacityRefusesAThinPoolThatIsNotOne) {
  exec_.OnOutput({"lvs"}, Lvs({"{\"lv_name\":\"tp\", \"lv_size\":\"1\", "
                               "\"lv_attr\":\"-wi-a-----\", \"data_percent\":\"\"}"}));
  EXPECT_EQ(Thin()->Capacity().status().code(), Code::kFailedPrecondition);
  exec_.OnOutput({"vgs"}, "{\"report\": [{\"vg\": [{\"vg_name\":\"other\"}]}]}");
  EXPECT_EQ(Linear()->Capacity().status().code(), Code::kInternal);
}

TEST_F(LvmBackendTest, ExposeActivatesAnInactiveLvOnly) {
  exec_.OnOutput({"lvs"}, FullVg());
  exec_.OnOutput({"lvchange"}, "");
  EXPECT_EQ(*Linear()->Expose("vol-1", VolumeMode::kBlock), "/dev/vg0/vol-1");
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kLvsCmd));

  exec_.ClearCalls();
  EXPECT_EQ(*Linear()->Expose("vol-off", VolumeMode::kBlock), "/dev/vg0/vol-off");
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kLvsCmd, "lvchange --activate y -- vg0/vol-off"));

  exec_.ClearCalls();
  EXPECT_EQ(Linear()->Expose("nope", VolumeMode::kBlock).status().code(), Code::kNotFound);
  EXPECT_EQ(Linear()->Expose("tp", VolumeMode::kBlock).status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kLvsCmd, kLvsCmd));
  EXPECT_TRUE(Linear()->Unexpose("vol-1").ok());
  EXPECT_EQ(exec_.calls().size(), 2u);  // Unexpose leaves activation alone
}

// Issue 22 item 7: lvm2 as far as zeroing is concerned. LVs with their
// size, state and tags; lvcreate, lvextend, lvchange --addtag/--deltag/
// --activate, lvremove and blkdiscard change or record them. Extents are
// 4 MiB as in FullVg. `fail_blkdiscard_at` makes the n-th blkdiscard (from
// 1) fail like a crash or timeout in the middle of a zeroing.
class SimLvm {
 public:
  struct Lv {
    int64_t size = 0;
    bool active = true;
    std::vector<std::string> tags;
  };

  explicit SimLvm(testing::FakeExec& exec) {
    exec.On({"lvs"}, [this](const Command&) -> StatusOr<ExecResult> {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<std::string> rows;
      for (const auto& [name, lv] : lvs_) {
        std::string tags;
        for (const auto& t : lv.tags) tags += (tags.empty() ? "" : ",") + t;
        rows.push_back(LvRow(name, lv.size, lv.active ? "-wi-a-----" : "-wi-------", "", tags));
      }
      return ExecResult{0, Lvs(rows), ""};
    });
    exec.On({"lvcreate"}, [this](const Command& c) -> StatusOr<ExecResult> {
      std::lock_guard<std::mutex> lock(mu_);
      Lv lv;
      std::string name;
      for (size_t i = 1; i + 1 < c.argv.size(); ++i) {
        if (c.argv[i] == "--size") lv.size = Extents(std::stoll(c.argv[i + 1]));
        if (c.argv[i] == "--addtag") lv.tags.push_back(c.argv[i + 1]);
        if (c.argv[i] == "--name") name = c.argv[i + 1];
      }
      lvs_[name] = lv;
      return ExecResult{0, "", ""};
    });
    exec.On({"lvextend"}, [this](const Command& c) -> StatusOr<ExecResult> {
      std::lock_guard<std::mutex> lock(mu_);
      if (fail_lvextend) return ExecResult{5, "", "  simulated failure\n"};
      lvs_.at(Name(c)).size = Extents(std::stoll(c.argv.at(2)));
      return ExecResult{0, "", ""};
    });
    exec.On({"lvchange"}, [this](const Command& c) -> StatusOr<ExecResult> {
      std::lock_guard<std::mutex> lock(mu_);
      Lv& lv = lvs_.at(Name(c));
      for (size_t i = 1; i + 1 < c.argv.size(); ++i) {
        if (c.argv[i] == "--deltag") std::erase(lv.tags, c.argv[i + 1]);
        if (c.argv[i] == "--addtag") lv.tags.push_back(c.argv[i + 1]);
        if (c.argv[i] == "--activate") lv.active = true;
      }
      return ExecResult{0, "", ""};
    });
    exec.On({"blkdiscard"}, [this](const Command& c) -> StatusOr<ExecResult> {
      if (during_blkdiscard) during_blkdiscard();
      std::lock_guard<std::mutex> lock(mu_);
      if (++blkdiscards == fail_blkdiscard_at) return ExecResult{1, "", "  simulated crash\n"};
      zeroed.push_back({std::stoll(c.argv.at(4)), std::stoll(c.argv.at(6))});
      return ExecResult{0, "", ""};
    });
  }

  void Add(const std::string& name, int64_t size, std::vector<std::string> tags,
           bool active = true) {
    lvs_[name] = Lv{size, active, std::move(tags)};
  }
  const Lv& Get(const std::string& name) { return lvs_.at(name); }

  std::vector<std::pair<int64_t, int64_t>> zeroed;  // (offset, length) per blkdiscard
  int blkdiscards = 0;
  int fail_blkdiscard_at = 0;
  bool fail_lvextend = false;
  std::function<void()> during_blkdiscard;

 private:
  static int64_t Extents(int64_t bytes) { return (bytes + 4 * kMiB - 1) / (4 * kMiB) * (4 * kMiB); }
  static std::string Name(const Command& c) {
    std::string id = c.argv.back();
    return id.substr(id.find('/') + 1);
  }
  std::mutex mu_;
  std::map<std::string, Lv> lvs_;
};

const std::string kOwnerTag = std::string("pillar-csi.volume-uid.") + kOwner;

TEST_F(LvmBackendTest, ZeroingTagsAreParsedStrictly) {
  EXPECT_EQ(LvmBackend::ZeroTag(4096), "pillar-csi.zero-from.4096");
  EXPECT_EQ(*LvmBackend::ZeroFromTags(""), std::nullopt);
  EXPECT_EQ(*LvmBackend::ZeroFromTags("a," + kOwnerTag), std::nullopt);
  EXPECT_EQ(*LvmBackend::ZeroFromTags(kOwnerTag + ",pillar-csi.zero-from.0"), 0);
  EXPECT_EQ(*LvmBackend::ZeroFromTags("pillar-csi.zero-from.1073741824,b"), kGiB);
  EXPECT_FALSE(LvmBackend::ZeroFromTags("pillar-csi.zero-from.").ok());
  EXPECT_FALSE(LvmBackend::ZeroFromTags("pillar-csi.zero-from.-1").ok());
  EXPECT_FALSE(LvmBackend::ZeroFromTags("pillar-csi.zero-from.0,pillar-csi.zero-from.4096").ok());
  // A report with a bad tag is refused as a whole: never "complete".
  exec_.OnOutput({"lvs"}, Lvs({LvRow("v", kGiB, "-wi-a-----", "", "pillar-csi.zero-from.x")}));
  EXPECT_EQ(Linear()->Get("v").status().code(), Code::kInternal);
}

// lvcreate --zero y clears 4 KiB; the rest of the extents may hold a deleted
// volume's data. The LV is born tagged, zeroed whole, then untagged.
TEST_F(LvmBackendTest, CreateLinearZeroesTheWholeLvBeforeItIsComplete) {
  SimLvm lvm(exec_);
  auto vol = Linear()->Create("new", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_EQ(vol->pending, "");
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(kLvsCmd,
                  "lvcreate --yes --wipesignatures y --zero y --type linear --size 1073741824b "
                  "--addtag " +
                      kOwnerTag + " --addtag pillar-csi.zero-from.0 --name new -- vg0",
                  kLvsCmd,
                  "blkdiscard --zeroout --force --offset 0 --length 1073741824 -- /dev/vg0/new",
                  "lvchange --deltag pillar-csi.zero-from.0 -- vg0/new"));
  EXPECT_THAT(lvm.Get("new").tags, ElementsAre(kOwnerTag));
  auto got = Linear()->Get("new");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->pending, "");
}

// Each chunk's progress is recorded in the tag, so a crash costs at most one
// chunk; a crash leaves a volume that is reported pending, is never exposed,
// and that a retried Create finishes from where it stopped.
TEST_F(LvmBackendTest, AnInterruptedZeroingIsReportedNeverExposedAndFinishedByARetry) {
  SimLvm lvm(exec_);
  lvm.fail_blkdiscard_at = 2;
  const int64_t chunk = LvmBackend::kZeroChunkBytes;
  const int64_t size = 2 * chunk + kGiB;
  auto b = Linear();
  auto first = b->Create("big", size, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_FALSE(first.ok());
  EXPECT_THAT(first.status().message(), HasSubstr("simulated crash"));
  EXPECT_THAT(lvm.Get("big").tags,
              ElementsAre(kOwnerTag, "pillar-csi.zero-from." + std::to_string(chunk)));

  auto got = b->Get("big");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->pending, "zeroing from byte " + std::to_string(chunk));
  auto list = b->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].pending, got->pending);
  exec_.ClearCalls();
  auto exposed = b->Expose("big", VolumeMode::kBlock);
  EXPECT_EQ(exposed.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(exposed.status().message(), HasSubstr("zeroing from byte"));
  EXPECT_THAT(exec_.CallLines(), ElementsAre(kLvsCmd));  // not even activated

  exec_.ClearCalls();
  auto retry = b->Create("big", size, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(retry->pending, "");
  const std::string c1 = std::to_string(chunk), c2 = std::to_string(2 * chunk);
  EXPECT_THAT(
      exec_.CallLines(),
      ElementsAre(
          kLvsCmd,
          "blkdiscard --zeroout --force --offset " + c1 + " --length " + c1 + " -- /dev/vg0/big",
          "lvchange --deltag pillar-csi.zero-from." + c1 + " --addtag pillar-csi.zero-from." + c2 +
              " -- vg0/big",
          "blkdiscard --zeroout --force --offset " + c2 + " --length 1073741824 -- /dev/vg0/big",
          "lvchange --deltag pillar-csi.zero-from." + c2 + " -- vg0/big"));
  // Every byte was zeroed once, in order.
  EXPECT_THAT(lvm.zeroed, ElementsAre(std::pair{int64_t{0}, chunk}, std::pair{chunk, chunk},
                                      std::pair{2 * chunk, kGiB}));
  EXPECT_THAT(lvm.Get("big").tags, ElementsAre(kOwnerTag));
  EXPECT_EQ(*b->Expose("big", VolumeMode::kBlock), "/dev/vg0/big");
}

// A create that stopped before its LV was active (a reboot) activates it
// before zeroing.
TEST_F(LvmBackendTest, ARetryActivatesAnInactivePendingLvBeforeZeroing) {
  SimLvm lvm(exec_);
  lvm.Add("v", kGiB, {kOwnerTag, LvmBackend::ZeroTag(0)}, /*active=*/false);
  auto vol = Linear()->Create("v", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kLvsCmd, "lvchange --activate y -- vg0/v",
                          "blkdiscard --zeroout --force --offset 0 --length 1073741824 -- "
                          "/dev/vg0/v",
                          "lvchange --deltag pillar-csi.zero-from.0 -- vg0/v"));
}

// lvextend hands out extents as they are: the tag goes on before them, and
// only the added bytes are zeroed (the tenant's data stays).
TEST_F(LvmBackendTest, ExpandZeroesOnlyTheAddedExtents) {
  SimLvm lvm(exec_);
  lvm.Add("v", kGiB, {kOwnerTag});
  auto grown = Linear()->Expand("v", 2 * kGiB, kOwner);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(grown->size_bytes, 2 * kGiB);
  EXPECT_EQ(grown->pending, "");
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kLvsCmd, "lvchange --addtag pillar-csi.zero-from.1073741824 -- vg0/v",
                          "lvextend --size 2147483648b -- vg0/v", kLvsCmd,
                          "blkdiscard --zeroout --force --offset 1073741824 --length 1073741824 "
                          "-- /dev/vg0/v",
                          "lvchange --deltag pillar-csi.zero-from.1073741824 -- vg0/v"));
  EXPECT_THAT(lvm.Get("v").tags, ElementsAre(kOwnerTag));
}

// A crash after lvextend: the new extents are pending, never exposed, and
// the retried Expand (same size: no growth left) zeroes them.
TEST_F(LvmBackendTest, ARetriedExpandFinishesTheZeroingOfTheAddedExtents) {
  SimLvm lvm(exec_);
  lvm.Add("v", kGiB, {kOwnerTag});
  lvm.fail_blkdiscard_at = 1;
  auto b = Linear();
  ASSERT_FALSE(b->Expand("v", 2 * kGiB, kOwner).ok());
  EXPECT_EQ(lvm.Get("v").size, 2 * kGiB);
  EXPECT_EQ(b->Get("v")->pending, "zeroing from byte 1073741824");
  EXPECT_EQ(b->Expose("v", VolumeMode::kBlock).status().code(), Code::kFailedPrecondition);
  exec_.ClearCalls();
  auto retry = b->Expand("v", 2 * kGiB, kOwner);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(retry->pending, "");
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kLvsCmd,
                          "blkdiscard --zeroout --force --offset 1073741824 --length 1073741824 "
                          "-- /dev/vg0/v",
                          "lvchange --deltag pillar-csi.zero-from.1073741824 -- vg0/v"));
  EXPECT_THAT(lvm.zeroed, ElementsAre(std::pair{kGiB, kGiB}));
  EXPECT_TRUE(b->Expose("v", VolumeMode::kBlock).ok());
}

// A crash between the tag and lvextend: nothing to zero, the tag goes, and
// the retry extends (and zeroes) as the first attempt would have.
TEST_F(LvmBackendTest, ARetriedExpandAfterAFailedLvextendStartsOver) {
  SimLvm lvm(exec_);
  lvm.Add("v", kGiB, {kOwnerTag});
  lvm.fail_lvextend = true;
  auto b = Linear();
  ASSERT_FALSE(b->Expand("v", 2 * kGiB, kOwner).ok());
  EXPECT_EQ(b->Get("v")->pending, "zeroing from byte 1073741824");
  lvm.fail_lvextend = false;
  exec_.ClearCalls();
  auto retry = b->Expand("v", 2 * kGiB, kOwner);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kLvsCmd, "lvchange --deltag pillar-csi.zero-from.1073741824 -- vg0/v",
                          "lvchange --addtag pillar-csi.zero-from.1073741824 -- vg0/v",
                          "lvextend --size 2147483648b -- vg0/v", kLvsCmd,
                          "blkdiscard --zeroout --force --offset 1073741824 --length 1073741824 "
                          "-- /dev/vg0/v",
                          "lvchange --deltag pillar-csi.zero-from.1073741824 -- vg0/v"));
  EXPECT_THAT(lvm.Get("v").tags, ElementsAre(kOwnerTag));
}

// Thin LVs read zeros until written: no tag, no zeroing.
TEST_F(LvmBackendTest, ThinVolumesAreNeverZeroed) {
  OnLvsChangingAfter(
      "lvextend", Lvs({LvRow("tp", 10 * kGiB, "twi-aotz--"), LvRow("t", kGiB, "Vwi-a-tz--", "tp")}),
      Lvs({LvRow("tp", 10 * kGiB, "twi-aotz--"), LvRow("t", 2 * kGiB, "Vwi-a-tz--", "tp")}));
  auto grown = Thin()->Expand("t", 2 * kGiB, kOwner);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre(kLvsCmd, "lvextend --size 2147483648b -- vg0/t", kLvsCmd));
}

// The zeroing runs without the backend's pool-wide lock (AgentCore already
// serialises one volume's operations): another volume is served meanwhile.
TEST_F(LvmBackendTest, AZeroingDoesNotHoldUpOtherVolumes) {
  SimLvm lvm(exec_);
  lvm.Add("other", kGiB, {kOwnerTag});
  auto b = Linear();
  bool served_meanwhile = false;
  // Outlives the handler: should the lock be held, the Expose finishes once
  // Create returns, and the test fails instead of hanging.
  std::future<StatusOr<std::string>> other;
  lvm.during_blkdiscard = [&] {
    other = std::async(std::launch::async, [&] { return b->Expose("other", VolumeMode::kBlock); });
    served_meanwhile = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  };
  ASSERT_TRUE(b->Create("new", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt).ok());
  EXPECT_TRUE(served_meanwhile);
}

// --- Snapshots (lvm-thin) -------------------------------------------------------

constexpr char kSnapOwner[] = "22222222-2222-4333-8444-555555555555";

// thin-1 (a volume), a thin snapshot of it (activation skip: 'k' in lv_attr
// [9]) and a volume restored from that snapshot.
std::string ThinVgWithSnapshot() {
  return Lvs(
      {LvRow("tp", 10 * kGiB, "twi-aotz--"), LvRow("thin-1", 5 * kGiB, "Vwi-a-tz--", "tp"),
       LvRow(
           "s-1", 5 * kGiB, "Vwi---tz-k", "tp",
           std::string("pillar-csi.snapshot-uid.") + kSnapOwner + ",pillar-csi.snapshot-of.thin-1"),
       LvRow("r-1", 6 * kGiB, "Vwi-a-tz--", "tp",
             std::string("pillar-csi.volume-uid.") + kOwner + ",pillar-csi.origin-snapshot.s-1")});
}

constexpr char kLvTimes[] =
    "  {\"report\": [{\"lv\": [{\"lv_name\":\"tp\", \"lv_time\":\"2026-12-01 10:00:00 +0000\"},"
    " {\"lv_name\":\"s-1\", \"lv_time\":\"2026-12-06 23:04:58 +0100\"}]}]}\n";

TEST_F(LvmBackendTest, ThinSnapshotsAreNoVolumesAndCarryTheirMarks) {
  exec_.OnOutput({"lvs", "--reportformat", "json", "--units"}, ThinVgWithSnapshot());
  exec_.OnOutput({"lvs", "--reportformat", "json", "-o", "lv_name,lv_time"}, kLvTimes);
  auto b = Thin();
  auto vols = b->List();
  ASSERT_TRUE(vols.ok()) << vols.status().ToString();
  ASSERT_EQ(vols->size(), 2u);
  EXPECT_EQ((*vols)[0].name, "thin-1");
  EXPECT_EQ((*vols)[1].origin, "snapshot vg0/s-1");
  EXPECT_EQ(b->Get("s-1").status().code(), Code::kFailedPrecondition);
  auto snaps = b->ListSnapshots();
  ASSERT_TRUE(snaps.ok()) << snaps.status().ToString();
  ASSERT_EQ(snaps->size(), 1u);
  const BackendSnapshot& s = (*snaps)[0];
  EXPECT_EQ(s.name, "s-1");
  EXPECT_EQ(s.source_volume, "thin-1");
  EXPECT_EQ(s.size_bytes, 5 * kGiB);
  EXPECT_EQ(s.owner_uid, kSnapOwner);
  EXPECT_TRUE(s.detached);
  // 2026-12-06 22:04:58 UTC.
  EXPECT_EQ(s.creation_time_unix_nanos, int64_t{1796594698} * 1000000000);
}

TEST_F(LvmBackendTest, ParsesLvTime) {
  EXPECT_EQ(LvmBackend::ParseLvTime("1970-01-01 00:00:00 +0000"), 0);
  EXPECT_EQ(LvmBackend::ParseLvTime("1970-01-01 01:30:00 +0130"), 0);
  EXPECT_EQ(LvmBackend::ParseLvTime("1969-12-31 22:00:00 -0200"), 0);
  for (const char* bad : {"", "2026-12-06", "2026-13-06 00:00:00 +0000", "2026-12-06 00:00:00 0000",
                          "2026-12-06 00:00:00 +0000 x"}) {
    EXPECT_EQ(LvmBackend::ParseLvTime(bad), std::nullopt) << bad;
  }
}

TEST_F(LvmBackendTest, ThinSnapshotIsAnLvcreateSnapshotWithActivationSkip) {
  exec_.OnOutput({"lvs"}, ThinVgWithSnapshot());
  exec_.OnOutput({"lvs", "--reportformat", "json", "-o", "lv_name,lv_time"}, kLvTimes);
  exec_.OnOutput({"lvcreate"}, "");
  (void)Thin()->CreateSnapshot("thin-1", kOwner, "s-2", kSnapOwner, false);
  EXPECT_THAT(exec_.CallLines(),
              ::testing::Contains(std::string("lvcreate --yes --snapshot --setactivationskip y "
                                              "--addtag pillar-csi.snapshot-uid.") +
                                  kSnapOwner +
                                  " --addtag pillar-csi.snapshot-of.thin-1 --name s-2 -- "
                                  "vg0/thin-1"));
}

TEST_F(LvmBackendTest, RestoreIsAThinSnapshotOfTheSnapshotGrownByLvextend) {
  exec_.OnOutput({"lvs", "--reportformat", "json", "-o", "lv_name,lv_time"}, kLvTimes);
  std::string after = ThinVgWithSnapshot();
  after.insert(after.find(kLvsFooter) - 1,
               ",\n" + LvRow("r-2", 5 * kGiB, "Vwi-a-tz--", "tp",
                             std::string("pillar-csi.volume-uid.") + kOwner +
                                 ",pillar-csi.origin-snapshot.s-1"));
  OnLvsChangingAfter("lvcreate", ThinVgWithSnapshot(), after);
  exec_.OnOutput({"lvextend"}, "");
  VolumeSource from{VolumeSource::Kind::kSnapshot, "s-1", kSnapOwner, false};
  (void)Thin()->CreateFrom("r-2", 6 * kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt, from);
  std::vector<std::string> changes;
  for (const auto& line : exec_.CallLines()) {
    if (!line.starts_with("lvs")) changes.push_back(line);
  }
  EXPECT_THAT(
      changes,
      ElementsAre(std::string("lvcreate --yes --snapshot --setactivationskip n --addtag "
                              "pillar-csi.volume-uid.") +
                      kOwner + " --addtag pillar-csi.origin-snapshot.s-1 --name r-2 -- vg0/s-1",
                  "lvextend --size 6442450944b -- vg0/r-2"));
}

TEST_F(LvmBackendTest, DeleteSnapshotIsAnLvremoveGuardedByItsMark) {
  exec_.OnOutput({"lvs", "--reportformat", "json", "--units"}, ThinVgWithSnapshot());
  exec_.OnOutput({"lvs", "--reportformat", "json", "-o", "lv_name,lv_time"}, kLvTimes);
  exec_.OnOutput({"lvremove"}, "");
  EXPECT_EQ(Thin()->DeleteSnapshot("s-1", kOwner).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(Thin()->DeleteSnapshot("s-1", kSnapOwner).ok());
  auto lines = exec_.CallLines();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), std::string("lvremove --yes -- vg0/s-1")), 1);
}

TEST_F(LvmBackendTest, LinearPoolsRefuseSnapshotsAndCopiesNamingWhy) {
  auto b = Linear();
  auto snap = b->CreateSnapshot("vol-1", kOwner, "s", kSnapOwner, false);
  EXPECT_EQ(snap.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(snap.status().message(), HasSubstr("use an lvm-thin pool"));
  VolumeSource from{VolumeSource::Kind::kVolume, "vol-1", kOwner, false};
  auto copy = b->CreateFrom("c", kGiB, VolumeMode::kBlock, {}, kOwner, std::nullopt, from);
  EXPECT_EQ(copy.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(copy.status().message(), HasSubstr("lvm-thin"));
  auto list = b->ListSnapshots();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, IsEmpty());
  EXPECT_THAT(exec_.calls(), IsEmpty());
}

}  // namespace
}  // namespace pillar::agent
