// The agent's cost per export (issue 26): ApplyExport converged (a no-op)
// and changed (an ACL move), for NVMe-oF/TCP (nvmet), iSCSI (LIO) and NFS
// (exports.d and exportfs; `proto` 0, 1, 2), with
// 1 to 10,000 exports beside it; a rebuild of every export after the target
// lost its tree, one call per volume and one ApplyExports batch; and the
// ListExports listing. Real agent code on the configfs simulator, see
// bench_agent.h. Each figure is split: `fs_us` is the CPU time per call
// inside file system calls (the simulator and the kernel's system calls under
// it), `own_us` the rest, the agent's own (the exportfs stand-in's time taken
// out); `fs_calls` counts those calls, `processes` the tools started (each
// a fork and exec in real life); a converged apply also reports its writes.
// The *OverGrpc cases call the same agent through a real gRPC server with
// mutual TLS, as the controller does (figures per export: wall time, the
// agent's CPU, the whole process's).
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <utility>

#include "bench_agent.h"
#include "common/grpc_tls.h"
#include "common/log.h"
#include "common/peer_identity.h"
#include "common/uuid.h"
#include "controller/agent_client.h"
#include "controller/reconciler.h"

namespace pillar::bench {
namespace {

namespace agent_api = controller::agent_api;

constexpr const char* kNvmeHostA =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555";
constexpr const char* kNvmeHostB =
    "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
constexpr const char* kIscsiHostA = "iqn.2026-12.org.example:consumer-a";
constexpr const char* kIscsiHostB = "iqn.2026-12.org.example:consumer-b";

Protocol ProtocolArg(int64_t arg) {
  if (arg == 0) return Protocol::kNvmeofTcp;
  return arg == 1 ? Protocol::kIscsi : Protocol::kNfs;
}

const char* Host(Protocol p, bool b) {
  if (p == Protocol::kNvmeofTcp) return b ? kNvmeHostB : kNvmeHostA;
  if (p == Protocol::kNfs) return b ? "10.0.0.2" : "10.0.0.1";
  return b ? kIscsiHostB : kIscsiHostA;
}

struct Fixture {
  std::string dir;
  Protocol protocol = Protocol::kNvmeofTcp;
  std::unique_ptr<BenchAgent> agent;
  std::unique_ptr<InProcessAgentClient> client;
  std::vector<std::string> uids;
  int64_t generation = 1;  // of vol-0, the one the benchmarks move
};

std::string VolumeId(int i) { return "demo/vol-" + std::to_string(i); }

agent_api::ApplyExportRequest Request(const Fixture& f, int i, int64_t gen,
                                      std::vector<std::string> hosts) {
  agent_api::ApplyExportRequest req;
  req.agent_volume_id = VolumeId(i);
  req.protocol = f.protocol;
  req.spec.bind_address = "10.99.0.1";
  req.spec.port = f.protocol == Protocol::kNvmeofTcp ? 4420
                  : f.protocol == Protocol::kIscsi   ? 3260
                                                     : 2049;
  req.spec.acl_enabled = true;
  req.fence = {f.uids[static_cast<size_t>(i)], gen};
  req.allowed_hosts = std::move(hosts);
  return req;
}

// vol-0, the one the benchmarks call, is exported to host A; every other
// volume to hosts A and B, so moving vol-0 between them never retires a
// host (the one change that reads every subsystem, see NvmetExporter).
Fixture& Get(int n, Protocol protocol) {
  static std::map<std::pair<int, Protocol>, std::unique_ptr<Fixture>> fixtures;
  auto& f = fixtures[{n, protocol}];
  if (f) return *f;
  f = std::make_unique<Fixture>();
  f->protocol = protocol;
  f->dir = BenchDir("agent" + std::to_string(n) + ProtocolName(protocol));
  f->agent = std::make_unique<BenchAgent>(f->dir);
  f->client = std::make_unique<InProcessAgentClient>(*f->agent);
  for (int i = 0; i < n; ++i) {
    std::string uid = NewUuid();
    agent_api::CreateVolumeRequest c;
    c.pool = "demo";
    c.name = "vol-" + std::to_string(i);
    c.size_bytes = 1 << 20;
    c.mode = protocol == Protocol::kNfs ? agent_api::VolumeMode::kFilesystem
                                        : agent_api::VolumeMode::kBlock;
    c.volume_uid = uid;
    if (!f->client->CreateVolume(c).ok()) std::abort();
    f->uids.push_back(uid);
    std::vector<std::string> hosts = {Host(protocol, false)};
    if (i > 0) hosts.push_back(Host(protocol, true));
    auto r = f->client->ApplyExport(Request(*f, i, 1, hosts));
    if (!r.ok()) {
      std::fprintf(stderr, "setup: %s\n", r.status().ToString().c_str());
      std::abort();
    }
  }
  return *f;
}

// CPU time of this thread, to split a measured stretch from the paused ones.
int64_t ThreadNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Adds the split counters for `units` measured operations (calls or
// exports): CPU in file system calls, split into the system calls (`tree_us`:
// what a plain directory tree costs) and the simulator's own checks
// (`sim_us`); the agent's own (the tool stand-ins' time taken out), the
// calls and the processes.
void Split(benchmark::State& state, BenchAgent& agent, int64_t cpu_nanos, int64_t units) {
  TimedFs& fs = agent.timed;
  CountingExec& exec = agent.exec;
  double n = static_cast<double>(units);
  state.counters["fs_us"] = static_cast<double>(fs.nanos()) / 1000.0 / n;
  state.counters["tree_us"] = static_cast<double>(agent.tree.nanos()) / 1000.0 / n;
  state.counters["sim_us"] = static_cast<double>(fs.nanos() - agent.tree.nanos()) / 1000.0 / n;
  state.counters["own_us"] =
      static_cast<double>(cpu_nanos - fs.nanos() - exec.nanos()) / 1000.0 / n;
  state.counters["fs_calls"] = static_cast<double>(fs.calls()) / n;
  state.counters["processes"] = static_cast<double>(exec.runs()) / n;
}

void BM_ApplyExportConverged(benchmark::State& state) {
  Fixture& f = Get(static_cast<int>(state.range(0)), ProtocolArg(state.range(1)));
  auto req = Request(f, 0, f.generation, {Host(f.protocol, f.generation % 2 == 0)});
  if (!f.client->ApplyExport(req).ok()) state.SkipWithError("first apply failed");
  TimedFs& fs = f.agent->timed;
  fs.Reset();
  f.agent->tree.Reset();
  f.agent->exec.ResetRuns();
  int64_t start = ThreadNanos();
  for (auto _ : state) {
    auto r = f.client->ApplyExport(req);
    if (!r.ok() || !r->changes.empty()) {
      state.SkipWithError("converged apply changed something");
      break;
    }
  }
  Split(state, *f.agent, ThreadNanos() - start, state.iterations());
  // A no-op writes nothing and starts no process.
  state.counters["writes"] = static_cast<double>(fs.mutations()) / state.iterations();
}

void BM_ApplyExportAclChange(benchmark::State& state) {
  Fixture& f = Get(static_cast<int>(state.range(0)), ProtocolArg(state.range(1)));
  TimedFs& fs = f.agent->timed;
  fs.Reset();
  f.agent->tree.Reset();
  f.agent->exec.ResetRuns();
  int64_t start = ThreadNanos();
  for (auto _ : state) {
    // The generation's parity picks the host, so every call is a real change
    // even across the framework's repeated runs of this function.
    ++f.generation;
    auto r = f.client->ApplyExport(
        Request(f, 0, f.generation, {Host(f.protocol, f.generation % 2 == 0)}));
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      break;
    }
    if (r->changes.empty()) {
      state.SkipWithError("ACL change applied nothing");
      break;
    }
  }
  Split(state, *f.agent, ThreadNanos() - start, state.iterations());
}

// Every export of a fixture as its rebuild applies it again.
std::vector<agent_api::ApplyExportRequest> RebuildRequests(const Fixture& f, int n) {
  std::vector<agent_api::ApplyExportRequest> reqs;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> hosts = {Host(f.protocol, i == 0 && f.generation % 2 == 0)};
    if (i > 0) hosts.push_back(Host(f.protocol, true));
    reqs.push_back(Request(f, i, i == 0 ? f.generation : 1, hosts));
  }
  return reqs;
}

// The target loses its whole tree (NFS: `exportfs -ua`).
bool Wipe(Fixture& f) {
  switch (f.protocol) {
    case Protocol::kNvmeofTcp:
      return f.agent->sim.UnloadNvmet().ok() && f.agent->sim.LoadNvmet().ok();
    case Protocol::kIscsi:
      return f.agent->sim.UnloadLio().ok() && f.agent->sim.LoadLio().ok();
    case Protocol::kNfs:
      return f.agent->tools.Run({{"exportfs", "-ua"}, "", std::chrono::seconds(1)}).ok();
  }
  return false;
}

// The target lost its whole tree (module reload, reboot): every export is
// applied again, one ApplyExport per volume (range 1 = 0) or all of them in
// one ApplyExports (range 1 = 1). Figures are per export. For NFS the wipe
// is `exportfs -ua` (the files in exports.d stay, as they do).
void BM_RebuildAfterWipe(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool batch = state.range(1) == 1;
  Fixture& f = Get(n, ProtocolArg(state.range(2)));
  TimedFs& fs = f.agent->timed;
  std::vector<agent_api::ApplyExportRequest> reqs = RebuildRequests(f, n);
  int64_t cpu = 0;
  int64_t fs_nanos = 0, tree_nanos = 0, fs_calls = 0, exec_nanos = 0, runs = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!Wipe(f)) {
      state.SkipWithError("wipe failed");
      break;
    }
    fs.Reset();
    f.agent->tree.Reset();
    f.agent->exec.ResetRuns();
    int64_t start = ThreadNanos();
    state.ResumeTiming();
    bool failed = false;
    if (batch) {
      auto r = f.client->ApplyExports(reqs);
      failed = !r.ok() || r->size() != reqs.size();
      for (size_t i = 0; !failed && i < r->size(); ++i) {
        failed = !(*r)[i].status.ok() || (*r)[i].result.changes.empty();
      }
    } else {
      for (const auto& req : reqs) {
        auto r = f.client->ApplyExport(req);
        if (!r.ok() || r->changes.empty()) failed = true;
      }
    }
    state.PauseTiming();
    cpu += ThreadNanos() - start;
    fs_nanos += fs.nanos();
    tree_nanos += f.agent->tree.nanos();
    fs_calls += fs.calls();
    exec_nanos += f.agent->exec.nanos();
    runs += f.agent->exec.runs();
    state.ResumeTiming();
    if (failed) {
      state.SkipWithError("an export was not rebuilt");
      break;
    }
  }
  double exports = static_cast<double>(state.iterations()) * n;
  state.counters["cpu_us_per_export"] = static_cast<double>(cpu) / 1000.0 / exports;
  state.counters["fs_us"] = static_cast<double>(fs_nanos) / 1000.0 / exports;
  state.counters["tree_us"] = static_cast<double>(tree_nanos) / 1000.0 / exports;
  state.counters["sim_us"] = static_cast<double>(fs_nanos - tree_nanos) / 1000.0 / exports;
  state.counters["own_us"] = static_cast<double>(cpu - fs_nanos - exec_nanos) / 1000.0 / exports;
  state.counters["fs_calls"] = static_cast<double>(fs_calls) / exports;
  state.counters["processes"] = static_cast<double>(runs) / exports;
  // The whole process's resident memory after the rebuild: the agent's for
  // n exports when this case runs alone (--benchmark_filter); the simulated
  // configfs lives in /dev/shm files, not in it.
  state.counters["rss_mib"] = RssMiB();
  state.SetItemsProcessed(state.iterations() * n);
}

