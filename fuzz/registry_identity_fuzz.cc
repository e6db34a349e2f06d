// Who a caller is and what it may do, on any bytes: the input is a claimed
// node ID, a method name and a certificate's URI SANs, one per line. Whatever
// is admitted must be exactly what the rules say (common/peer_identity.h).
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/peer_identity.h"
#include "common/validate.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pillar;  // NOLINT(google-build-using-namespace): fuzz target
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string node_id, method;
  std::getline(in, node_id);
  std::getline(in, method);
  std::vector<std::string> uris;
  for (std::string line; std::getline(in, line);) uris.push_back(line);

  for (const auto& u : uris) {
    auto one = ParseIdentityUri(u);
    if (!one.ok()) continue;
    Require(one->Uri() == u);  // one spelling per identity
    Require(validate::ObjectName("n", one->name).ok());
  }
  StatusOr<PeerIdentity> peer = IdentityFromUris(uris);
  if (peer.ok()) {
    int pillar_uris = 0;
    for (const auto& u : uris) pillar_uris += StartsWith(u, std::string(kIdentityScheme)) ? 1 : 0;
    Require(pillar_uris == 1);
    auto again = ParseIdentityUri(peer->Uri());
    Require(again.ok() && *again == *peer);
    if (CheckActsForNode(*peer, node_id).ok()) {
      Require(peer->role == Role::kNode && peer->name == node_id);
      Require(validate::ObjectName("n", node_id).ok());
    }
  } else {
    Require(peer.status().code() == Code::kUnauthenticated);
  }

  if (RegistryRpcPolicy().Admit("/pillar.registry.v1.NodeRegistry/RegisterNode", peer).ok()) {
    Require(peer.ok() && peer->role == Role::kNode);
  }
  if (AgentRpcPolicy().Admit(method, peer).ok()) {
    Require(peer.ok() && StartsWith(method, "/pillar.agent.v1.Agent/"));
    Require(peer->role == Role::kController || peer->role == Role::kOperator);
    std::string name = method.substr(method.rfind('/') + 1);
    if (peer->role == Role::kOperator) {
      Require(StartsWith(name, "Get") || StartsWith(name, "List"));
    }
  }
  return 0;
}
