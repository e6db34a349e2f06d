// store-edit: test-only edits of the controller's SQLite store, for e2e
// scenarios that need recorded intent the controller itself never writes.
//
//   store-edit --store FILE strip-export-spec VOLUME
//       removes status.exportSpec of PillarVolumeState VOLUME (a volume
//       "provisioned before exportSpec was recorded"), through the store's
//       own compare-and-swap UpdateStatus so watchers see the change.
//   store-edit --store FILE get KIND NAME
//       prints the object as JSON.
#include <iostream>
#include <string>

#include "api/types.h"
#include "store/sqlite/sqlite_store.h"

int main(int argc, char** argv) {
  using pillar::store::SqliteStore;
  std::string path;
  int i = 1;
  if (i + 1 < argc && std::string(argv[i]) == "--store") {
    path = argv[i + 1];
    i += 2;
  }
  if (path.empty() || i >= argc) {
    std::cerr << "usage: store-edit --store FILE strip-export-spec VOLUME | get KIND NAME\n";
    return 64;
  }
  std::string cmd = argv[i++];
  auto st = SqliteStore::Open({path});
  if (!st.ok()) {
    std::cerr << "store-edit: " << st.status().ToString() << "\n";
    return 1;
  }
  auto& store = *st;
  if (cmd == "get" && i + 2 == argc) {
    auto o = store->Get(argv[i], argv[i + 1]);
    if (!o.ok()) {
      std::cerr << "store-edit: " << o.status().ToString() << "\n";
      return 1;
    }
    std::cout << pillar::store::ToJson(*o).dump() << "\n";
    return 0;
  }
  if (cmd == "strip-export-spec" && i + 1 == argc) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto o = store->Get(pillar::api::kKindVolume, argv[i]);
      if (!o.ok()) {
        std::cerr << "store-edit: " << o.status().ToString() << "\n";
        return 1;
      }
      if (!o->status.contains("exportSpec")) {
        std::cout << "no exportSpec\n";
        return 0;
      }
      o->status.erase("exportSpec");
      auto u = store->UpdateStatus(*o);
      if (u.ok()) {
        std::cout << "exportSpec removed, resourceVersion " << u->resource_version << "\n";
        return 0;
      }
      std::cerr << "store-edit: retrying: " << u.status().ToString() << "\n";
    }
    return 1;
  }
  std::cerr << "store-edit: bad command\n";
  return 64;
}
