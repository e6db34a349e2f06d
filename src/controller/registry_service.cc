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

namespace {

// What of `want` another node's record holds too ("" when nothing).
std::string SharedIdentity(const api::NodeRecord& want, const api::NodeRecord& other) {
  if (!want.host_nqn.empty() && want.host_nqn == other.host_nqn) {
    return "identity.host_nqn " + want.host_nqn;
  }
  if (!want.initiator_iqn.empty() && want.initiator_iqn == other.initiator_iqn) {
    return "identity.initiator_iqn " + want.initiator_iqn;
  }
  for (const auto& ip : want.ip_addresses) {
    if (std::find(other.ip_addresses.begin(), other.ip_addresses.end(), ip) !=
        other.ip_addresses.end()) {
      return "identity.ip_addresses " + ip;
    }
  }
  return "";
}

// No other node may hold what `want` claims: a live one refuses the claim; a
// stale one gives it up (its record loses it first, so no export ever
// admits the claim for both).
Status ClaimIdentity(store::Store& store, std::chrono::system_clock::time_point now,
                     const api::NodeRecord& want) {
  ASSIGN_OR_RETURN(store::ListResult nodes, store.List(api::kKindNode));
  for (const store::Object& obj : nodes.items) {
    if (obj.name == want.node_id) continue;
    auto other = api::LoadNode(obj);
    if (!other.ok()) continue;
    std::string shared = SharedIdentity(want, *other);
    if (shared.empty()) continue;
    auto seen = ParseRfc3339(other->last_seen);
    if (!seen || now - *seen < kNodeStaleAfter) {
      return FailedPrecondition(shared + " is node " + obj.name + "'s (last seen " +
                                (other->last_seen.empty() ? "never" : other->last_seen) +
                                "); one host NQN, IQN or address belongs to one node");
    }
    RETURN_IF_ERROR(store::RetryOnConflict("node " + obj.name, [&](int attempt) -> Status {
      auto cur = attempt == 0 ? StatusOr<store::Object>(obj) : store.Get(api::kKindNode, obj.name);
      if (!cur.ok()) return cur.status().code() == Code::kNotFound ? Status::Ok() : cur.status();
      ASSIGN_OR_RETURN(api::NodeRecord rec, api::LoadNode(*cur));
      if (rec.host_nqn == want.host_nqn) rec.host_nqn.clear();
      if (rec.initiator_iqn == want.initiator_iqn) rec.initiator_iqn.clear();
      std::erase_if(rec.ip_addresses, [&](const std::string& ip) {
        return std::find(want.ip_addresses.begin(), want.ip_addresses.end(), ip) !=
               want.ip_addresses.end();
      });
      store::Object next = *cur;
      next.spec = api::NodeSpecToJson(rec);
      auto updated = store.Update(next);
      return updated.ok() ? Status::Ok() : updated.status();
    }));
    log::Warn("stale node record gave up an identity another node claims",
              {{"stale", obj.name}, {"claimedBy", want.node_id}, {"what", shared}});
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::pair<bool, std::string>> RegisterNodeIdentity(
    store::Store& store, Clock& clock, const rv1::NodeIdentity& id,
    const std::function<Status()>& admit_change) {
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
  bool claimed = false;  // checked once per report, before its first write
  auto claim = [&]() -> Status {
    if (claimed) return Status::Ok();
    if (admit_change) RETURN_IF_ERROR(admit_change());
    RETURN_IF_ERROR(ClaimIdentity(store, now, want));
    claimed = true;
    return Status::Ok();
  };
  return store::RetryOnConflict("node " + id.node_id(), [&](int) -> StatusOr<Result> {
    auto existing = store.Get(api::kKindNode, id.node_id());
    if (existing.status().code() == Code::kNotFound) {
      RETURN_IF_ERROR(claim());
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
    if (!same_identity) RETURN_IF_ERROR(claim());
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
  auto r = RegisterNodeIdentity(store_, clock_, req->identity(),
                                [&] { return AdmitChange(req->identity().node_id()); });
  if (!r.ok()) return ToGrpc(r.status());
  resp->set_changed(r->first);
  resp->set_resource_version(r->second);
  return grpc::Status::OK;
}

Status NodeRegistryService::AdmitChange(const std::string& node_id) {
  auto now = clock_.SteadyNow();
  std::lock_guard<std::mutex> lock(changes_mu_);
  auto& times = changes_[node_id];
  while (!times.empty() && now - times.front() >= kIdentityChangeWindow) times.pop_front();
  if (static_cast<int>(times.size()) >= kMaxIdentityChanges) {
    auto wait = std::chrono::duration_cast<std::chrono::seconds>(times.front() +
                                                                 kIdentityChangeWindow - now);
    return ResourceExhausted(
        "the identity of node " + node_id + " changed " + std::to_string(times.size()) +
        " times in the last " + std::to_string(kIdentityChangeWindow.count()) +
        " minutes; this change is taken in " + std::to_string(wait.count()) + " s at the earliest");
  }
  times.push_back(now);
  return Status::Ok();
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
