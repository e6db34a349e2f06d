#include "store/open.h"

#include "store/kube/kube_store.h"
#include "store/sqlite/sqlite_store.h"

namespace pillar::store {

StatusOr<StoreUri> ParseStoreUri(const std::string& uri) {
  if (uri.empty()) return InvalidArgument("--store is empty: want sqlite:PATH, PATH or kube");
  StoreUri out;
  if (uri == "kube" || uri == "kubernetes") {
    out.backend = StoreUri::Backend::kKube;
    return out;
  }
  for (const char* prefix : {"kube:", "kubernetes:"}) {
    if (uri.rfind(prefix, 0) == 0) {
      out.backend = StoreUri::Backend::kKube;
      out.path = uri.substr(std::string(prefix).size());
      return out;
    }
  }
  out.path = uri.rfind("sqlite:", 0) == 0 ? uri.substr(7) : uri;
  if (out.path.empty() || out.path.find(':') != std::string::npos) {
    return InvalidArgument("--store \"" + uri + "\": want sqlite:PATH, PATH or kube[:KUBECONFIG]");
  }
  return out;
}

StatusOr<std::unique_ptr<Store>> OpenStore(const StoreUri& where) {
  if (where.backend == StoreUri::Backend::kKube) {
    ASSIGN_OR_RETURN(auto kube, KubeStore::Open(where.path));
    return std::unique_ptr<Store>(std::move(kube));
  }
  ASSIGN_OR_RETURN(auto sqlite, SqliteStore::Open({where.path}));
  return std::unique_ptr<Store>(std::move(sqlite));
}

StatusOr<OpenedStore> OpenStoreWithClient(const StoreUri& where) {
  OpenedStore out;
  if (where.backend == StoreUri::Backend::kKube) {
    ASSIGN_OR_RETURN(auto kube, KubeStore::Open(where.path));
    out.kube = &kube->client();
    out.store = std::move(kube);
    return out;
  }
  ASSIGN_OR_RETURN(out.store, OpenStore(where));
  return out;
}

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& uri) {
  ASSIGN_OR_RETURN(StoreUri where, ParseStoreUri(uri));
  return OpenStore(where);
}

}  // namespace pillar::store
