// ApplyExport latency and ListExports cost for 1, 100 and 1,000 exports on
// one agent (real agent code on the configfs simulator, see bench_agent.h).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <map>
#include <memory>

#include "bench_agent.h"
#include "common/log.h"
#include "common/uuid.h"

namespace pillar::bench {
namespace {

namespace agent_api = controller::agent_api;

constexpr const char* kHostA =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555";
constexpr const char* kHostB =
    "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

struct Fixture {
  std::string dir;
  std::unique_ptr<BenchAgent> agent;
  std::unique_ptr<InProcessAgentClient> client;
  std::vector<std::string> uids;
  int64_t generation = 1;
};

agent_api::ApplyExportRequest Request(const std::string& id, const std::string& uid, int64_t gen,
                                      const char* host) {
  agent_api::ApplyExportRequest req;
  req.agent_volume_id = id;
  req.protocol = Protocol::kNvmeofTcp;
  req.spec.bind_address = "10.99.0.1";
  req.spec.port = 4420;
  req.spec.acl_enabled = true;
  req.fence = {uid, gen};
  req.allowed_hosts = {host};
  return req;
}

Fixture& Get(int n) {
  static std::map<int, std::unique_ptr<Fixture>> fixtures;
  auto& f = fixtures[n];
  if (f) return *f;
  f = std::make_unique<Fixture>();
  f->dir = BenchDir("agent" + std::to_string(n));
  f->agent = std::make_unique<BenchAgent>(f->dir);
  f->client = std::make_unique<InProcessAgentClient>(*f->agent);
  for (int i = 0; i < n; ++i) {
    std::string uid = NewUuid();
    agent_api::CreateVolumeRequest c;
    c.pool = "demo";
    c.name = "vol-" + std::to_string(i);
    c.size_bytes = 1 << 20;
    c.mode = agent_api::VolumeMode::kBlock;
    c.volume_uid = uid;
    if (!f->client->CreateVolume(c).ok()) std::abort();
    if (!f->client->ApplyExport(Request("demo/vol-" + std::to_string(i), uid, 1, kHostA)).ok()) {
      std::abort();
    }
    f->uids.push_back(uid);
  }
  return *f;
}

void BM_ApplyExportConverged(benchmark::State& state) {
  Fixture& f = Get(static_cast<int>(state.range(0)));
  auto req = Request("demo/vol-0", f.uids[0], f.generation, kHostA);
  for (auto _ : state) {
    auto r = f.client->ApplyExport(req);
    if (!r.ok() || !r->changes.empty()) state.SkipWithError("converged apply changed something");
  }
}

void BM_ApplyExportAclChange(benchmark::State& state) {
  Fixture& f = Get(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    // The generation's parity picks the host, so every call is a real change
    // even across the framework's repeated runs of this function.
    ++f.generation;
    auto r = f.client->ApplyExport(
        Request("demo/vol-0", f.uids[0], f.generation, f.generation % 2 == 0 ? kHostB : kHostA));
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      break;
    }
    if (r->changes.empty()) {
      state.SkipWithError("ACL change applied nothing");
      break;
    }
  }
}

void BM_ListExports(benchmark::State& state) {
  Fixture& f = Get(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto r = f.client->ListExports();
    if (!r.ok() || static_cast<int64_t>(r->size()) != state.range(0))
      state.SkipWithError("wrong export count");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_ApplyExportConverged)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyExportAclChange)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ListExports)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pillar::bench

int main(int argc, char** argv) {
  pillar::log::Init("bench", "error");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(
           std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp", ec)) {
    if (e.path().filename().string().rfind("pillar-bench-", 0) == 0) {
      std::filesystem::remove_all(e.path(), ec);
    }
  }
  return 0;
}
