// pillar's CustomResourceDefinitions on the API server: the controller
// installs those that are absent when it starts on the Kubernetes store, so
// a bare `pillar-controller --store kube` works without a chart. A CRD that
// is already there (the chart's, or a newer release's) is left as it is.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "kube/rest.h"

namespace pillar::store {

struct CrdInstallResult {
  std::vector<std::string> created;  // CRD names this call created
  std::vector<std::string> present;  // already there, left alone
};

// Creates each absent CRD of api::CustomResourceDefinitions(), then waits up
// to `timeout` until every one is Established. PERMISSION_DENIED when the
// controller may not read or create CRDs (the message says which), UNAVAILABLE
// when they do not become Established in time.
StatusOr<CrdInstallResult> EnsureCrds(
    kube::Rest& rest, std::chrono::milliseconds timeout,
    std::chrono::milliseconds poll = std::chrono::milliseconds(200));

}  // namespace pillar::store
