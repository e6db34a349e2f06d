#include "store/cache.h"

#include <chrono>
#include <set>

#include "common/log.h"

namespace pillar::store {

StoreCache::StoreCache(Store& backend, std::vector<std::string> kinds)
    : backend_(backend), kinds_(std::move(kinds)) {}

StoreCache::~StoreCache() { Stop(); }

void StoreCache::OnChange(const std::string& kind, ChangeHandler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handlers_[kind].push_back(std::move(handler));
}

Status StoreCache::Start() {
  for (const auto& kind : kinds_) RETURN_IF_ERROR(Relist(kind, true));
  relister_ = std::thread([this] { RelistLoop(); });
  return Status::Ok();
}

void StoreCache::Stop() {
  std::map<std::string, KindState> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (relister_.joinable()) relister_.join();
  // Watches are destroyed outside the lock: their destructors wait for a
  // handler that may be waiting for the lock.
  std::vector<std::unique_ptr<WatchHandle>> watches;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [kind, st] : state_) watches.push_back(std::move(st.watch));
  }
  watches.clear();
}

Status StoreCache::Relist(const std::string& kind, bool initial) {
  ASSIGN_OR_RETURN(ListResult list, backend_.List(kind));
  std::map<std::string, Shared> fresh;
  for (auto& o : list.items) {
    std::string name = o.name;
    fresh.emplace(std::move(name), std::make_shared<const Object>(std::move(o)));
  }

  std::unique_ptr<WatchHandle> old_watch;
  std::vector<Event> changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KindState& st = state_[kind];
    old_watch = std::move(st.watch);
    for (const auto& [name, o] : fresh) changes.push_back({EventType::kModified, *o});
    for (const auto& [name, o] : st.objects) {
      if (fresh.count(name) == 0) changes.push_back({EventType::kDeleted, *o});
    }
    st.objects = std::move(fresh);
    st.stale = false;
    stats_.lists++;
  }
  old_watch.reset();
  auto watch = backend_.Watch(
      kind, list.resource_version, [this, kind](const Event& e) { Apply(kind, e); },
      [this, kind](const Status& s) {
        log::Warn("store cache: watch ended; relisting", {{"kind", kind}, {"error", s.ToString()}});
        {
          std::lock_guard<std::mutex> lock(mu_);
          state_[kind].stale = true;
        }
        cv_.notify_all();
      });
  if (!watch.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    state_[kind].stale = true;
    cv_.notify_all();
    return watch.status();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_[kind].watch = std::move(watch).value();
  }
  if (!initial) {
    for (const auto& e : changes) Notify(kind, e);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.relists++;  // counted once its changes were delivered
  }
  return Status::Ok();
}

void StoreCache::Apply(const std::string& kind, const Event& e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& objects = state_[kind].objects;
    if (e.type == EventType::kDeleted) {
      objects.erase(e.object.name);
    } else {
      objects[e.object.name] = std::make_shared<const Object>(e.object);
    }
    stats_.events++;
  }
  Notify(kind, e);
}

void StoreCache::Notify(const std::string& kind, const Event& e) {
  std::vector<ChangeHandler> handlers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handlers_.find(kind);
    if (it != handlers_.end()) handlers = it->second;
  }
  for (const auto& h : handlers) h(e);
}

void StoreCache::RelistLoop() {
  while (true) {
    std::vector<std::string> stale;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(1), [this] {
        if (stopping_) return true;
        for (const auto& [kind, st] : state_) {
          if (st.stale) return true;
        }
        return false;
      });
      if (stopping_) return;
      for (const auto& [kind, st] : state_) {
        if (st.stale) stale.push_back(kind);
      }
    }
    for (const auto& kind : stale) {
      Status s = Relist(kind, false);
      if (!s.ok()) {
        log::Warn("store cache: relist failed; retrying",
                  {{"kind", kind}, {"error", s.ToString()}});
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
      }
    }
  }
}

StatusOr<Object> StoreCache::Get(const std::string& kind, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto st = state_.find(kind);
  if (st == state_.end()) return FailedPrecondition("the store cache does not follow " + kind);
  auto it = st->second.objects.find(name);
  if (it == st->second.objects.end()) return NotFound(Describe(kind, name) + " not found");
  return *it->second;
}

StatusOr<std::vector<Object>> StoreCache::List(const std::string& kind,
                                               const std::optional<LabelSelector>& selector) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto st = state_.find(kind);
  if (st == state_.end()) return FailedPrecondition("the store cache does not follow " + kind);
  std::vector<Object> out;
  out.reserve(st->second.objects.size());
  for (const auto& [name, o] : st->second.objects) {
    if (!selector || MatchesSelector(o->labels, *selector)) out.push_back(*o);
  }
  return out;
}

StatusOr<std::vector<StoreCache::Shared>> StoreCache::ListShared(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto st = state_.find(kind);
  if (st == state_.end()) return FailedPrecondition("the store cache does not follow " + kind);
  std::vector<Shared> out;
  out.reserve(st->second.objects.size());
  for (const auto& [name, o] : st->second.objects) out.push_back(o);
  return out;
}

StoreCache::Stats StoreCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace pillar::store
