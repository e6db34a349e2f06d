// A mutex per name (a volume, an agent volume id, a connection), made on
// first use: what the controller, the reconciler, the agent and the node each
// serialize their per-volume work with.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace pillar {

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

}  // namespace pillar
