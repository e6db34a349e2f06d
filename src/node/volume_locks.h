// Named locks: one operation per volume at a time (CSI asks for ABORTED when
// a second one arrives), and connect / disconnect decisions serialized per
// subsystem or session so "last user" is decided on a stable set.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

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

}  // namespace pillar::node
