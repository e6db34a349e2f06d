#include "common/peer_identity.h"

#include "common/validate.h"

namespace pillar {
namespace {

constexpr std::pair<Role, std::string_view> kRoles[] = {
    {Role::kController, "controller"},
    {Role::kAgent, "agent"},
    {Role::kNode, "node"},
    {Role::kOperator, "operator"},
};

std::string Describe(const StatusOr<PeerIdentity>& peer) {
  return peer.ok() ? peer->Uri() : "a caller without a pillar identity";
}

}  // namespace

std::string_view RoleName(Role role) {
  for (const auto& [r, name] : kRoles) {
    if (r == role) return name;
  }
  return "unknown";
}

std::string PeerIdentity::Uri() const {
  return std::string(kIdentityScheme) + std::string(RoleName(role)) + "/" + name;
}

StatusOr<PeerIdentity> ParseIdentityUri(std::string_view uri) {
  if (uri.substr(0, kIdentityScheme.size()) != kIdentityScheme) {
    return InvalidArgument("identity URI does not start with " + std::string(kIdentityScheme));
  }
  std::string_view rest = uri.substr(kIdentityScheme.size());
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return InvalidArgument("identity URI wants " + std::string(kIdentityScheme) + "<role>/<name>");
  }
  std::string_view role = rest.substr(0, slash);
  PeerIdentity id;
  bool known = false;
  for (const auto& [r, name] : kRoles) {
    if (name == role) {
      id.role = r;
      known = true;
    }
  }
  if (!known) {
    return InvalidArgument("identity URI role \"" + std::string(role) +
                           "\" is not controller, agent, node or operator");
  }
  id.name = std::string(rest.substr(slash + 1));
  RETURN_IF_ERROR(validate::ObjectName("identity URI name", id.name));
  return id;
}

StatusOr<PeerIdentity> IdentityFromUris(const std::vector<std::string>& uris) {
  std::vector<PeerIdentity> found;
  for (const auto& uri : uris) {
    if (uri.substr(0, kIdentityScheme.size()) != kIdentityScheme) continue;
    auto id = ParseIdentityUri(uri);
    if (!id.ok()) return Unauthenticated("certificate " + id.status().message());
    found.push_back(*id);
  }
  if (found.empty()) {
    return Unauthenticated("certificate carries no " + std::string(kIdentityScheme) + " URI SAN");
  }
  if (found.size() > 1) {
    return Unauthenticated("certificate carries " + std::to_string(found.size()) + " " +
                           std::string(kIdentityScheme) + " URI SANs; want one");
  }
  return found.front();
}

std::string ExpectedPeer::Describe() const {
  return std::string(kIdentityScheme) + std::string(RoleName(role)) + "/" + name.value_or("*");
}

Status CheckExpectedPeer(const ExpectedPeer& want, const StatusOr<PeerIdentity>& peer) {
  if (!peer.ok()) {
    return Unauthenticated("peer was expected to be " + want.Describe() + " but its " +
                           peer.status().message());
  }
  if (peer->role == want.role && (!want.name || peer->name == *want.name)) return Status::Ok();
  return PermissionDenied("peer presents " + peer->Uri() + " where " + want.Describe() +
                          " was expected");
}

Status CheckActsForNode(const PeerIdentity& peer, std::string_view node_id) {
  if (peer.role == Role::kNode && peer.name == node_id) return Status::Ok();
  return PermissionDenied(peer.Uri() + " may not act for node \"" + std::string(node_id) + "\"");
}

Status RpcPolicy::Admit(std::string_view method, const StatusOr<PeerIdentity>& peer) const {
  auto it = roles_.find(std::string(method));
  if (it == roles_.end()) {
    return PermissionDenied(std::string(method) + " is open to no role of " + service_ + " (" +
                            Describe(peer) + ")");
  }
  if (!peer.ok()) return Unauthenticated(std::string(method) + ": " + peer.status().message());
  if (it->second.count(peer->role) == 0) {
    return PermissionDenied(std::string(method) + " is not open to the " +
                            std::string(RoleName(peer->role)) + " role (" + peer->Uri() + ")");
  }
  return Status::Ok();
}

RpcPolicy AgentRpcPolicy() {
  const std::set<Role> controller = {Role::kController};
  const std::set<Role> readers = {Role::kController, Role::kOperator};
  const std::string svc = "/pillar.agent.v1.Agent/";
  return RpcPolicy("pillar.agent.v1.Agent", {
                                                {svc + "GetInfo", readers},
                                                {svc + "CreateVolume", controller},
                                                {svc + "ExpandVolume", controller},
                                                {svc + "DeleteVolume", controller},
                                                {svc + "ListVolumes", readers},
                                                {svc + "GetCapacity", readers},
                                                {svc + "ApplyExport", controller},
                                                {svc + "ApplyExports", controller},
                                                {svc + "GetExport", readers},
                                                {svc + "ListExports", readers},
                                                {svc + "UnexportVolume", controller},
                                                {svc + "CreateSnapshot", controller},
                                                {svc + "DeleteSnapshot", controller},
                                                {svc + "ListSnapshots", readers},
                                            });
}

RpcPolicy RegistryRpcPolicy() {
  const std::string svc = "/pillar.registry.v1.NodeRegistry/";
  return RpcPolicy("pillar.registry.v1.NodeRegistry",
                   {
                       {svc + "RegisterNode", {Role::kNode}},
                       {svc + "GetNode", {Role::kController, Role::kOperator, Role::kNode}},
                   });
}

}  // namespace pillar
