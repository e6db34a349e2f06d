// Every call a gRPC server answers, timed into a histogram labelled by the
// full method name and the gRPC code's name (the CSI sidecars' convention:
// csi_sidecar_operations_seconds{method_name, grpc_status_code}).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>

#include "common/metrics.h"

namespace pillar::metrics {

struct CallMetrics {
  prometheus::Family<prometheus::Histogram>* family = nullptr;
  std::string method_label = "method_name";
  std::string code_label = "grpc_status_code";
  const prometheus::Histogram::BucketBoundaries* buckets = &OperationBuckets();
};

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> CallMetricsInterceptor(
    CallMetrics metrics);

}  // namespace pillar::metrics
