// The one store opener: a URI names the backend.
#include "store/open.h"

#include <gtest/gtest.h>

#include "common/temp_dir.h"

namespace pillar::store {
namespace {

TEST(OpenStoreTest, UrisNameTheBackend) {
  auto plain = ParseStoreUri("/var/lib/pillar-csi/controller/store.db");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->backend, StoreUri::Backend::kSqlite);
  EXPECT_EQ(plain->path, "/var/lib/pillar-csi/controller/store.db");
  auto sqlite = ParseStoreUri("sqlite:/tmp/s.db");
  ASSERT_TRUE(sqlite.ok());
  EXPECT_EQ(sqlite->path, "/tmp/s.db");
  auto kube = ParseStoreUri("kube:/etc/kubeconfig");
  ASSERT_TRUE(kube.ok());
  EXPECT_EQ(kube->backend, StoreUri::Backend::kKube);
  EXPECT_EQ(kube->path, "/etc/kubeconfig");
  EXPECT_EQ(ParseStoreUri("kube")->path, "");
  for (const char* bad : {"", "sqlite:", "etcd://x:2379"}) {
    auto r = ParseStoreUri(bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--store"), std::string::npos) << r.status().message();
  }
}

TEST(OpenStoreTest, OpensSqliteAndTheKubeBackendNeedsItsConfig) {
  testing::TempDir dir;
  auto st = OpenStore("sqlite:" + dir.Sub("s.db"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  Object o;
  o.kind = "PillarNode";
  o.name = "node-a";
  EXPECT_TRUE((*st)->Create(o).ok());
  auto again = OpenStore(dir.Sub("s.db"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->Get("PillarNode", "node-a").ok()) << "a plain path opens the same file";
  // Not in a pod, and a kubeconfig that is not there: said, not guessed.
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(OpenStore("kube").status().code(), Code::kFailedPrecondition);
  auto missing = OpenStore("kube:" + dir.Sub("no-such-kubeconfig"));
  EXPECT_EQ(missing.status().code(), Code::kNotFound) << missing.status().ToString();
}

}  // namespace
}  // namespace pillar::store
