// Full resync cost of the export reconciler over many volumes with no drift,
// and time-to-repair after one agent loses all its exports. Real reconciler
// with its watch-fed cache (as the controller runs it) over a real store:
// SQLite by default, or the Kubernetes API server (bench/reconciler_kube.sh
// starts one); real agent code on the configfs simulator, called in process
// (bench_agent.h). On the Kubernetes store it also counts the API requests.
//
//   reconciler_bench [volumes=10000] [agents=10] [store-uri, e.g. kube:KUBECONFIG]
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "bench_agent.h"
#include "common/log.h"
#include "common/uuid.h"
#include "controller/reconciler.h"
#include "store/kube/kube_store.h"
#include "store/open.h"

namespace pillar::bench {
namespace {

using api::kKindAgent;
using api::kKindNode;
using api::kKindVolume;

class BenchDirectory : public controller::AgentDirectory {
 public:
  StatusOr<std::shared_ptr<controller::AgentClient>> Client(
      const std::string& ref, const controller::AgentEndpoint&) override {
    auto it = clients.find(ref);
    if (it == clients.end()) return NotFound("no bench agent " + ref);
    return std::shared_ptr<controller::AgentClient>(it->second);
  }
  int64_t Calls() const {
    int64_t n = 0;
    for (const auto& [ref, c] : clients) n += c->calls.load();
    return n;
  }
  double AgentSeconds() const {
    int64_t n = 0;
    for (const auto& [ref, c] : clients) n += c->agent_nanos.load();
    return static_cast<double>(n) / 1e9;
  }
  std::map<std::string, std::shared_ptr<InProcessAgentClient>> clients;
};

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string NodeNqn(int i) {
  char buf[80];
  std::snprintf(buf, sizeof(buf), "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-%012d",
                i);
  return buf;
}

// API requests so far (0 on a store that is not the Kubernetes one).
int64_t Requests(store::Store& st) {
  auto* kube = dynamic_cast<store::KubeStore*>(&st);
  return kube != nullptr ? static_cast<int64_t>(kube->client().requests()) : 0;
}

// Waits until the store has seen no request for `quiet` (the reconciler's
// workers are done with what the last pass wrote).
void Settle(store::Store& st, std::chrono::seconds quiet) {
  int64_t seen = -1;
  while (Requests(st) != seen) {
    seen = Requests(st);
    std::this_thread::sleep_for(quiet);
  }
}

int Run(int volumes, int agents, std::string uri) {
  std::string dir = BenchDir("reconciler");
  if (uri.empty()) uri = "sqlite:" + dir + "/store.db";
  auto opened = store::OpenStore(uri);
  if (!opened.ok()) {
    std::cerr << opened.status().ToString() << "\n";
    return 1;
  }
  store::Store& st = **opened;
  SystemClock clock;
  BenchDirectory directory;
  std::vector<std::unique_ptr<BenchAgent>> nodes;
  constexpr int kNodes = 100;
  for (int n = 0; n < kNodes; ++n) {
    store::Object o;
    o.kind = api::kKindNode;
    o.name = "node-" + std::to_string(n);
    o.spec = {{"nodeID", o.name}, {"hostNQN", NodeNqn(n)}, {"ipAddresses", {"10.99.1.1"}}};
    if (!st.Create(o).ok()) return 1;
  }
  auto setup = std::chrono::steady_clock::now();
  for (int a = 0; a < agents; ++a) {
    std::string ref = "agent-" + std::to_string(a);
    nodes.push_back(std::make_unique<BenchAgent>(dir + "/" + ref, ref));
    directory.clients[ref] = std::make_shared<InProcessAgentClient>(*nodes.back());
    store::Object o;
    o.kind = api::kKindAgent;
    o.name = ref;
    o.spec = {{"address", "127.0.0.1"}, {"port", 9500}};
    if (!st.Create(o).ok()) return 1;
  }
  // Recorded from a few threads: a Kubernetes create is three requests.
  std::atomic<int> failures{0};
  auto record = [&](int v) {
    std::string ref = "agent-" + std::to_string(v % agents);
    std::string name = "pvc-" + std::to_string(v);
    int node = v % kNodes;
    store::Object o;
    o.kind = api::kKindVolume;
    o.name = name;
    o.spec = {
        {"volumeID", name},         {"agentRef", ref},          {"agentVolumeID", "demo/" + name},
        {"protocol", "nvmeof-tcp"}, {"capacityBytes", 1 << 20}, {"accessType", "block"}};
    o.status = {
        {"exportSpec", {{"bindAddress", "10.99.0.1"}, {"port", 4420}, {"aclEnabled", true}}},
        {"publishedNodes", {{{"nodeID", "node-" + std::to_string(node)}, {"revoking", false}}}},
        {"publicationGeneration", 1}};
    auto created = st.Create(o);
    if (!created.ok()) {
      if (failures++ == 0) std::cerr << created.status().ToString() << "\n";
      return;
    }
    auto& client = *directory.clients[ref];
    controller::agent_api::CreateVolumeRequest c;
    c.pool = "demo";
    c.name = name;
    c.size_bytes = 1 << 20;
    c.mode = controller::agent_api::VolumeMode::kBlock;
    c.volume_uid = created->uid;
    if (!client.CreateVolume(c).ok()) failures++;
  };
  {
    std::vector<std::thread> writers;
    constexpr int kWriters = 4;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        for (int v = w; v < volumes; v += kWriters) record(v);
      });
    }
    for (auto& t : writers) t.join();
  }
  if (failures > 0) return 1;
  std::cout << "setup: " << volumes << " volumes on " << agents << " agents recorded in "
            << Since(setup) << " s (" << Requests(st) << " API requests)\n";

  controller::ReconcilerOptions opts;
  opts.resync_interval = std::chrono::hours(1);  // passes are driven by hand below
  opts.epoch_poll_interval = std::chrono::hours(1);
  // PILLAR_BENCH_WRITERS: resync_writers_per_agent, to compare settings.
  if (const char* w = std::getenv("PILLAR_BENCH_WRITERS"))
    opts.resync_writers_per_agent = std::atoi(w);
  std::cout << "resync writers per agent: " << opts.resync_writers_per_agent << "\n";
  controller::ExportReconciler rec(st, directory, clock, opts);
  const double rss_before = RssMiB();
  int64_t requests = Requests(st);
  auto started = std::chrono::steady_clock::now();
  if (Status s = rec.Start(); !s.ok()) {
    std::cerr << s.ToString() << "\n";
    return 1;
  }
  std::cout << "cache primed (one list per kind, then watches): " << Since(started) << " s, "
            << (Requests(st) - requests) << " API requests\n";

  auto first = std::chrono::steady_clock::now();
  auto s1 = rec.ResyncAll();
  std::cout << "initial pass (creates every export): " << Since(first) << " s wall, " << s1.drifted
            << " drifted, " << s1.status_writes << " status writes\n";
  Settle(st, std::chrono::seconds(2));

  int64_t calls = directory.Calls();
  requests = Requests(st);
  double cpu = CpuSeconds();
  double agent_cpu = directory.AgentSeconds();
  auto t = std::chrono::steady_clock::now();
  auto s2 = rec.ResyncAll();
  double wall = Since(t);
  double total = CpuSeconds() - cpu;
  double agents_part = directory.AgentSeconds() - agent_cpu;
  std::cout << "full resync, no drift: " << wall << " s wall, " << total << " s CPU ("
            << (total - agents_part) << " controller, " << agents_part
            << " the agents' ListExports), " << (directory.Calls() - calls) << " agent calls, "
            << (Requests(st) - requests) << " API requests, " << s2.drifted << " drifted, "
            << s2.status_writes << " status writes, " << s2.volumes << " volumes, " << s2.skipped
            << " passed over\n";
  const double rss = RssMiB();
  std::cout << "memory: " << rss << " MiB resident after the passes, " << (rss - rss_before)
            << " MiB of it since the reconciler started (its cache and records, "
            << (rss - rss_before) * 1024.0 * 1024.0 / volumes << " bytes per volume)\n";

  // One agent loses its whole target state (module reload / reboot).
  auto& victim = *nodes[0];
  (void)victim.sim.UnloadNvmet();
  (void)victim.sim.LoadNvmet();
  int lost = volumes / agents;
  calls = directory.Calls();
  cpu = CpuSeconds();
  t = std::chrono::steady_clock::now();
  auto s3 = rec.ResyncAll();
  wall = Since(t);
  auto listed = directory.clients["agent-0"]->ListExports();
  int back = listed.ok() ? static_cast<int>(listed->size()) : -1;
  std::cout << "repair after wiping agent-0 (" << lost << " exports): " << wall << " s wall, "
            << (CpuSeconds() - cpu) << " s CPU, " << (directory.Calls() - calls) << " agent calls, "
            << s3.drifted << " drifted; agent-0 has " << back << " exports again\n";
  // The path a new boot epoch takes: that agent's volumes only.
  auto& second = *nodes[agents > 1 ? 1 : 0];
  const std::string second_ref = agents > 1 ? "agent-1" : "agent-0";
  (void)second.sim.UnloadNvmet();
  (void)second.sim.LoadNvmet();
  calls = directory.Calls();
  cpu = CpuSeconds();
  t = std::chrono::steady_clock::now();
  auto s4 = rec.ResyncAgentNow(second_ref);
  wall = Since(t);
  listed = directory.clients[second_ref]->ListExports();
  int back2 = listed.ok() ? static_cast<int>(listed->size()) : -1;
  std::cout << "rebuild of " << second_ref << " alone, as after its new boot epoch (" << lost
            << " exports): " << wall << " s wall, " << (CpuSeconds() - cpu) << " s CPU, "
            << (directory.Calls() - calls) << " agent calls, " << s4.batched
            << " applied in batches; " << back2 << " exports again\n";

  // Every agent loses its target state at once (a site power cut).
  for (auto& n : nodes) {
    (void)n->sim.UnloadNvmet();
    (void)n->sim.LoadNvmet();
  }
  calls = directory.Calls();
  requests = Requests(st);
  cpu = CpuSeconds();
  t = std::chrono::steady_clock::now();
  auto s5 = rec.ResyncAll();
  wall = Since(t);
  int all_back = 0;
  for (const auto& [ref, client] : directory.clients) {
    auto l = client->ListExports();
    if (l.ok()) all_back += static_cast<int>(l->size());
  }
  std::cout << "rebuild of every agent (" << volumes << " exports): " << wall << " s wall, "
            << (CpuSeconds() - cpu) << " s CPU, " << (directory.Calls() - calls) << " agent calls, "
            << (Requests(st) - requests) << " API requests, " << s5.batched
            << " applied in batches; " << all_back << " exports again\n";
  rec.Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return back == lost && back2 == lost && all_back == volumes && s2.drifted == 0 &&
                 s2.status_writes == 0
             ? 0
             : 3;
}

}  // namespace
}  // namespace pillar::bench

int main(int argc, char** argv) {
  pillar::log::Init("bench", "error");
  int volumes = argc > 1 ? std::atoi(argv[1]) : 10000;
  int agents = argc > 2 ? std::atoi(argv[2]) : 10;
  return pillar::bench::Run(volumes, std::max(1, agents), argc > 3 ? argv[3] : "");
}
