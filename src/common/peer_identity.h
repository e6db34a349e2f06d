// Who is calling: the role and name a pillar certificate carries as a URI
// subject alternative name, and which roles may call which RPC.
//
//   pillar-csi://controller/<name>   the controller (calls agents, reads nodes)
//   pillar-csi://agent/<name>        a storage-node agent (server only)
//   pillar-csi://node/<node-id>      a node plugin; <node-id> is its CSI node ID
//   pillar-csi://operator/<name>     a person or tool (pillarctl): reads only
//
// Pure logic, no gRPC: the transport side lives in common/grpc_peer.h.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pillar {

enum class Role { kController, kAgent, kNode, kOperator };

std::string_view RoleName(Role role);

inline constexpr std::string_view kIdentityScheme = "pillar-csi://";

struct PeerIdentity {
  Role role = Role::kOperator;
  std::string name;

  std::string Uri() const;
  bool operator==(const PeerIdentity& o) const { return role == o.role && name == o.name; }
};

// Parses exactly "pillar-csi://<role>/<name>", <name> an object name
// ([a-z0-9.-], 1-253 characters); INVALID_ARGUMENT naming the cause otherwise.
StatusOr<PeerIdentity> ParseIdentityUri(std::string_view uri);

// The identity among a certificate's URI SANs: URIs of other schemes are
// ignored; none, or more than one pillar-csi URI, is UNAUTHENTICATED (a
// certificate must say one thing about who holds it).
StatusOr<PeerIdentity> IdentityFromUris(const std::vector<std::string>& uris);

// A node acts only for itself: OK when `peer` is the node `node_id`,
// PERMISSION_DENIED naming both otherwise.
Status CheckActsForNode(const PeerIdentity& peer, std::string_view node_id);

// Who the server at the other end of a channel must be: its certificate's
// pillar identity has `role` and, when `name` is set, exactly that name. The
// controller expects agent/<PillarAgent name> of each agent it dials, a node
// plugin expects a controller behind the registry.
struct ExpectedPeer {
  Role role = Role::kAgent;
  std::optional<std::string> name;

  std::string Describe() const;
};

// OK when `peer` is what `want` asks for; PERMISSION_DENIED naming both
// otherwise, UNAUTHENTICATED when the peer has no identity.
Status CheckExpectedPeer(const ExpectedPeer& want, const StatusOr<PeerIdentity>& peer);

// Which roles may call each RPC of one service, by full method name
// ("/pillar.agent.v1.Agent/GetInfo"). A method without an entry is denied, so
// an RPC added to a service is closed until someone decides who may call it.
class RpcPolicy {
 public:
  RpcPolicy(std::string service, std::map<std::string, std::set<Role>> roles_by_method)
      : service_(std::move(service)), roles_(std::move(roles_by_method)) {}

  // OK when `peer` may call `method`; PERMISSION_DENIED (naming the method and
  // the peer) otherwise, UNAUTHENTICATED when the peer has no identity.
  Status Admit(std::string_view method, const StatusOr<PeerIdentity>& peer) const;

  const std::string& service() const { return service_; }
  const std::map<std::string, std::set<Role>>& table() const { return roles_; }

 private:
  std::string service_;
  std::map<std::string, std::set<Role>> roles_;
};

// The agent API: the controller calls everything; an operator reads only.
RpcPolicy AgentRpcPolicy();
// The node registry: a node reports (its own identity, checked per call);
// the controller and operators read, a node reads its own record.
RpcPolicy RegistryRpcPolicy();

}  // namespace pillar
