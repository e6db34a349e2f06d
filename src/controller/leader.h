// Which controller replica leads: only the leader reconciles and serves
// mutations. The gate is an interface so the CSI controller is testable with
// any answer; FileLockLeader is the single-host implementation.
#pragma once

#include <atomic>
#include <string>

#include "common/status.h"
#include "kube/lease.h"

namespace pillar::controller {

class LeaderGate {
 public:
  virtual ~LeaderGate() = default;
  virtual bool IsLeader() = 0;
};

class AlwaysLeader : public LeaderGate {
 public:
  bool IsLeader() override { return true; }
};

// Single-host leader election: the holder of an exclusive flock on a file
// next to the store leads. Replicas on one host (or on a shared filesystem
// with working locks) wait their turn; the default is one replica. The lock
// goes with the file descriptor: when the leader exits, the next one leads.
class FileLockLeader : public LeaderGate {
 public:
  explicit FileLockLeader(std::string path) : path_(std::move(path)) {}
  ~FileLockLeader() override;
  FileLockLeader(const FileLockLeader&) = delete;
  FileLockLeader& operator=(const FileLockLeader&) = delete;

  // Blocks until this replica holds the lock.
  Status WaitForLeadership();
  bool IsLeader() override { return leader_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::atomic<bool> leader_{false};
};

// In Kubernetes: the holder of a coordination.k8s.io/v1 Lease leads, from
// the moment it is ready to (its reconciler started): until then Probe says
// not ready and mutations are UNAVAILABLE.
class LeaseLeader : public LeaderGate {
 public:
  explicit LeaseLeader(kube::LeaseElector& elector) : elector_(elector) {}
  bool IsLeader() override { return ready_ && elector_.IsLeader(); }
  void SetReady() { ready_ = true; }

 private:
  kube::LeaseElector& elector_;
  std::atomic<bool> ready_{false};
};

}  // namespace pillar::controller
