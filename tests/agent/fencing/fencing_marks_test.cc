#include "agent/fencing/fencing_marks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "common/temp_dir.h"

namespace pillar::agent {
namespace {

using pillar::testing::TempDir;

constexpr const char* kVol = "tank/pvc-1";
constexpr const char* kUid = "0b5e8f0e-2f4b-4c59-9a43-6f1f0e4a7d11";
constexpr const char* kOtherUid = "7c2d9a5b-1e3f-4a6b-8c7d-9e0f1a2b3c4d";

class FixedClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1798761600));
  }
  std::chrono::steady_clock::time_point SteadyNow() override { return {}; }
  void SleepFor(std::chrono::milliseconds) override {}
};

class FencingMarksTest : public ::testing::Test {
 protected:
  std::string Root() const { return dir_.Sub("generations"); }
  FencingMarks Marks() { return FencingMarks(fs_, clock_, Root()); }

  TempDir dir_;
  PosixFs fs_;
  FixedClock clock_;
};

TEST_F(FencingMarksTest, NoMarkAcceptsAnyWriteAndGetIsEmpty) {
  FencingMarks marks = Marks();
  EXPECT_TRUE(marks.Check(kVol, kUid, 0).ok());
  auto got = marks.Get(kVol);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->has_value());
  EXPECT_FALSE(fs_.Exists(Root()));  // Check and Get write nothing
}

TEST_F(FencingMarksTest, AdvancePersistsAcrossInstances) {
  {
    FencingMarks marks = Marks();
    ASSERT_TRUE(marks.Advance(kVol, kUid, 3).ok());
  }
  FencingMarks restarted = Marks();
  auto got = restarted.Get(kVol);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, (Mark{kUid, 3, "2027-01-01T00:00:00Z"}));
  Status stale = restarted.Check(kVol, kUid, 2);
  EXPECT_EQ(stale.code(), Code::kAborted) << stale.ToString();
}

TEST_F(FencingMarksTest, FileNameIsEscapedAndContentIsJson) {
  FencingMarks marks = Marks();
  ASSERT_TRUE(marks.Advance("Tank/pillar/vol_1", kUid, 5).ok());
  std::string path = Root() + "/:54ank:2fpillar:2fvol:5f1.json";
  EXPECT_EQ(marks.MarkPath("Tank/pillar/vol_1"), path);
  auto text = fs_.ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, std::string("{\"generation\":5,\"updated\":\"2027-01-01T00:00:00Z\","
                               "\"volumeUid\":\"") +
                       kUid + "\"}\n");
}

TEST_F(FencingMarksTest, OlderGenerationRefusedEqualAndNewerAccepted) {
  FencingMarks marks = Marks();
  ASSERT_TRUE(marks.Advance(kVol, kUid, 7).ok());

  Status older = marks.Advance(kVol, kUid, 6);
  EXPECT_EQ(older.code(), Code::kAborted);
  EXPECT_NE(older.message().find(kVol), std::string::npos) << older.message();
  EXPECT_NE(older.message().find("generation 7"), std::string::npos) << older.message();
  EXPECT_NE(older.message().find("generation 6"), std::string::npos) << older.message();
  EXPECT_NE(older.message().find("stale"), std::string::npos) << older.message();

  EXPECT_TRUE(marks.Check(kVol, kUid, 7).ok());
  EXPECT_TRUE(marks.Advance(kVol, kUid, 7).ok());
  EXPECT_TRUE(marks.Advance(kVol, kUid, 9).ok());
  EXPECT_EQ(marks.Get(kVol)->value().generation, 9);
}

TEST_F(FencingMarksTest, EqualGenerationWritesNothing) {
  FencingMarks marks = Marks();
  ASSERT_TRUE(marks.Advance(kVol, kUid, 4).ok());
  // A file planted with another timestamp survives an equal Advance untouched.
  std::string planted = std::string("{\"volumeUid\":\"") + kUid +
                        "\",\"generation\":4,\"updated\":\"2020-01-01T00:00:00Z\"}";
  ASSERT_TRUE(fs_.WriteFileAtomic(marks.MarkPath(kVol), planted).ok());
  ASSERT_TRUE(marks.Advance(kVol, kUid, 4).ok());
  EXPECT_EQ(*fs_.ReadFile(marks.MarkPath(kVol)), planted);
}

TEST_F(FencingMarksTest, OtherLifecycleRefusedWhateverItsGeneration) {
  FencingMarks marks = Marks();
  ASSERT_TRUE(marks.Advance(kVol, kUid, 2).ok());
  for (int64_t gen : {0, 2, 100}) {
    Status s = marks.Advance(kVol, kOtherUid, gen);
    EXPECT_EQ(s.code(), Code::kAborted) << gen;
    EXPECT_NE(s.message().find(kUid), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(kOtherUid), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("another lifecycle"), std::string::npos) << s.message();
  }
  EXPECT_EQ(marks.Get(kVol)->value(), (Mark{kUid, 2, "2027-01-01T00:00:00Z"}));
}

TEST_F(FencingMarksTest, MarksArePerVolume) {
  FencingMarks marks = Marks();
  ASSERT_TRUE(marks.Advance("tank/a", kUid, 10).ok());
  EXPECT_TRUE(marks.Advance("tank/b", kOtherUid, 1).ok());
  EXPECT_TRUE(marks.Check("tank/a", kUid, 10).ok());
  EXPECT_EQ(marks.Check("tank/b", kUid, 10).code(), Code::kAborted);
}

