#include "kube/token_review.h"

namespace pillar::kube {

using nlohmann::json;

TokenReviewer::TokenReviewer(Rest& rest, std::string audience, std::string service_account)
    : rest_(rest),
      audience_(std::move(audience)),
      username_("system:serviceaccount:" + std::move(service_account)) {}

StatusOr<TokenIdentity> TokenReviewer::Review(const std::string& token) {
  if (token.empty()) return Unauthenticated("no ServiceAccount token was presented");
  json review = {{"apiVersion", "authentication.k8s.io/v1"},
                 {"kind", "TokenReview"},
                 {"spec", {{"token", token}, {"audiences", {audience_}}}}};
  auto got = rest_.Call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", review);
  if (!got.ok()) {
    return Unavailable("TokenReview could not be asked: " + got.status().message());
  }
  const json status = got->value("status", json::object());
  if (!status.value("authenticated", false)) {
    return Unauthenticated("the API server did not accept the token: " +
                           status.value("error", std::string("not authenticated")));
  }
  bool audience_ok = false;
  for (const auto& a : status.value("audiences", json::array())) {
    audience_ok = audience_ok || (a.is_string() && a.get<std::string>() == audience_);
  }
  if (!audience_ok) return Unauthenticated("the token is not meant for " + audience_);
  const json user = status.value("user", json::object());
  TokenIdentity who;
  who.username = user.value("username", "");
  if (who.username != username_) {
    return PermissionDenied(who.username + " is not " + username_ + ", the node plugin");
  }
  const json extra = user.value("extra", json::object());
  auto it = extra.find("authentication.kubernetes.io/node-name");
  if (it != extra.end() && it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    who.node_name = (*it)[0].get<std::string>();
  }
  if (who.node_name.empty()) {
    return PermissionDenied("the token of " + who.username +
                            " is not bound to a pod on a node (no node-name)");
  }
  return who;
}

Status CheckNodeClaim(const TokenIdentity& who, const std::string& claimed) {
  if (claimed != who.node_name) {
    return PermissionDenied("a node plugin on node " + who.node_name +
                            " may not report the identity of node " + claimed);
  }
  return Status::Ok();
}

}  // namespace pillar::kube
