// The behaviour every Store backend must have. A backend instantiates the
// suite with its StoreBackend:
//
//   INSTANTIATE_TEST_SUITE_P(Etcd, StoreConformanceTest,
//                            ::testing::Values(EtcdBackend()), BackendName);
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "api/types.h"
#include "common/status.h"
#include "common/temp_dir.h"
#include "store/store.h"

namespace pillar::store {

// The store treats kinds as opaque names; the suite uses pillar's own.
constexpr const char* kPillarVolumeState = api::kKindVolume;
constexpr const char* kPillarAgent = api::kKindAgent;
constexpr const char* kPillarNode = api::kKindNode;

}  // namespace pillar::store

namespace pillar::store::testing {

struct StoreBackend {
  std::string name;
  // Opens the store kept under `dir` (an empty directory per test), nullptr
  // on failure. Opening the same dir again must give an independent client
  // of the same data: the suite uses it as another process.
  std::function<std::unique_ptr<Store>(const std::string& dir)> open;
  // Makes the history at or before `resource_version` unavailable to Watch.
  std::function<Status(Store& store, const std::string& resource_version)> compact;
  // Optional: the backend's own consistency check of the data under `dir`
  // (e.g. SQLite's integrity_check), run after a writer was killed.
  std::function<Status(const std::string& dir)> check_integrity;
  // Names are Kubernetes object names (DNS-1123 subdomains) rather than
  // any opaque string.
  bool dns_names = false;
  // Optional: the requests the store has sent to its server so far, for a
  // backend whose cost is counted in round trips.
  std::function<int64_t(Store& store)> requests;
};

// Each test gets a fresh directory and a store opened on it; a backend
// without local files (Kubernetes) starts each new directory empty.
// Test names and failure messages show the backend by name.
inline void PrintTo(const StoreBackend& backend, std::ostream* os) { *os << backend.name; }

class StoreConformanceTest : public ::testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override;
  std::unique_ptr<Store> Open() { return GetParam().open(dir_.path()); }
  // Creates an object with `spec`, failing the test when that fails.
  Object MustCreate(const std::string& kind, const std::string& name,
                    nlohmann::json spec = nlohmann::json::object());

  ::pillar::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

std::string BackendName(const ::testing::TestParamInfo<StoreBackend>& info);

}  // namespace pillar::store::testing
