// One operation per volume at a time (CSI asks for ABORTED when a second one
// arrives); connect / disconnect decisions are serialized per connection
// with a NamedLocks (common/named_locks.h) of their own.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/named_locks.h"
#include "common/status.h"

namespace pillar::node {

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
