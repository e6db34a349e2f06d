#include "kube/events.h"

#include <algorithm>
#include <cstdio>

#include "common/log.h"

namespace pillar::kube {

using nlohmann::json;

KubeEventSink::KubeEventSink(Rest& rest, Clock& clock, EventSinkOptions options)
    : rest_(rest), clock_(clock), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

KubeEventSink::~KubeEventSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void KubeEventSink::Record(const ObjectRef& about, bool warning, const std::string& reason,
                           const std::string& message) {
  const auto now = clock_.SteadyNow();
  const std::string stamp = FormatRfc3339(clock_.Now());
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = buckets_[about.uid.empty() ? about.kind + "/" + about.name : about.uid];
  if (b.at == std::chrono::steady_clock::time_point{}) {
    b.tokens = options_.burst;
  } else if (options_.refill.count() > 0) {
    b.tokens = std::min<double>(options_.burst,
                                b.tokens + std::chrono::duration<double>(now - b.at) /
                                               std::chrono::duration<double>(options_.refill));
  }
  b.at = now;
  if (b.tokens < 1 || queue_.size() >= options_.max_queue) {
    dropped_++;
    log::Debug("event dropped (rate limit)",
               {{"object", about.kind + "/" + about.name}, {"reason", reason}});
    return;
  }
  b.tokens -= 1;
  // Names like Kubernetes' own: <object>.<unique hex>.
  char suffix[40];
  std::snprintf(
      suffix, sizeof(suffix), ".%llx%04llx",
      static_cast<unsigned long long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.Now().time_since_epoch())
              .count()),
      static_cast<unsigned long long>(++sequence_ & 0xffff));
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata",
       {{"name", about.name.substr(0, 200) + suffix}, {"namespace", options_.namespace_name}}},
      {"involvedObject",
       {{"apiVersion", about.api_version},
        {"kind", about.kind},
        {"name", about.name},
        {"uid", about.uid},
        {"resourceVersion", about.resource_version}}},
      {"reason", reason},
      {"message", message.substr(0, 1024)},
      {"type", warning ? "Warning" : "Normal"},
      {"source", {{"component", options_.component}, {"host", options_.host}}},
      {"reportingComponent", options_.component},
      {"reportingInstance", options_.host},
      {"firstTimestamp", stamp},
      {"lastTimestamp", stamp},
      {"count", 1}};
  queue_.push_back(std::move(event));
  cv_.notify_all();
}

void KubeEventSink::Loop() {
  const std::string path = "/api/v1/namespaces/" + options_.namespace_name + "/events";
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, all posted
    json event = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    auto posted = rest_.Call("POST", path, event);
    if (!posted.ok()) {
      log::Warn("event not recorded", {{"object", event["involvedObject"].value("name", "")},
                                       {"reason", event.value("reason", "")},
                                       {"error", posted.status().ToString()}});
    }
    lock.lock();
    busy_ = false;
    (posted.ok() ? posted_ : failed_)++;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void KubeEventSink::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

uint64_t KubeEventSink::posted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return posted_;
}
uint64_t KubeEventSink::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}
uint64_t KubeEventSink::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

}  // namespace pillar::kube
