// Prometheus metrics: the process's registry and the /metrics endpoint every
// pillar daemon serves on --metrics-address (prometheus-cpp's pull exposer).
// Each component declares its own families over Registry(); none carries a
// per-volume label, so a series count never grows with the volumes.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace prometheus {
class Exposer;
}

namespace pillar::metrics {

// The registry this process's families live in (made on first use).
prometheus::Registry& Registry();

// Buckets of the CSI sidecars' csi_sidecar_operations_seconds, for calls a
// CO waits on (seconds to minutes).
const prometheus::Histogram::BucketBoundaries& OperationBuckets();
// Finer buckets for what takes micro- to milliseconds (a reconcile pass, an
// agent call, a store request).
const prometheus::Histogram::BucketBoundaries& FastBuckets();

// A gRPC code's name as Go's codes.Code prints it ("OK", "NotFound"): what
// dashboards written for the CSI sidecars' metrics match on. Every pillar
// metric's code label uses it.
const char* GrpcCodeLabel(int code);

// Seconds since `start`, for Histogram::Observe.
double SecondsSince(std::chrono::steady_clock::time_point start);

// Runs `refresh` before every scrape (gauges of what is cheaper to read
// when asked than to track: exports listed, pools' capacity). Refreshes run
// one at a time, in the order added; they live as long as the process.
void OnScrape(std::function<void()> refresh);

// Observes into `histogram`, when destroyed, the seconds it lived: one
// pass's duration, however the pass returns.
class ScopedTimer {
 public:
  explicit ScopedTimer(prometheus::Histogram& histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() { histogram_.Observe(SecondsSince(start_)); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  prometheus::Histogram& histogram_;
  std::chrono::steady_clock::time_point start_;
};

// Registry() in the Prometheus text format, as a scrape would see it
// (refreshes run first).
std::string Scrape();

// Serves Registry() on http://ADDRESS/metrics until destroyed.
class Endpoint {
 public:
  // ADDRESS is HOST:PORT (port 0: the kernel picks one; see port()).
  static StatusOr<std::unique_ptr<Endpoint>> Start(const std::string& address);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  int port() const { return port_; }

 private:
  Endpoint() = default;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

// Starts the endpoint when `address` is set (logged with its port); an
// empty address serves nothing and returns null.
StatusOr<std::unique_ptr<Endpoint>> MaybeServe(const std::string& address);

}  // namespace pillar::metrics
