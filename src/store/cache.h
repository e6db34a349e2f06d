// An informer-style read cache over a Store: each kind is listed once and
// then followed through its watch, so Get and List answer from memory and a
// periodic resync costs the backend nothing. The cache changes only through
// the watch, in the backend's order, so it never goes back in time; writes go
// to the backend, and their effect arrives here as an event. A watch that
// ends (history compacted, a stream cut) is followed by a relist.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"

namespace pillar::store {

class StoreCache {
 public:
  // Called, on a background thread, for every change the cache applies: watch
  // events as they come, and after a relist one kModified per listed object
  // and one kDeleted per object that disappeared meanwhile.
  using ChangeHandler = std::function<void(const Event&)>;

  struct Stats {
    int64_t lists = 0;    // full List calls on the backend
    int64_t events = 0;   // watch events applied
    int64_t relists = 0;  // lists after a watch ended
  };

  StoreCache(Store& backend, std::vector<std::string> kinds);
  ~StoreCache();
  StoreCache(const StoreCache&) = delete;
  StoreCache& operator=(const StoreCache&) = delete;

  // Lists every kind and starts the watches; returns once the cache holds a
  // complete snapshot. Handlers must be added before Start.
  Status Start();
  void Stop();
  void OnChange(const std::string& kind, ChangeHandler handler);

  // NOT_FOUND when the cache has no such object; FAILED_PRECONDITION for a
  // kind the cache does not follow.
  StatusOr<Object> Get(const std::string& kind, const std::string& name) const;
  // Sorted by name, like Store::List.
  StatusOr<std::vector<Object>> List(const std::string& kind,
                                     const std::optional<LabelSelector>& selector = {}) const;
  // List without copying: the objects as the cache holds them, shared and
  // immutable (an event replaces an object, never changes it), so a pass
  // over thousands of records costs no copy of each.
  using Shared = std::shared_ptr<const Object>;
  StatusOr<std::vector<Shared>> ListShared(const std::string& kind) const;

  Stats stats() const;

 private:
  struct KindState {
    std::map<std::string, Shared> objects;
    std::unique_ptr<WatchHandle> watch;
    bool stale = false;  // the watch ended: relist
  };

  Status Relist(const std::string& kind, bool initial);
  void Apply(const std::string& kind, const Event& e);
  void RelistLoop();
  void Notify(const std::string& kind, const Event& e);

  Store& backend_;
  const std::vector<std::string> kinds_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, KindState> state_;
  std::map<std::string, std::vector<ChangeHandler>> handlers_;
  Stats stats_;
  std::thread relister_;
};

}  // namespace pillar::store
