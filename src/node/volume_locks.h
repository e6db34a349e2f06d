// Named locks: one operation per volume at a time (CSI asks for ABORTED when
// a second one arrives), and connect / disconnect decisions serialized per
// subsystem or session so "last user" is decided on a stable set.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"

namespace pillar::node {

class NamedLocks {
 public:
  using Guard = std::unique_lock<std::mutex>;
  // nullopt when another holder has the name.
  std::optional<Guard> TryLock(const std::string& name) {
    Guard g(*Slot(name), std::try_to_lock);
    if (!g.owns_lock()) return std::nullopt;
    return g;
  }
  Guard Lock(const std::string& name) { return Guard(*Slot(name)); }

 private:
  std::shared_ptr<std::mutex> Slot(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = slots_[name];
    if (!slot) slot = std::make_shared<std::mutex>();
    return slot;  // slots live as long as the process: one per volume ever seen
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::mutex>> slots_;
};

// A volume is worked on by one CSI call or one self-heal pass at a time. A
// second CSI call is ABORTED, as CSI asks; a pass is not a call: a CSI call
// that arrives during one waits for it to end instead of failing (the CO
// would only retry, and csi-sanity does not), and a pass skips a volume that
// a call holds.
class VolumeLocks {
 public:
  struct CallGuard {
    NamedLocks::Guard call;
    NamedLocks::Guard work;
  };
  // The volume held for a CSI call; ABORTED when another call holds it.
  StatusOr<CallGuard> Call(const std::string& volume_id) {
    auto call = calls_.TryLock(volume_id);
    if (!call) return Aborted("an operation on volume " + volume_id + " is in progress");
    return CallGuard{std::move(*call), work_.Lock(volume_id)};
  }
  // nullopt when a CSI call (or another pass) is working on the volume.
  std::optional<NamedLocks::Guard> TryHeal(const std::string& volume_id) {
    return work_.TryLock(volume_id);
  }
  // For tests that hold a volume the way a running call or pass does.
  NamedLocks& calls() { return calls_; }
  NamedLocks& work() { return work_; }

 private:
  NamedLocks calls_;  // taken first, never waited for
  NamedLocks work_;   // waited for by calls, tried by passes
};

}  // namespace pillar::node
