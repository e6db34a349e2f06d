// What pillar reads from the Kubernetes side must never crash it: an object
// the API server sends (FromKubeJson, then the API kinds' loaders) and a
// kubeconfig file. The first byte picks which; the rest is the input.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/convert.h"
#include "kube/client.h"
#include "store/kube/kube_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return 0;
    for (const char* kind : {"PillarVolumeState", "PillarNode", "PillarAgent"}) {
      auto o = pillar::store::FromKubeJson(kind, j);
      if (!o.ok()) continue;
      // Whatever the store accepts has what a watch resumes from.
      if (o->resource_version.empty() || o->uid.empty() || o->kind != kind) std::abort();
      (void)pillar::api::LoadVolume(*o);
      (void)pillar::api::LoadNode(*o);
      (void)pillar::api::LoadAgent(*o);
    }
    return 0;
  }
  static const std::string path = "/dev/shm/pillar-kube-fuzz-" + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(in.data(), 1, in.size(), f);
  std::fclose(f);
  auto config = pillar::kube::LoadKubeconfig(path);
  if (config.ok() && config->server.empty()) std::abort();  // accepted means usable
  std::remove(path.c_str());
  return 0;
}
