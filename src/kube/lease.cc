#include "kube/lease.h"

#include <cstdio>

#include "common/log.h"

namespace pillar::kube {
namespace {

using nlohmann::json;

// metav1.MicroTime: RFC 3339 with microseconds, UTC.
std::string MicroTime(std::chrono::system_clock::time_point t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::string base = FormatRfc3339(t);  // "...:SSZ"
  char frac[16];
  std::snprintf(frac, sizeof(frac), ".%06lld", static_cast<long long>(us % 1000000));
  return base.substr(0, base.size() - 1) + frac + "Z";
}

}  // namespace

LeaseElector::LeaseElector(Rest& rest, Clock& clock, LeaseOptions options)
    : rest_(rest), clock_(clock), options_(std::move(options)) {}

LeaseElector::~LeaseElector() { Stop(); }

std::string LeaseElector::Path() const {
  return "/apis/coordination.k8s.io/v1/namespaces/" + options_.namespace_name + "/leases/" +
         options_.name;
}

std::string LeaseElector::Now() const { return MicroTime(clock_.Now()); }

std::string LeaseElector::ObservedHolder() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_holder_;
}

bool LeaseElector::TryAcquireOrRenew() {
  const auto steady = clock_.SteadyNow();
  const int64_t duration_s = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.lease_duration).count());
  auto got = rest_.Call("GET", Path());
  if (got.status().code() == Code::kNotFound) {
    json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                  {"kind", "Lease"},
                  {"metadata", {{"name", options_.name}, {"namespace", options_.namespace_name}}},
                  {"spec",
                   {{"holderIdentity", options_.identity},
                    {"leaseDurationSeconds", duration_s},
                    {"acquireTime", Now()},
                    {"renewTime", Now()},
                    {"leaseTransitions", 0}}}};
    auto created = rest_.Call(
        "POST", "/apis/coordination.k8s.io/v1/namespaces/" + options_.namespace_name + "/leases",
        lease);
    if (!created.ok()) return leader_ = false;  // another candidate created it first
    std::lock_guard<std::mutex> lock(mu_);
    last_renew_ = steady;
    observed_holder_ = options_.identity;
    return leader_ = true;
  }
  if (!got.ok()) {
    // Unreachable API server: a leader keeps leading until its renew deadline.
    std::lock_guard<std::mutex> lock(mu_);
    if (leader_ && steady - last_renew_ > options_.renew_deadline) leader_ = false;
    return leader_;
  }
  json lease = *got;
  json& spec = lease["spec"];
  if (!spec.is_object()) spec = json::object();
  const std::string holder = spec.value("holderIdentity", "");
  const std::string seen = holder + "|" + spec.value("renewTime", "") + "|" +
                           lease["metadata"].value("resourceVersion", "");
  bool take_over = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    observed_holder_ = holder;
    if (holder != options_.identity) {
      if (seen != observed_) {
        observed_ = seen;  // the holder is alive (or just changed): wait a full duration
        observed_at_ = steady;
      }
      take_over = holder.empty() || steady - observed_at_ >= options_.lease_duration;
      if (!take_over) return leader_ = false;
    }
  }
  if (take_over) {
    spec["holderIdentity"] = options_.identity;
    spec["acquireTime"] = Now();
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  spec["renewTime"] = Now();
  spec["leaseDurationSeconds"] = duration_s;
  // resourceVersion stays in the body: the PUT is a compare-and-swap.
  auto written = rest_.Call("PUT", Path(), lease);
  std::lock_guard<std::mutex> lock(mu_);
  if (written.ok()) {
    if (take_over) {
      log::Info("leader election: took over the lease",
                {{"lease", options_.name}, {"from", holder}, {"identity", options_.identity}});
    }
    last_renew_ = steady;
    observed_holder_ = options_.identity;
    return leader_ = true;
  }
  if (leader_ && steady - last_renew_ > options_.renew_deadline) leader_ = false;
  return leader_;
}

bool LeaseElector::WaitForLeadership() {
  while (true) {
    if (TryAcquireOrRenew()) return true;
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, options_.retry_period, [this] { return stopping_; })) return false;
  }
}

void LeaseElector::Run(std::function<void()> on_lost) {
  thread_ = std::thread([this, on_lost = std::move(on_lost)] {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, options_.retry_period, [this] { return stopping_; })) return;
      }
      bool was = leader_;
      bool now = TryAcquireOrRenew();
      if (was && !now) {
        log::Error("leader election: lost the lease", {{"lease", options_.name}});
        if (on_lost) on_lost();
        return;
      }
    }
  });
}

void LeaseElector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status LeaseElector::Release() {
  if (!leader_) return Status::Ok();
  auto got = rest_.Call("GET", Path());
  if (!got.ok()) return got.status().Annotate("release lease " + options_.name);
  json lease = *got;
  if (!lease["spec"].is_object() ||
      lease["spec"].value("holderIdentity", "") != options_.identity) {
    leader_ = false;
    return Status::Ok();  // someone else holds it already
  }
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["renewTime"] = Now();
  auto written = rest_.Call("PUT", Path(), lease);  // a CAS: resourceVersion is in the body
  leader_ = false;
  if (!written.ok()) return written.status().Annotate("release lease " + options_.name);
  log::Info("leader election: released the lease",
            {{"lease", options_.name}, {"identity", options_.identity}});
  return Status::Ok();
}

}  // namespace pillar::kube
