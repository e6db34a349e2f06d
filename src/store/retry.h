// The one read-modify-write loop over the store: every update is a
// compare-and-swap on resourceVersion, so a writer that lost a race reads
// again and retries, a bounded number of times.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "common/status.h"

namespace pillar::store {

// How often a read-modify-write is tried before the conflict is reported.
inline constexpr int kConflictAttempts = 8;

// True for the outcomes of losing a race with another writer: ABORTED (a stale
// resourceVersion or uid) and ALREADY_EXISTS (a Create that met one).
inline bool LostRace(const Status& s) {
  return s.code() == Code::kAborted || s.code() == Code::kAlreadyExists;
}
inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const StatusOr<T>& s) {
  return s.status();
}

// Runs attempt(n) for n = 0, 1, ... until it returns anything but a lost race
// (LostRace), at most kConflictAttempts times; then ABORTED "<what> kept
// changing concurrently; retry". `attempt` returns Status or StatusOr<T>; n
// lets the first attempt read a cache and later ones the store.
template <typename Attempt>
auto RetryOnConflict(const std::string& what, Attempt&& attempt) -> decltype(attempt(0)) {
  for (int n = 0; n < kConflictAttempts; ++n) {
    auto result = attempt(n);
    if (!LostRace(StatusOf(result))) return result;
  }
  return Aborted(what + " kept changing concurrently; retry");
}

// True for a store that could not be reached or answered too late: worth
// another try, unlike a refusal.
inline bool Unreachable(const Status& s) {
  return s.code() == Code::kUnavailable || s.code() == Code::kDeadlineExceeded;
}

// How long a daemon's start waits for its store, and how it waits.
struct StartPatience {
  std::chrono::milliseconds total{std::chrono::minutes(5)};
  std::chrono::milliseconds first_wait{std::chrono::seconds(1)};
  std::chrono::milliseconds max_wait{std::chrono::seconds(10)};
};

// Runs attempt() until it returns anything but Unreachable or `patience.total`
// has passed; between tries waits first_wait, doubling up to max_wait, and
// tells on_retry(failure, wait) first. A store that is slow to answer while
// the machine is busy then costs a daemon's start some seconds, not a
// restart and its back-off.
inline Status RetryWhileUnreachable(
    const StartPatience& patience, const std::function<Status()>& attempt,
    const std::function<void(const Status&, std::chrono::milliseconds)>& on_retry) {
  auto deadline = std::chrono::steady_clock::now() + patience.total;
  auto wait = patience.first_wait;
  while (true) {
    Status s = attempt();
    if (s.ok() || !Unreachable(s)) return s;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds(0)) return s;
    auto pause = std::min(wait, left);
    on_retry(s, pause);
    std::this_thread::sleep_for(pause);
    wait = std::min(wait * 2, patience.max_wait);
  }
}

}  // namespace pillar::store