// --- Over the wire -------------------------------------------------------------
// The same agent behind a real gRPC server (mutual TLS on 127.0.0.1, the
// agent's RPC policy), called by the controller's own client
// (GrpcAgentDirectory): what a controller pays for a storage node's export.
// `agent_us` is the CPU of the agent's service methods (in the server's
// threads), `proc_us` the whole process's (the agent, both gRPC ends, TLS),
// `wall_us` the elapsed time; all per export.

int64_t ProcessNanos() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Forwards the two export calls to the real service and times them on the
// server's thread.
class TimedAgentService : public v1::Agent::Service {
 public:
  explicit TimedAgentService(agent::AgentService& inner) : inner_(inner) {}
  grpc::Status ApplyExport(grpc::ServerContext* ctx, const v1::ApplyExportRequest* req,
                           v1::ApplyExportResponse* resp) override {
    return Timed([&] { return inner_.ApplyExport(ctx, req, resp); });
  }
  grpc::Status ApplyExports(grpc::ServerContext* ctx, const v1::ApplyExportsRequest* req,
                            v1::ApplyExportsResponse* resp) override {
    return Timed([&] { return inner_.ApplyExports(ctx, req, resp); });
  }
  int64_t nanos() const { return nanos_; }
  void Reset() { nanos_ = 0; }

