// The node plugin's Prometheus families (issue 25).
#pragma once

#include "common/metrics.h"

namespace pillar::node {

class StageRecordStore;

struct NodeMetrics {
  static NodeMetrics& Get();

  // csi_sidecar_operations_seconds' shape: {method_name, grpc_status_code}.
  prometheus::Family<prometheus::Histogram>& csi_operations;
  prometheus::Family<prometheus::Counter>& selfheal_actions;  // {kind}
  prometheus::Family<prometheus::Gauge>& sessions;            // {protocol}

  void SelfHeal(const char* kind) { selfheal_actions.Add({{"kind", kind}}).Increment(); }
};

// Counts, on every scrape, the distinct target connections the staged
// volumes hold, by protocol.
void RefreshOnScrape(StageRecordStore& records);

}  // namespace pillar::node
