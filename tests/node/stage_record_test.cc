#include "node/stage_record.h"

#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "node/paths.h"
#include "node_test_util.h"

namespace pillar::node {
namespace {

using pillar::testing::TempDir;

TEST(NodeStageRecords, RoundTripAndList) {
  TempDir tmp;
  PosixFs fs;
  StageRecordStore store(fs, tmp.Sub("state/volumes"));
  ASSERT_TRUE(store.Init().ok());
  StageRecord r;
  r.volume_id = "pvc-1";
  r.staging_path = "/var/lib/kubelet/plugins/x/globalmount";
  r.target = {
      Protocol::kNvmeofTcp, "nqn.2026-01.com.bhyoo.pillar:tank.pvc-1", "fd00::1", 4420, 3, 0};
  r.target.timing.nvme_ctrl_loss_tmo = 60;
  r.fs_type = "xfs";
  r.mount_flags = {"noatime"};
  r.device = "/dev/nvme0n3";
  r.state = "staged";
  ASSERT_TRUE(store.Put(r).ok());
  StageRecordStore reopened(fs, tmp.Sub("state/volumes"));
  auto back = reopened.Get("pvc-1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->target.nsid, 3);
  EXPECT_EQ(back->target.timing.nvme_ctrl_loss_tmo, 60);
  EXPECT_FALSE(back->target.timing.nvme_reconnect_delay.has_value());
  EXPECT_EQ(back->target.address, "fd00::1");
  EXPECT_EQ(back->mount_flags, (std::vector<std::string>{"noatime"}));
  EXPECT_EQ(back->device, "/dev/nvme0n3");
  EXPECT_EQ(StageRecordToJson(*back), StageRecordToJson(r));

  testing::WriteText(tmp.Sub("state/volumes/broken.json"), "{not json");
  testing::WriteText(tmp.Sub("state/volumes/pvc-2.json.tmp.123"), "{}");
  EXPECT_EQ(reopened.List().size(), 1u);
  EXPECT_TRUE(reopened.Delete("pvc-1").ok());
  EXPECT_TRUE(reopened.Delete("pvc-1").ok());
  EXPECT_EQ(reopened.Get("pvc-1").status().code(), Code::kNotFound);
  // A volume id never becomes a path outside the directory.
  EXPECT_EQ(reopened.Get("../../etc/passwd").status().code(), Code::kInvalidArgument);
}

TEST(NodePaths, AbsoluteAndClean) {
  EXPECT_TRUE(ValidateCleanPath("p", "/var/lib/kubelet/pods/u/volumes/x/mount").ok());
  EXPECT_TRUE(ValidateCleanPath("p", "/").ok());
  EXPECT_TRUE(ValidateCleanPath("p", "/a/with space/..x").ok());
  for (const char* bad : {"", "rel", "/a/../b", "/a/./b", "/a//b", "/a/", "/..", "/a/.."}) {
    Status s = ValidateCleanPath("target_path", bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("target_path"), std::string::npos);
  }
  EXPECT_FALSE(ValidateCleanPath("p", std::string("/a\nb")).ok());
  EXPECT_EQ(ParentDir("/a/b/c"), "/a/b");
  EXPECT_EQ(ParentDir("/a"), "/");
}

}  // namespace
}  // namespace pillar::node
