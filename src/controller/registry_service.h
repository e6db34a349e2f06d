// The node registry: node plugins report their identities; each report that
// differs from the record rewrites the PillarNode, which re-triggers every
// volume published to that node.
#pragma once

#include "common/clock.h"
#include "pillar/registry/v1/registry.grpc.pb.h"
#include "store/store.h"

namespace pillar::controller {

class NodeRegistryService final : public pillar::registry::v1::NodeRegistry::Service {
 public:
  NodeRegistryService(store::Store& store, Clock& clock) : store_(store), clock_(clock) {}

  grpc::Status RegisterNode(grpc::ServerContext*,
                            const pillar::registry::v1::RegisterNodeRequest* req,
                            pillar::registry::v1::RegisterNodeResponse* resp) override;
  grpc::Status GetNode(grpc::ServerContext*, const pillar::registry::v1::GetNodeRequest* req,
                       pillar::registry::v1::GetNodeResponse* resp) override;

 private:
  store::Store& store_;
  Clock& clock_;
};

// Validates and writes one identity; returns whether the record changed.
StatusOr<std::pair<bool, int64_t>> RegisterNodeIdentity(
    store::Store& store, Clock& clock, const pillar::registry::v1::NodeIdentity& id);

}  // namespace pillar::controller
