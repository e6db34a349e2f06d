// The narrow view of the Kubernetes API that leader election, TokenReview and
// Events need: one JSON request at a path. HTTP status codes arrive already
// mapped to Status (404 NOT_FOUND, 409 ABORTED for a conflict or
// ALREADY_EXISTS for a create, 410 OUT_OF_RANGE, 401/403 PERMISSION_DENIED or
// UNAUTHENTICATED, 422 INVALID_ARGUMENT, 5xx / no answer UNAVAILABLE), so the
// logic above it is tested with a scripted implementation.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"

namespace pillar::kube {

class Rest {
 public:
  virtual ~Rest() = default;
  // `method` is GET, POST, PUT, PATCH or DELETE; `path` starts with "/api" or
  // "/apis". Returns the response body as JSON.
  virtual StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path,
                                        const std::optional<nlohmann::json>& body = {}) = 0;
};

}  // namespace pillar::kube