 private:
  template <typename F>
  grpc::Status Timed(F call) {
    int64_t start = TimedFs::ThreadNanos();
    grpc::Status s = call();
    nanos_ += TimedFs::ThreadNanos() - start;
    return s;
  }

  agent::AgentService& inner_;
  std::atomic<int64_t> nanos_{0};
};

struct Wire {
  std::unique_ptr<TimedAgentService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<controller::GrpcAgentDirectory> directory;
  std::shared_ptr<controller::AgentClient> client;
};

std::map<Fixture*, std::unique_ptr<Wire>>& Wires() {
  static std::map<Fixture*, std::unique_ptr<Wire>> wires;
  return wires;
}

// The fixture's agent served over gRPC (made once per fixture); nullptr
// when the certificates or the server could not be made.
Wire* WireFor(Fixture& f) {
  auto& w = Wires()[&f];
  if (w) return w.get();
  const std::string certs = f.dir + "/certs";
  const std::string make = std::string(PILLAR_SOURCE_DIR) + "/tests/tools/make-certs.sh " + certs;
  if (std::system(make.c_str()) != 0) return nullptr;  // NOLINT(cert-env33-c): fixed script
  auto server_creds = MutualTlsServerCredentials(
      {certs + "/agent.crt", certs + "/agent.key", certs + "/ca.crt"}, AgentRpcPolicy());
  if (!server_creds.ok()) return nullptr;
  auto made = std::make_unique<Wire>();
  made->service = std::make_unique<TimedAgentService>(*f.agent->service);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", *server_creds, &port);
  builder.RegisterService(made->service.get());
  made->server = builder.BuildAndStart();
  if (!made->server || port == 0) return nullptr;
  controller::AgentTlsConfig tls;
  tls.files = {certs + "/controller.crt", certs + "/controller.key", certs + "/ca.crt"};
  tls.timeout = std::chrono::minutes(5);
  made->directory = std::make_unique<controller::GrpcAgentDirectory>(tls);
  auto client = made->directory->Client("storage-1", {"127.0.0.1", port, "localhost"});
  if (!client.ok()) return nullptr;
  made->client = *client;
  w = std::move(made);
  return w.get();
}

