#include "controller/registry_service.h"

#include <arpa/inet.h>

#include <algorithm>

#include "api/convert.h"
#include "common/grpc_peer.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/validate.h"
#include "store/retry.h"

namespace pillar::controller {

namespace rv1 = pillar::registry::v1;

namespace {

// lastSeen alone is refreshed at most this often, so steady reports do not
// write the store every few seconds.
constexpr auto kLastSeenRefresh = std::chrono::minutes(5);

Status ValidateIdentity(const rv1::NodeIdentity& id) {
  RETURN_IF_ERROR(validate::ObjectName("identity.node_id", id.node_id()));
  if (id.ip_addresses_size() > kMaxReportedAddresses) {
    return InvalidArgument("identity.ip_addresses holds " + std::to_string(id.ip_addresses_size()) +
                           " addresses; at most " + std::to_string(kMaxReportedAddresses));
  }
  if (!id.host_nqn().empty()) RETURN_IF_ERROR(validate::Nqn("identity.host_nqn", id.host_nqn()));
  if (!id.initiator_iqn().empty()) {
    RETURN_IF_ERROR(validate::Iqn("identity.initiator_iqn", id.initiator_iqn()));
  }
  for (int i = 0; i < id.ip_addresses_size(); ++i) {
    RETURN_IF_ERROR(validate::IpAddress("identity.ip_addresses[" + std::to_string(i) + "]",
                                        id.ip_addresses(i)));
  }
  return Status::Ok();
}

std::string CanonicalIp(const std::string& ip) {
  unsigned char buf[16];
  char out[INET6_ADDRSTRLEN];
  int family = ip.find(':') != std::string::npos ? AF_INET6 : AF_INET;
  if (inet_pton(family, ip.c_str(), buf) != 1 ||
      inet_ntop(family, buf, out, sizeof(out)) == nullptr) {
    return ip;
  }
  return out;
}

bool ReadsAnyNode(const grpc::ServerContext* ctx) {
  if (ctx == nullptr || ctx->auth_context() == nullptr) return false;
  auto peer = PeerIdentityOf(*ctx->auth_context());
  return peer.ok() && (peer->role == Role::kController || peer->role == Role::kOperator);
}

}  // namespace

StatusOr<std::pair<bool, std::string>> RegisterNodeIdentity(store::Store& store, Clock& clock,
                                                            const rv1::NodeIdentity& id) {
  RETURN_IF_ERROR(ValidateIdentity(id));
  api::NodeRecord want;
  want.node_id = id.node_id();
  want.host_nqn = id.host_nqn();
  want.initiator_iqn = id.initiator_iqn();
  // Canonical spelling, so export rules compare equal to what targets report.
  for (const auto& ip : id.ip_addresses()) want.ip_addresses.push_back(CanonicalIp(ip));
  std::sort(want.ip_addresses.begin(), want.ip_addresses.end());
  want.ip_addresses.erase(std::unique(want.ip_addresses.begin(), want.ip_addresses.end()),
                          want.ip_addresses.end());
  auto now = clock.Now();
  want.last_seen = FormatRfc3339(now);

  using Result = std::pair<bool, std::string>;
  return store::RetryOnConflict("node " + id.node_id(), [&](int) -> StatusOr<Result> {
    auto existing = store.Get(api::kKindNode, id.node_id());
    if (existing.status().code() == Code::kNotFound) {
      store::Object obj;
      obj.kind = api::kKindNode;
      obj.name = id.node_id();
      obj.spec = api::NodeSpecToJson(want);
      ASSIGN_OR_RETURN(store::Object created, store.Create(obj));
      log::Info("node registered", {{"node", id.node_id()}, {"spec", obj.spec}});
      return Result{true, created.resource_version};
    }
    if (!existing.ok()) return existing.status();
    auto have = api::LoadNode(*existing);
    bool same_identity = have.ok() && have->host_nqn == want.host_nqn &&
                         have->initiator_iqn == want.initiator_iqn &&
                         have->ip_addresses == want.ip_addresses;
    if (same_identity) {
      bool fresh = false;
      if (auto t = ParseRfc3339(have->last_seen)) fresh = now - *t < kLastSeenRefresh;
      if (fresh) return Result{false, existing->resource_version};
    }
    store::Object next = *existing;
    next.spec = api::NodeSpecToJson(want);
    ASSIGN_OR_RETURN(store::Object updated, store.Update(next));
    if (!same_identity) {
      log::Info("node identity changed",
                {{"node", id.node_id()}, {"was", existing->spec}, {"now", next.spec}});
    }
    return Result{!same_identity, updated.resource_version};
  });
}

Status TokenReviewAuthorizer::Authorize(const grpc::ServerContext& ctx,
                                        const std::string& node_id) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  std::string token;
  if (it != md.end()) {
    std::string value(it->second.data(), it->second.size());
    if (value.rfind("Bearer ", 0) == 0) token = value.substr(7);
  }
  ASSIGN_OR_RETURN(kube::TokenIdentity who, reviewer_.Review(token));
  return kube::CheckNodeClaim(who, node_id);
}

