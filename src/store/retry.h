// The one read-modify-write loop over the store: every update is a
// compare-and-swap on resourceVersion, so a writer that lost a race reads
// again and retries, a bounded number of times.
#pragma once

#include <string>
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

}  // namespace pillar::store
