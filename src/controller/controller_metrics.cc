#include "controller/controller_metrics.h"

namespace pillar::controller {

namespace {
ControllerMetrics Make() {
  auto& r = metrics::Registry();
  return ControllerMetrics{
      prometheus::BuildGauge()
          .Name("pillar_controller_volumes")
          .Help("Volumes by their ExportReconciled condition's status and reason, as last recorded")
          .Register(r),
      prometheus::BuildHistogram()
          .Name("pillar_controller_reconcile_duration_seconds")
          .Help("One volume's reconcile pass: observe, apply when it differs, verify, record")
          .Register(r)
          .Add({}, metrics::FastBuckets()),
      prometheus::BuildHistogram()
          .Name("pillar_controller_resync_duration_seconds")
          .Help("A whole resync pass over every agent and volume")
          .Register(r)
          .Add({}, metrics::OperationBuckets()),
      prometheus::BuildCounter()
          .Name("pillar_controller_repairs_total")
          .Help("Exports the controller put back, by what took them from the recorded intent")
          .Register(r),
      prometheus::BuildCounter()
          .Name("pillar_controller_agent_calls_total")
          .Help("Calls to storage agents by RPC and gRPC code")
          .Register(r),
      prometheus::BuildHistogram()
          .Name("pillar_controller_agent_call_duration_seconds")
          .Help("Latency of calls to storage agents by RPC")
          .Register(r),
      prometheus::BuildGauge()
          .Name("pillar_controller_agents")
          .Help("Agents recorded in the store")
          .Register(r)
          .Add({}),
      prometheus::BuildGauge()
          .Name("pillar_controller_agents_connected")
          .Help("Agents whose AgentConnected condition is True")
          .Register(r)
          .Add({}),
      prometheus::BuildGauge()
          .Name("pillar_controller_leader")
          .Help("1 while this replica leads (runs the registry and the reconciler)")
          .Register(r)
          .Add({}),
      prometheus::BuildCounter()
          .Name("pillar_controller_store_requests_total")
          .Help("Requests to the store by verb and result code")
          .Register(r),
      prometheus::BuildHistogram()
          .Name("pillar_controller_store_request_duration_seconds")
          .Help("Latency of requests to the store by verb")
          .Register(r),
  };
}
}  // namespace

ControllerMetrics& ControllerMetrics::Get() {
  static ControllerMetrics* m = new ControllerMetrics(Make());
  return *m;
}

void ControllerMetrics::AgentCall(const std::string& rpc, const std::string& code, double seconds) {
  agent_calls.Add({{"rpc", rpc}, {"code", code}}).Increment();
  agent_call_duration.Add({{"rpc", rpc}}, metrics::FastBuckets()).Observe(seconds);
}

void ControllerMetrics::StoreRequest(const std::string& verb, const std::string& code,
                                     double seconds) {
  store_requests.Add({{"verb", verb}, {"code", code}}).Increment();
  store_request_duration.Add({{"verb", verb}}, metrics::FastBuckets()).Observe(seconds);
}

}  // namespace pillar::controller
