// SqliteStore throughput: Create, Get, UpdateStatus (CAS) and List of 10,000
// objects, on a file under $PILLAR_BENCH_DIR (default: the temp directory).
// Writes are synchronous=FULL, so the write figures are the disk's fsync rate.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "api/types.h"
#include "store/sqlite/sqlite_store.h"

namespace pillar::store {
namespace {

// A pvst of realistic size (~700 bytes of JSON).
Object VolumeState(const std::string& name) {
  Object o;
  o.kind = api::kKindVolume;
  o.name = name;
  o.labels = {{"pillar-csi.bhyoo.com/agent", "storage-1"}};
  o.spec = {{"volumeID", name},
            {"agentRef", "storage-1"},
            {"agentVolumeID", "tank/pillar/" + name},
            {"protocol", "nvmeof-tcp"},
            {"backend", "zfs-zvol"},
            {"capacityBytes", int64_t{10} << 30},
            {"accessType", "mount"}};
  o.status = {
      {"exportSpec", {{"bindAddress", "10.0.0.11"}, {"port", 4420}, {"aclEnabled", true}}},
      {"exportInfo",
       {{"targetID", "nqn.2024-01.com.bhyoo.pillar-csi:" + name},
        {"address", "10.0.0.11"},
        {"port", 4420}}},
      {"publishedNodes", nlohmann::json::array({{{"nodeID", "worker-1"}, {"revoking", false}}})},
      {"publicationGeneration", 1},
      {"conditions", nlohmann::json::array({{{"type", "ExportReconciled"},
                                             {"status", "True"},
                                             {"reason", "Reconciled"},
                                             {"message", ""},
                                             {"lastTransitionTime", "2024-01-01T00:00:00Z"},
                                             {"observedGeneration", 1}}})}};
  return o;
}

// A store on a fresh file, removed with its directory afterwards.
class BenchStore {
 public:
  BenchStore() {
    const char* env = std::getenv("PILLAR_BENCH_DIR");
    std::filesystem::path base = env != nullptr ? env : std::filesystem::temp_directory_path();
    std::string tmpl = (base / "pillar-store-bench-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
    SqliteStoreOptions options;
    options.path = dir_ + "/store.db";
    auto store = SqliteStore::Open(options);
    if (store.ok()) store_ = std::move(store).value();
  }
  ~BenchStore() {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SqliteStore* get() { return store_.get(); }

 private:
  std::string dir_;
  std::unique_ptr<SqliteStore> store_;
};

bool Fill(benchmark::State& state, Store& store, int n) {
  for (int i = 0; i < n; ++i) {
    auto created = store.Create(VolumeState("pvc-" + std::to_string(i)));
    if (!created.ok()) {
      state.SkipWithError(created.status().ToString().c_str());
      return false;
    }
  }
  return true;
}

void BM_Create(benchmark::State& state) {
  BenchStore bench;
  if (bench.get() == nullptr) return state.SkipWithError("cannot open the store");
  int64_t i = 0;
  for (auto _ : state) {
    auto created = bench.get()->Create(VolumeState("pvc-" + std::to_string(i++)));
    if (!created.ok()) return state.SkipWithError(created.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Create)->Unit(benchmark::kMicrosecond);

void BM_Get(benchmark::State& state) {
  constexpr int kObjects = 1000;
  BenchStore bench;
  if (bench.get() == nullptr) return state.SkipWithError("cannot open the store");
  if (!Fill(state, *bench.get(), kObjects)) return;
  int64_t i = 0;
  for (auto _ : state) {
    auto got = bench.get()->Get(api::kKindVolume, "pvc-" + std::to_string(i++ % kObjects));
    if (!got.ok()) return state.SkipWithError(got.status().ToString().c_str());
    benchmark::DoNotOptimize(got);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Get)->Unit(benchmark::kMicrosecond);

void BM_UpdateStatusCas(benchmark::State& state) {
  BenchStore bench;
  if (bench.get() == nullptr) return state.SkipWithError("cannot open the store");
  auto created = bench.get()->Create(VolumeState("pvc-0"));
  if (!created.ok()) return state.SkipWithError(created.status().ToString().c_str());
  Object o = *created;
  int64_t generation = 1;
  for (auto _ : state) {
    o.status["publicationGeneration"] = ++generation;
    auto updated = bench.get()->UpdateStatus(o);
    if (!updated.ok()) return state.SkipWithError(updated.status().ToString().c_str());
    o = std::move(updated).value();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UpdateStatusCas)->Unit(benchmark::kMicrosecond);

void BM_List10000(benchmark::State& state) {
  constexpr int kObjects = 10000;
  BenchStore bench;
  if (bench.get() == nullptr) return state.SkipWithError("cannot open the store");
  if (!Fill(state, *bench.get(), kObjects)) return;
  for (auto _ : state) {
    auto list = bench.get()->List(api::kKindVolume);
    if (!list.ok() || list->items.size() != kObjects) return state.SkipWithError("list failed");
    benchmark::DoNotOptimize(list);
  }
  state.SetItemsProcessed(state.iterations() * kObjects);
}
BENCHMARK(BM_List10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pillar::store

BENCHMARK_MAIN();
