#include "agent/backends/backend_util.h"

#include <gtest/gtest.h>

#include <limits>

namespace pillar::agent::backend_util {
namespace {

TEST(BackendUtilTest, RoundUpAndOverflow) {
  EXPECT_EQ(*RoundUp(1000, 512), 1024);
  EXPECT_EQ(*RoundUp(1024, 512), 1024);
  EXPECT_EQ(RoundUp(std::numeric_limits<int64_t>::max() - 10, 4096).status().code(),
            Code::kOutOfRange);
}

TEST(BackendUtilTest, PlanExpand) {
  EXPECT_EQ(*PlanExpand("p/v", 10, 10), Growth::kNone);
  EXPECT_EQ(*PlanExpand("p/v", 10, 11), Growth::kGrow);
  EXPECT_EQ(PlanExpand("p/v", 10, 9).status().code(), Code::kOutOfRange);
}

TEST(BackendUtilTest, ParseCountIsStrict) {
  EXPECT_EQ(ParseCount("1073741824"), 1073741824);
  EXPECT_EQ(ParseCount("0"), 0);
  for (const char* bad : {"", "-1", "1G", " 1", "1.5", "99999999999999999999"}) {
    EXPECT_FALSE(ParseCount(bad).has_value()) << bad;
  }
}

TEST(BackendUtilTest, VolumeModeNames) {
  EXPECT_STREQ(VolumeModeName(VolumeMode::kBlock), "block");
  EXPECT_STREQ(VolumeModeName(VolumeMode::kFilesystem), "filesystem");
}

}  // namespace
}  // namespace pillar::agent::backend_util
