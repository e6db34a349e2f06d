// The controller's Prometheus families (issue 25). Series are labelled by
// condition, cause, RPC, code and verb only: never by volume.
#pragma once

#include <string>

#include "common/metrics.h"

namespace pillar::controller {

struct ControllerMetrics {
  static ControllerMetrics& Get();

  prometheus::Family<prometheus::Gauge>& volumes;  // {status, reason}
  prometheus::Histogram& reconcile_duration;
  prometheus::Histogram& resync_duration;
  prometheus::Family<prometheus::Counter>& repairs;                // {cause}
  prometheus::Family<prometheus::Counter>& agent_calls;            // {rpc, code}
  prometheus::Family<prometheus::Histogram>& agent_call_duration;  // {rpc}
  prometheus::Gauge& agents;
  prometheus::Gauge& agents_connected;
  prometheus::Gauge& leader;
  prometheus::Family<prometheus::Counter>& store_requests;            // {verb, code}
  prometheus::Family<prometheus::Histogram>& store_request_duration;  // {verb}

  // One finished agent call.
  void AgentCall(const std::string& rpc, const std::string& code, double seconds);
  // One finished store request (the Kubernetes API server's, or SQLite's).
  void StoreRequest(const std::string& verb, const std::string& code, double seconds);
  void Repair(const std::string& cause) { repairs.Add({{"cause", cause}}).Increment(); }
};

// What a repair is counted as (pillar_controller_repairs_total{cause}).
inline constexpr const char* kCauseOutOfBand = "out_of_band_edit";
inline constexpr const char* kCauseEpoch = "epoch_change";
inline constexpr const char* kCauseIdentity = "identity_change";
inline constexpr const char* kCauseSpecMissing = "export_spec_missing";

}  // namespace pillar::controller
