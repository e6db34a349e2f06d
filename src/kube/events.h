// What a user sees happen to an object: Kubernetes Events (core/v1), so
// `kubectl describe pvst NAME` and `kubectl get events` show every
// ExportReconciled transition with its reason and message. The reconciler
// talks to an EventSink; KubeEventSink posts the Events from a thread of its
// own (the reconciler never waits on the API server for one) and rate-limits
// them per object, so a flapping volume cannot flood the API server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "kube/rest.h"

namespace pillar::kube {

struct ObjectRef {
  std::string api_version;  // "pillar-csi.bhyoo.com/v1alpha1"
  std::string kind;         // "PillarVolumeState"
  std::string name;
  std::string uid;
  std::string resource_version;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // `warning`: type Warning, else Normal. Never blocks on the API server.
  virtual void Record(const ObjectRef& about, bool warning, const std::string& reason,
                      const std::string& message) = 0;
};

struct EventSinkOptions {
  // Events of cluster-scoped objects live here (as Kubernetes' own do): an
  // Event whose involvedObject has no namespace is refused in any other but
  // "default" (and kube-system for events.k8s.io events with an eventTime).
  std::string namespace_name = "default";
  std::string component = "pillar-controller";
  std::string host;  // the reporting instance (pod or host name)
  // Per object: up to `burst` events at once, then one per `refill`.
  int burst = 5;
  std::chrono::milliseconds refill{std::chrono::seconds(30)};
  size_t max_queue = 1000;  // events waiting to be posted; beyond it they are dropped
};

class KubeEventSink final : public EventSink {
 public:
  KubeEventSink(Rest& rest, Clock& clock, EventSinkOptions options);
  ~KubeEventSink() override;  // posts what is queued, then stops
  KubeEventSink(const KubeEventSink&) = delete;
  KubeEventSink& operator=(const KubeEventSink&) = delete;

  void Record(const ObjectRef& about, bool warning, const std::string& reason,
              const std::string& message) override;

  // Blocks until every event queued so far has been posted (or failed).
  void Flush();

  uint64_t posted() const;
  uint64_t dropped() const;  // over the rate limit or the queue bound
  uint64_t failed() const;   // refused by the API server

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at{};
  };
  void Loop();

  Rest& rest_;
  Clock& clock_;
  EventSinkOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<nlohmann::json> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::map<std::string, Bucket> buckets_;  // by object uid (or name)
  uint64_t posted_ = 0, dropped_ = 0, failed_ = 0, sequence_ = 0;
  std::thread thread_;
};

}  // namespace pillar::kube