TEST_F(FencingMarksTest, CorruptMarkIsInternalNamingTheFileNeverAbsent) {
  FencingMarks marks = Marks();
  ASSERT_TRUE(fs_.MakeDirs(Root()).ok());
  std::string path = marks.MarkPath(kVol);
  for (std::string bad :
       {std::string(""), std::string("{\"volumeUid\":"), std::string("[1,2]"),
        std::string("{\"volumeUid\":\"not-a-uuid\",\"generation\":1}"),
        std::string("{\"volumeUid\":\"") + kUid + "\",\"generation\":-1}",
        std::string("{\"volumeUid\":\"") + kUid + "\",\"generation\":\"1\"}",
        std::string("{\"volumeUid\":\"") + kUid + "\",\"generation\":1.5}",
        std::string("{\"volumeUid\":\"") + kUid + "\",\"generation\":18446744073709551615}",
        std::string("{\"volumeUid\":\"") + kUid + "\"}"}) {
    ASSERT_TRUE(fs_.WriteFileAtomic(path, bad).ok());
    for (Status s : {marks.Check(kVol, kUid, 1), marks.Advance(kVol, kUid, 1),
                     marks.Reset(kVol, kUid), marks.Remove(kVol, kUid), marks.Get(kVol).status()}) {
      EXPECT_EQ(s.code(), Code::kInternal) << bad << ": " << s.ToString();
      EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    }
    EXPECT_EQ(*fs_.ReadFile(path), bad);  // left for an operator to inspect
  }
}

TEST_F(FencingMarksTest, UnreadableMarkIsInternal) {
  FencingMarks marks = Marks();
  // A directory where the mark file should be: read fails with EISDIR.
  ASSERT_TRUE(fs_.MakeDirs(marks.MarkPath(kVol)).ok());
  EXPECT_EQ(marks.Check(kVol, kUid, 1).code(), Code::kInternal);
}

TEST_F(FencingMarksTest, ResetStartsLifecycleKeepsSameUidRefusesOther) {
  FencingMarks marks = Marks();
  ASSERT_TRUE(marks.Reset(kVol, kUid).ok());
  EXPECT_EQ(marks.Get(kVol)->value().generation, 0);
  ASSERT_TRUE(marks.Advance(kVol, kUid, 5).ok());
  // A retried CreateVolume must not lower the generation (that would unfence).
  ASSERT_TRUE(marks.Reset(kVol, kUid).ok());
  EXPECT_EQ(marks.Get(kVol)->value().generation, 5);
  Status other = marks.Reset(kVol, kOtherUid);
  EXPECT_EQ(other.code(), Code::kAlreadyExists) << other.ToString();
  EXPECT_NE(other.message().find(kUid), std::string::npos) << other.message();
}

TEST_F(FencingMarksTest, RemoveDropsOwnMarkOnlyThenNewLifecycleStarts) {
  FencingMarks marks = Marks();
  EXPECT_TRUE(marks.Remove(kVol, kUid).ok());  // absent is success
  ASSERT_TRUE(marks.Advance(kVol, kUid, 3).ok());
  Status other = marks.Remove(kVol, kOtherUid);
  EXPECT_EQ(other.code(), Code::kAborted) << other.ToString();
  EXPECT_TRUE(marks.Get(kVol)->has_value());
  ASSERT_TRUE(marks.Remove(kVol, kUid).ok());
  EXPECT_FALSE(fs_.Exists(marks.MarkPath(kVol)));
  EXPECT_TRUE(marks.Reset(kVol, kOtherUid).ok());
  EXPECT_TRUE(marks.Advance(kVol, kOtherUid, 1).ok());
  EXPECT_EQ(marks.Check(kVol, kUid, 100).code(), Code::kAborted);
}

TEST_F(FencingMarksTest, InvalidArgumentsRefusedBeforeTouchingDisk) {
  FencingMarks marks = Marks();
  for (Status s :
       {marks.Advance("../etc", kUid, 1), marks.Advance("tank", kUid, 1),
        marks.Advance("tank/a/../../b", kUid, 1), marks.Advance(kVol, "uid", 1),
        marks.Advance(kVol, kUid, -1), marks.Check(kVol, "", 0), marks.Reset("tank/", kUid),
        marks.Remove(kVol, "x"), marks.Get("/abs/path").status()}) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  }
  EXPECT_FALSE(fs_.Exists(Root()));
}

TEST_F(FencingMarksTest, ConcurrentAdvanceEndsAtTheMaximum) {
  FencingMarks marks = Marks();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::vector<int64_t> gens;
  for (int64_t g = 1; g <= kThreads * kPerThread; ++g) gens.push_back(g);
  std::shuffle(gens.begin(), gens.end(), std::mt19937(42));
  std::vector<std::thread> threads;
  std::atomic<int> unexpected{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Status s = marks.Advance(kVol, kUid, gens[t * kPerThread + i]);
        if (!s.ok() && s.code() != Code::kAborted) ++unexpected;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(marks.Get(kVol)->value().generation, kThreads * kPerThread);
  EXPECT_EQ(Marks().Get(kVol)->value().generation, kThreads * kPerThread);
}

}  // namespace
}  // namespace pillar::agent
