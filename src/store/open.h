// The one way the daemons and pillarctl open the store: a URI names the
// backend. "sqlite:/var/lib/pillar-csi/controller/store.db" or a plain path
// is the embedded SQLite store; "kube" (in-cluster) or "kube:<kubeconfig>" is
// the Kubernetes API server (store/kube).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "store/store.h"

namespace pillar::kube {
class Client;
}  // namespace pillar::kube

namespace pillar::store {

struct StoreUri {
  enum class Backend { kSqlite, kKube };
  Backend backend = Backend::kSqlite;
  std::string path;  // the SQLite file, or the kubeconfig ("" = in-cluster)
};

// INVALID_ARGUMENT naming --store for an empty or unknown URI.
StatusOr<StoreUri> ParseStoreUri(const std::string& uri);

StatusOr<std::unique_ptr<Store>> OpenStore(const StoreUri& where);

// A store with what a daemon on it may need besides the Store interface.
struct OpenedStore {
  std::unique_ptr<Store> store;
  // The Kubernetes API server's client when the store is the Kubernetes one
  // (owned by the store: valid as long as it is); null on SQLite.
  kube::Client* kube = nullptr;
};
StatusOr<OpenedStore> OpenStoreWithClient(const StoreUri& where);
StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& uri);

}  // namespace pillar::store
