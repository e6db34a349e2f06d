#include "node/node_metrics.h"

#include <map>
#include <set>

#include "common/protocol.h"
#include "node/stage_record.h"

namespace pillar::node {

namespace {
NodeMetrics Make() {
  auto& r = metrics::Registry();
  return NodeMetrics{
      prometheus::BuildHistogram()
          .Name("pillar_node_csi_operations_seconds")
          .Help("CSI Node calls the plugin answered, by method and gRPC code")
          .Register(r),
      prometheus::BuildCounter()
          .Name("pillar_node_selfheal_actions_total")
          .Help("What the self-heal pass did to a staged volume that had lost its device or mount")
          .Register(r),
      prometheus::BuildGauge()
          .Name("pillar_node_sessions")
          .Help("Distinct target connections (NVMe-oF controllers, iSCSI sessions, NFS mounts) "
                "of the volumes staged here")
          .Register(r),
  };
}
}  // namespace

NodeMetrics& NodeMetrics::Get() {
  static NodeMetrics* m = new NodeMetrics(Make());
  return *m;
}

void RefreshOnScrape(StageRecordStore& records) {
  metrics::OnScrape([&records] {
    std::map<std::string, std::set<std::string>> by_protocol;
    for (Protocol p : {Protocol::kNvmeofTcp, Protocol::kIscsi, Protocol::kNfs}) {
      by_protocol[ProtocolName(p)];
    }
    for (const auto& rec : records.List()) {
      if (rec.state != "staged") continue;
      by_protocol[ProtocolName(rec.target.protocol)].insert(
          rec.target.protocol == Protocol::kNfs ? rec.staging_path : rec.target.ConnectionKey());
    }
    for (const auto& [p, keys] : by_protocol) {
      NodeMetrics::Get().sessions.Add({{"protocol", p}}).Set(static_cast<double>(keys.size()));
    }
  });
}

}  // namespace pillar::node
