// Checks every backend's tests share.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "agent/backends/backend.h"

namespace pillar::agent {

// The lifecycle the tests' volumes belong to, and another one.
inline constexpr char kOwner[] = "11111111-2222-4333-8444-555555555555";
inline constexpr char kOtherOwner[] = "99999999-2222-4333-8444-555555555555";

// Every operation of a backend configured with a bad pool (or directory,
// or thin pool) fails with INVALID_ARGUMENT; callers then assert that no
// command ran and no path was touched.
inline void ExpectEveryOperationRefused(Backend& b) {
  constexpr int64_t kSize = int64_t{1} << 30;
  EXPECT_EQ(b.Create("v", kSize, VolumeMode::kBlock, {}, kOwner, std::nullopt).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(b.Expand("v", kSize, kOwner).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Delete("v", kOwner).code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Get("v").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.List().status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Capacity().status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Expose("v", VolumeMode::kBlock).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(b.Unexpose("v").code(), Code::kInvalidArgument);
}

// The permission bits and owner of `path` itself (lstat), to check what a
// Create gave a volume's root directory.
inline VolumeRoot RootOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return {st.st_mode & 07777, st.st_uid, st.st_gid};
}

}  // namespace pillar::agent