void WireCounters(benchmark::State& state, const Wire& w, int64_t wall_nanos, int64_t proc_nanos,
                  double units) {
  state.counters["wall_us"] = static_cast<double>(wall_nanos) / 1000.0 / units;
  state.counters["agent_us"] = static_cast<double>(w.service->nanos()) / 1000.0 / units;
  state.counters["proc_us"] = static_cast<double>(proc_nanos) / 1000.0 / units;
}

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void BM_ApplyExportConvergedOverGrpc(benchmark::State& state) {
  Fixture& f = Get(static_cast<int>(state.range(0)), ProtocolArg(state.range(1)));
  Wire* w = WireFor(f);
  if (w == nullptr) {
    state.SkipWithError("no gRPC server or client (certificates?)");
    return;
  }
  auto req = Request(f, 0, f.generation, {Host(f.protocol, f.generation % 2 == 0)});
  if (!w->client->ApplyExport(req).ok()) state.SkipWithError("first apply failed");
  w->service->Reset();
  f.agent->exec.ResetRuns();
  int64_t wall = SteadyNanos(), proc = ProcessNanos();
  for (auto _ : state) {
    auto r = w->client->ApplyExport(req);
    if (!r.ok() || !r->changes.empty()) {
      state.SkipWithError("converged apply changed something");
      break;
    }
  }
  WireCounters(state, *w, SteadyNanos() - wall, ProcessNanos() - proc,
               static_cast<double>(state.iterations()));
  state.counters["processes"] =
      static_cast<double>(f.agent->exec.runs()) / static_cast<double>(state.iterations());
}

