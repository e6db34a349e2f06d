#include "common/grpc_metrics.h"

#include <chrono>

namespace pillar::metrics {

namespace {

namespace gx = grpc::experimental;

class Timer : public gx::Interceptor {
 public:
  Timer(const CallMetrics& m, std::string method)
      : m_(m), method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status s = methods->GetSendStatus();
      m_.family
          ->Add({{m_.method_label, method_}, {m_.code_label, GrpcCodeLabel(s.error_code())}},
                *m_.buckets)
          .Observe(SecondsSince(start_));
    }
    methods->Proceed();
  }

 private:
  const CallMetrics& m_;
  std::string method_;
  std::chrono::steady_clock::time_point start_;
};

class TimerFactory : public gx::ServerInterceptorFactoryInterface {
 public:
  explicit TimerFactory(CallMetrics m) : m_(std::move(m)) {}
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    return new Timer(m_, info->method() ? info->method() : "");
  }

 private:
  CallMetrics m_;
};

}  // namespace

std::unique_ptr<gx::ServerInterceptorFactoryInterface> CallMetricsInterceptor(CallMetrics metrics) {
  return std::make_unique<TimerFactory>(std::move(metrics));
}

}  // namespace pillar::metrics
