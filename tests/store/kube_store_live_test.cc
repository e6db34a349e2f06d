// The store conformance suite on the Kubernetes backend, against a real
// kube-apiserver and etcd (tests/k8s/suites/k8s-store.sh starts them). Not a
// ctest test: it needs that server. Environment:
//   PILLAR_TEST_KUBECONFIG  the admin kubeconfig of the API server
//   PILLAR_TEST_ETCD        etcd's client URL (compaction is asked of etcd)
//   PILLAR_TEST_GROUP       the API group of the suite's own CRDs (same kinds
//                           as pillar's, schemaless, with a status subresource)
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "store/kube/kube_store.h"
#include "store/store_conformance.h"

namespace pillar::store {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

KubeStoreOptions SuiteOptions() {
  KubeStoreOptions o;
  const std::string group = Env("PILLAR_TEST_GROUP");
  o.kinds[kPillarVolumeState] = {group, "v1", "pillarvolumestates"};
  o.kinds[kPillarAgent] = {group, "v1", "pillaragents"};
  o.kinds[kPillarNode] = {group, "v1", "pillarnodes"};
  o.watch_timeout = std::chrono::seconds(60);
  return o;
}

std::unique_ptr<KubeStore> OpenKube() {
  auto store = KubeStore::Open(Env("PILLAR_TEST_KUBECONFIG"), SuiteOptions());
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    return nullptr;
  }
  return std::move(store).value();
}

// Each test's directory stands for an empty store: the first open of a new
// directory deletes every object of the suite's kinds and waits until they
// are gone.
Status Wipe(KubeStore& store) {
  for (const auto& [kind, r] : SuiteOptions().kinds) {
    const std::string path = "/apis/" + r.group + "/" + r.version + "/" + r.plural;
    auto done = store.client().Call("DELETE", path);
    if (!done.ok()) return done.status().Annotate("wipe " + kind);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (const auto& [kind, r] : SuiteOptions().kinds) {
    while (true) {
      auto list = store.List(kind);
      if (!list.ok()) return list.status();
      if (list->items.empty()) break;
      if (std::chrono::steady_clock::now() > deadline) return Unavailable("wipe " + kind);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return Status::Ok();
}

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

// etcd's own compaction (its JSON gateway); Kubernetes resourceVersions are
// etcd revisions.
Status CompactEtcd(const std::string& resource_version) {
  const std::string url = Env("PILLAR_TEST_ETCD") + "/v3/kv/compaction";
  const std::string body = R"({"revision": ")" + resource_version + R"(", "physical": true})";
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Internal("curl_easy_init");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK || code != 200) {
    return Unavailable("etcd compaction at " + resource_version + ": curl " +
                       curl_easy_strerror(rc) + ", HTTP " + std::to_string(code));
  }
  return Status::Ok();
}

testing::StoreBackend KubeBackend() {
  testing::StoreBackend backend;
  backend.name = "kube";
  backend.dns_names = true;
  backend.open = [](const std::string& dir) -> std::unique_ptr<Store> {
    static std::string wiped;  // per process: the crash test's child inherits it
    auto store = OpenKube();
    if (store == nullptr) return nullptr;
    if (wiped != dir) {
      Status s = Wipe(*store);
      if (!s.ok()) {
        ADD_FAILURE() << s.ToString();
        return nullptr;
      }
      wiped = dir;
    }
    return store;
  };
  backend.compact = [](Store&, const std::string& resource_version) {
    return CompactEtcd(resource_version);
  };
  backend.requests = [](Store& store) {
    return static_cast<int64_t>(dynamic_cast<KubeStore&>(store).client().requests());
  };
  return backend;
}

using testing::StoreConformanceTest;
INSTANTIATE_TEST_SUITE_P(Kube, StoreConformanceTest, ::testing::Values(KubeBackend()),
                         testing::BackendName);

}  // namespace
}  // namespace pillar::store