Status CertificateNodeAuthorizer::Authorize(const grpc::ServerContext& ctx,
                                            const std::string& node_id) {
  auto auth = ctx.auth_context();
  if (auth == nullptr) return Unauthenticated("the caller presented no certificate");
  ASSIGN_OR_RETURN(PeerIdentity peer, PeerIdentityOf(*auth));
  return CheckActsForNode(peer, node_id);
}

Status NodeRegistryService::Authorize(const grpc::ServerContext* ctx, const std::string& node_id) {
  if (authorizer_ == nullptr) return Status::Ok();
  if (ctx == nullptr) return Unauthenticated("no caller context");
  Status s = authorizer_->Authorize(*ctx, node_id);
  if (!s.ok()) {
    auto auth = ctx->auth_context();
    log::Warn("node registry: refused", {{"node", node_id},
                                         {"peer", ctx->peer()},
                                         {"identity", auth ? DescribePeer(*auth) : "none"},
                                         {"error", s.ToString()}});
  }
  return s;
}

grpc::Status NodeRegistryService::RegisterNode(grpc::ServerContext* ctx,
                                               const rv1::RegisterNodeRequest* req,
                                               rv1::RegisterNodeResponse* resp) {
  // Format first (a clear INVALID_ARGUMENT), then who is asking, then the write.
  if (Status s = ValidateIdentity(req->identity()); !s.ok()) return ToGrpc(s);
  if (Status s = Authorize(ctx, req->identity().node_id()); !s.ok()) return ToGrpc(s);
  auto r = RegisterNodeIdentity(store_, clock_, req->identity());
  if (!r.ok()) return ToGrpc(r.status());
  resp->set_changed(r->first);
  resp->set_resource_version(r->second);
  return grpc::Status::OK;
}

grpc::Status NodeRegistryService::GetNode(grpc::ServerContext* ctx, const rv1::GetNodeRequest* req,
                                          rv1::GetNodeResponse* resp) {
  if (Status s = validate::ObjectName("node_id", req->node_id()); !s.ok()) return ToGrpc(s);
  // The controller and operators read any record; a node only its own.
  if (!ReadsAnyNode(ctx)) {
    if (Status s = Authorize(ctx, req->node_id()); !s.ok()) return ToGrpc(s);
  }
  auto obj = store_.Get(api::kKindNode, req->node_id());
  if (!obj.ok()) return ToGrpc(obj.status());
  auto rec = api::LoadNode(*obj);
  if (!rec.ok()) return ToGrpc(rec.status());
  auto* id = resp->mutable_identity();
  id->set_node_id(rec->node_id);
  id->set_host_nqn(rec->host_nqn);
  id->set_initiator_iqn(rec->initiator_iqn);
  for (const auto& ip : rec->ip_addresses) id->add_ip_addresses(ip);
  resp->set_last_seen(rec->last_seen);
  return grpc::Status::OK;
}

}  // namespace pillar::controller
