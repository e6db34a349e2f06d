// The volume context contract: what the controller formats is what the node
// parses, and a bad context is refused naming its key.
#include "common/volume_context.h"

#include <gtest/gtest.h>

namespace pillar {
namespace {

VolumeContext Nvme() {
  VolumeContext c;
  c.protocol = Protocol::kNvmeofTcp;
  c.agent_volume_id = "tank/pvc-1";
  c.fs_type = "ext4";
  c.target_id = "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1";
  c.address = "10.0.0.5";
  c.port = 4420;
  return c;
}

TEST(VolumeContextTest, FormatThenParseIsTheSameContext) {
  VolumeContext nvme = Nvme();
  ContextMap m = FormatVolumeContext(nvme);
  EXPECT_EQ(m, (ContextMap{{"protocol", "nvmeof-tcp"},
                           {"agentVolumeID", "tank/pvc-1"},
                           {"fsType", "ext4"},
                           {"targetID", "nqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1"},
                           {"address", "10.0.0.5"},
                           {"port", "4420"}}));
  EXPECT_EQ(ParseVolumeContext(m).value(), nvme);

  VolumeContext iscsi = Nvme();
  iscsi.protocol = Protocol::kIscsi;
  iscsi.target_id = "iqn.2026-12.com.bhyoo.pillar-csi:tank:2fpvc-1";
  iscsi.port = 3260;
  iscsi.auth = "chap";
  iscsi.read_only = true;
  EXPECT_EQ(ParseVolumeContext(FormatVolumeContext(iscsi)).value(), iscsi);

  VolumeContext nfs;
  nfs.protocol = Protocol::kNfs;
  nfs.target_id = "/srv/pillar/pvc-2";
  nfs.address = "fd00::5";
  EXPECT_EQ(FormatVolumeContext(nfs).count("port"), 0U) << "NFS's own port is left out";
  EXPECT_EQ(ParseVolumeContext(FormatVolumeContext(nfs)).value(), nfs);
}

TEST(VolumeContextTest, KeysOfTheCoAreIgnoredAndBadValuesAreRefusedByKey) {
  ContextMap m = FormatVolumeContext(Nvme());
  m["csi.storage.k8s.io/pod.name"] = "web-0";
  EXPECT_TRUE(ParseVolumeContext(m).ok());
  struct Case {
    const char* key;
    const char* value;
  };
  for (const Case& c :
       {Case{"protocol", "fc"}, Case{"protocol", ""}, Case{"targetID", ""},
        Case{"targetID", "iqn.2026-12.x:y"}, Case{"address", "storage-1"}, Case{"address", ""},
        Case{"port", ""}, Case{"port", "0"}, Case{"port", "65536"}, Case{"port", "44x"},
        Case{"fsType", "btrfs"}, Case{"auth", "kerberos"}, Case{"readonly", "yes"},
        Case{"agentVolumeID", "../etc"}}) {
    ContextMap bad = m;
    bad[c.key] = c.value;
    auto parsed = ParseVolumeContext(bad);
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << c.key << "=" << c.value;
    EXPECT_NE(parsed.status().message().find(std::string("volume context ") + c.key),
              std::string::npos)
        << parsed.status().message();
  }
  ContextMap nfs = {{"protocol", "nfs"}, {"targetID", "/srv/a,rw"}, {"address", "10.0.0.5"}};
  EXPECT_EQ(ParseVolumeContext(nfs).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pillar
