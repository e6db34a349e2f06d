// One active controller: leader election on a coordination.k8s.io/v1 Lease.
// The holder renews spec.renewTime every retry period; another candidate
// takes over only after it has seen the Lease unchanged for a whole lease
// duration (measured on its own steady clock, so clock skew between nodes
// cannot shorten it). Every write is a compare-and-swap on resourceVersion,
// so two candidates never both win. A leader that cannot renew within the
// renew deadline stops leading and reports it; the controller then exits and
// is restarted, as Kubernetes controllers do.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "kube/rest.h"

namespace pillar::kube {

struct LeaseOptions {
  std::string namespace_name = "kube-system";
  std::string name = "pillar-csi-controller";
  std::string identity;  // this candidate, e.g. the pod name; required
  std::chrono::milliseconds lease_duration{std::chrono::seconds(15)};
  std::chrono::milliseconds renew_deadline{std::chrono::seconds(10)};
  std::chrono::milliseconds retry_period{std::chrono::seconds(2)};
};

class LeaseElector {
 public:
  LeaseElector(Rest& rest, Clock& clock, LeaseOptions options);
  ~LeaseElector();
  LeaseElector(const LeaseElector&) = delete;
  LeaseElector& operator=(const LeaseElector&) = delete;

  // One round: create, renew or take over the Lease as the rules allow.
  // Returns whether this candidate holds it afterwards.
  bool TryAcquireOrRenew();

  // Blocks until this candidate leads (true) or Stop() was called (false).
  bool WaitForLeadership();
  // Runs rounds on a background thread; `on_lost` is called once if a leader
  // fails to renew within the renew deadline.
  void Run(std::function<void()> on_lost);
  void Stop();
  // Gives the Lease up (holderIdentity cleared) if this candidate holds it,
  // so another takes over at once instead of after a lease duration. For a
  // clean shutdown; call after Stop().
  Status Release();

  bool IsLeader() const { return leader_; }
  // The holder last seen in the Lease (this candidate or another).
  std::string ObservedHolder() const;

 private:
  std::string Path() const;
  std::string Now() const;

  Rest& rest_;
  Clock& clock_;
  LeaseOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> leader_{false};
  std::chrono::steady_clock::time_point last_renew_{};
  // What was last seen of another holder's Lease, and since when unchanged.
  std::string observed_;
  std::string observed_holder_;
  std::chrono::steady_clock::time_point observed_at_{};
  std::thread thread_;
};

}  // namespace pillar::kube
