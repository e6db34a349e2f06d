// Who is calling, according to the API server: a node plugin presents its
// pod's projected ServiceAccount token (audience pillar-csi.bhyoo.com), and
// TokenReview says which ServiceAccount it belongs to and which node the pod
// is bound to (user.extra["authentication.kubernetes.io/node-name"]). Only
// the node plugin's own ServiceAccount may speak for a node, and only for the
// node its pod runs on.
#pragma once

#include <string>

#include "common/status.h"
#include "kube/rest.h"

namespace pillar::kube {

struct TokenIdentity {
  std::string username;   // "system:serviceaccount:<namespace>:<name>"
  std::string node_name;  // the node the token's pod is bound to
};

class TokenReviewer {
 public:
  // `service_account` is "<namespace>:<name>" of the node plugin.
  TokenReviewer(Rest& rest, std::string audience, std::string service_account);

  // UNAUTHENTICATED for a token the API server does not accept (wrong
  // audience, expired, forged); PERMISSION_DENIED for another ServiceAccount
  // or a token not bound to a pod on a node; UNAVAILABLE when the API server
  // cannot be asked.
  StatusOr<TokenIdentity> Review(const std::string& token);

 private:
  Rest& rest_;
  std::string audience_;
  std::string username_;
};

// The node ID a caller may report: its own node. PERMISSION_DENIED naming
// both when `claimed` is another node.
Status CheckNodeClaim(const TokenIdentity& who, const std::string& claimed);

}  // namespace pillar::kube
