#include "common/metrics.h"

#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <mutex>
#include <vector>

#include "common/log.h"

namespace pillar::metrics {

prometheus::Registry& Registry() {
  static auto* registry = new std::shared_ptr<prometheus::Registry>(
      std::make_shared<prometheus::Registry>());  // never destroyed: scrapes may outlive main
  return **registry;
}

namespace {

struct Refreshes {
  std::mutex mu;
  std::vector<std::function<void()>> all;
};
Refreshes& TheRefreshes() {
  static auto* r = new Refreshes();
  return *r;
}

std::vector<prometheus::MetricFamily> CollectFresh() {
  Refreshes& r = TheRefreshes();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& f : r.all) f();
  }
  return Registry().Collect();
}

// What the exposer collects: the registry, refreshed first.
class FreshRegistry : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override { return CollectFresh(); }
};

}  // namespace

void OnScrape(std::function<void()> refresh) {
  Refreshes& r = TheRefreshes();
  std::lock_guard<std::mutex> lock(r.mu);
  r.all.push_back(std::move(refresh));
}

const prometheus::Histogram::BucketBoundaries& OperationBuckets() {
  static const prometheus::Histogram::BucketBoundaries b{0.1, 0.25, 0.5, 1,   2.5, 5,  10,
                                                         15,  25,   50,  120, 300, 600};
  return b;
}

const prometheus::Histogram::BucketBoundaries& FastBuckets() {
  static const prometheus::Histogram::BucketBoundaries b{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return b;
}

const char* GrpcCodeLabel(int code) {
  static const char* const kNames[] = {
      "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
      "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
      "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
      "DataLoss", "Unauthenticated"};
  if (code < 0 || code >= static_cast<int>(std::size(kNames))) return "Unknown";
  return kNames[code];
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Scrape() {
  prometheus::TextSerializer text;
  return text.Serialize(CollectFresh());
}

Endpoint::~Endpoint() = default;

StatusOr<std::unique_ptr<Endpoint>> Endpoint::Start(const std::string& address) {
  std::unique_ptr<Endpoint> e(new Endpoint());
  try {
    // One serving thread: a scrape is a small, rare request.
    e->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& ex) {
    return Unavailable("metrics: cannot listen on " + address + ": " + ex.what());
  }
  e->collectable_ = std::make_shared<FreshRegistry>();
  e->exposer_->RegisterCollectable(e->collectable_);
  auto ports = e->exposer_->GetListeningPorts();
  e->port_ = ports.empty() ? 0 : ports.front();
  return e;
}

StatusOr<std::unique_ptr<Endpoint>> MaybeServe(const std::string& address) {
  if (address.empty()) return std::unique_ptr<Endpoint>();
  ASSIGN_OR_RETURN(auto e, Endpoint::Start(address));
  log::Info("metrics serving", {{"address", address}, {"port", e->port()}, {"path", "/metrics"}});
  return e;
}

}  // namespace pillar::metrics
