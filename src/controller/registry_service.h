// The node registry: node plugins report their identities; each report that
// differs from the record rewrites the PillarNode, which re-triggers every
// volume published to that node.
#pragma once

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

  store::Store& store_;
  Clock& clock_;
  NodeAuthorizer* authorizer_;
};

// Validates and writes one identity; returns whether the record changed.
StatusOr<std::pair<bool, std::string>> RegisterNodeIdentity(
    store::Store& store, Clock& clock, const pillar::registry::v1::NodeIdentity& id);

}  // namespace pillar::controller
