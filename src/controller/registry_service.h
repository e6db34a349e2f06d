// The node registry: node plugins report their identities; each report that
// differs from the record rewrites the PillarNode, which re-triggers every
// volume published to that node.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>

#include "common/clock.h"
#include "kube/token_review.h"
#include "pillar/registry/v1/registry.grpc.pb.h"
#include "store/store.h"

namespace pillar::controller {

// Who may report or read a node's identity. Without one (only with
// --registry-insecure), any caller may.
class NodeAuthorizer {
 public:
  virtual ~NodeAuthorizer() = default;
  // OK when the caller may act for `node_id`; UNAUTHENTICATED or
  // PERMISSION_DENIED (naming both nodes) otherwise.
  virtual Status Authorize(const grpc::ServerContext& ctx, const std::string& node_id) = 0;
};

// In Kubernetes: the caller presents its pod's projected ServiceAccount token
// as "authorization: Bearer <token>"; TokenReview names the node it runs on.
class TokenReviewAuthorizer final : public NodeAuthorizer {
 public:
  explicit TokenReviewAuthorizer(kube::TokenReviewer& reviewer) : reviewer_(reviewer) {}
  Status Authorize(const grpc::ServerContext& ctx, const std::string& node_id) override;

 private:
  kube::TokenReviewer& reviewer_;
};

// Outside Kubernetes: the node ID is the name in the caller's certificate
// (pillar-csi://node/<node-id>, see common/peer_identity.h).
class CertificateNodeAuthorizer final : public NodeAuthorizer {
 public:
  Status Authorize(const grpc::ServerContext& ctx, const std::string& node_id) override;
};

// The most addresses one report may carry.
inline constexpr int kMaxReportedAddresses = 64;

class NodeRegistryService final : public pillar::registry::v1::NodeRegistry::Service {
 public:
  NodeRegistryService(store::Store& store, Clock& clock, NodeAuthorizer* authorizer = nullptr)
      : store_(store), clock_(clock), authorizer_(authorizer) {}

  grpc::Status RegisterNode(grpc::ServerContext*,
                            const pillar::registry::v1::RegisterNodeRequest* req,
                            pillar::registry::v1::RegisterNodeResponse* resp) override;
  grpc::Status GetNode(grpc::ServerContext*, const pillar::registry::v1::GetNodeRequest* req,
                       pillar::registry::v1::GetNodeResponse* resp) override;

 private:
  Status Authorize(const grpc::ServerContext* ctx, const std::string& node_id);

  // Admits one more identity change of node_id, or RESOURCE_EXHAUSTED when
  // it changed kMaxIdentityChanges times within kIdentityChangeWindow.
  Status AdmitChange(const std::string& node_id);

  store::Store& store_;
  Clock& clock_;
  NodeAuthorizer* authorizer_;
  std::mutex changes_mu_;
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> changes_;
};

// A node's identity may change this often (an IP move, a new NQN); beyond
// that its reports are refused until the window has room, so a flapping or
// hostile node cannot make every agent re-apply its exports without end.
constexpr int kMaxIdentityChanges = 10;
constexpr std::chrono::minutes kIdentityChangeWindow{10};
// A node record not refreshed for this long is stale: a host NQN, IQN or
// address it holds may be claimed by another node (it is removed from the
// stale record first, so no export admits both). A live node's are refused.
constexpr std::chrono::minutes kNodeStaleAfter{15};

// Validates and writes one identity; returns whether the record changed.
// An identity that claims another live node's host NQN, initiator IQN or
// address is FAILED_PRECONDITION naming that node; `admit_change` (when set)
// is asked before a changed identity is written.
StatusOr<std::pair<bool, std::string>> RegisterNodeIdentity(
    store::Store& store, Clock& clock, const pillar::registry::v1::NodeIdentity& id,
    const std::function<Status()>& admit_change = nullptr);

}  // namespace pillar::controller