// The rebuild of BM_RebuildAfterWipe over the wire: one ApplyExport per
// volume (batch 0), or ApplyExports of the controller's batch size (batch 1:
// ReconcilerOptions::apply_batch volumes a call, as a resync sends them).
void BM_RebuildAfterWipeOverGrpc(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool batch = state.range(1) == 1;
  Fixture& f = Get(n, ProtocolArg(state.range(2)));
  Wire* w = WireFor(f);
  if (w == nullptr) {
    state.SkipWithError("no gRPC server or client (certificates?)");
    return;
  }
  const size_t per_call = static_cast<size_t>(controller::ReconcilerOptions{}.apply_batch);
  std::vector<agent_api::ApplyExportRequest> reqs = RebuildRequests(f, n);
  int64_t wall = 0, proc = 0, agent_nanos = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (!Wipe(f)) {
      state.SkipWithError("wipe failed");
      break;
    }
    w->service->Reset();
    int64_t wall0 = SteadyNanos(), proc0 = ProcessNanos();
    state.ResumeTiming();
    bool failed = false;
    if (batch) {
      for (size_t at = 0; at < reqs.size() && !failed; at += per_call) {
        std::vector<agent_api::ApplyExportRequest> part(
            reqs.begin() + static_cast<long>(at),
            reqs.begin() + static_cast<long>(std::min(reqs.size(), at + per_call)));
        auto r = w->client->ApplyExports(part);
        failed = !r.ok() || r->size() != part.size();
        // NFS: the first call's `exportfs -a` exports every volume's file,
        // so the later calls find theirs there already.
        for (size_t i = 0; !failed && i < r->size(); ++i) {
          failed = !(*r)[i].status.ok() ||
                   ((*r)[i].result.changes.empty() && f.protocol != Protocol::kNfs);
        }
      }
    } else {
      for (const auto& req : reqs) {
        auto r = w->client->ApplyExport(req);
        if (!r.ok() || r->changes.empty()) failed = true;
      }
    }
    state.PauseTiming();
    wall += SteadyNanos() - wall0;
    proc += ProcessNanos() - proc0;
    agent_nanos += w->service->nanos();
    state.ResumeTiming();
    if (failed) {
      state.SkipWithError("an export was not rebuilt");
      break;
    }
  }
  double exports = static_cast<double>(state.iterations()) * n;
  state.counters["wall_us"] = static_cast<double>(wall) / 1000.0 / exports;
  state.counters["agent_us"] = static_cast<double>(agent_nanos) / 1000.0 / exports;
  state.counters["proc_us"] = static_cast<double>(proc) / 1000.0 / exports;
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_ListExports(benchmark::State& state) {
  Fixture& f = Get(static_cast<int>(state.range(0)), Protocol::kNvmeofTcp);
  for (auto _ : state) {
    auto r = f.client->ListExports();
    if (!r.ok() || static_cast<int64_t>(r->size()) != state.range(0))
      state.SkipWithError("wrong export count");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t protocol : {0, 1, 2}) {
    for (int64_t n : {1, 100, 1000, 10000}) b->Args({n, protocol});
  }
}

// Rebuilds per protocol; NFS one call per volume stops at 1,000: each call
// reads the whole table back (`exportfs -v`), so 10,000 single calls parse
// 10^8 lines, which is what the batch is for.
void RebuildSizes(benchmark::internal::Benchmark* b) {
  for (int64_t protocol : {0, 1, 2}) {
    for (int64_t n : {100, 1000, 10000}) {
      for (int64_t batch : {0, 1}) {
        if (protocol == 2 && n == 10000 && batch == 0) continue;
        b->Args({n, batch, protocol});
      }
    }
  }
}

// Over the wire: the sizes of the side-by-side run (1,000 exports)
// and one below it.
void WireSizes(benchmark::internal::Benchmark* b) {
  for (int64_t protocol : {0, 1, 2}) {
    for (int64_t n : {100, 1000}) b->Args({n, protocol});
  }
}
void WireRebuildSizes(benchmark::internal::Benchmark* b) {
  for (int64_t protocol : {0, 1, 2}) {
    for (int64_t n : {100, 1000}) {
      for (int64_t batch : {0, 1}) b->Args({n, batch, protocol});
    }
  }
}

BENCHMARK(BM_ApplyExportConverged)
    ->Apply(Sizes)
    ->ArgNames({"exports", "proto"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyExportAclChange)
    ->Apply(Sizes)
    ->ArgNames({"exports", "proto"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RebuildAfterWipe)
    ->Apply(RebuildSizes)
    ->ArgNames({"exports", "batch", "proto"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_ApplyExportConvergedOverGrpc)
    ->Apply(WireSizes)
    ->ArgNames({"exports", "proto"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RebuildAfterWipeOverGrpc)
    ->Apply(WireRebuildSizes)
    ->ArgNames({"exports", "batch", "proto"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_ListExports)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pillar::bench

int main(int argc, char** argv) {
  pillar::log::Init("bench", "error");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // Servers and channels go before their certificates do.
  for (auto& [fixture, wire] : pillar::bench::Wires()) {
    if (wire && wire->server) wire->server->Shutdown();
  }
  pillar::bench::Wires().clear();
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(
           std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp", ec)) {
    if (e.path().filename().string().rfind("pillar-bench-", 0) == 0) {
      std::filesystem::remove_all(e.path(), ec);
    }
  }
  return 0;
}
