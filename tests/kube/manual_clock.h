// A clock that moves only when a test says so (leases, event rate limits).
#pragma once

#include <chrono>

#include "common/clock.h"

namespace pillar::kube::testing {

class ManualClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() override {
    return std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 56) + elapsed;
  }
  std::chrono::steady_clock::time_point SteadyNow() override {
    return std::chrono::steady_clock::time_point{} + elapsed;
  }
  void SleepFor(std::chrono::milliseconds d) override { elapsed += d; }
  std::chrono::milliseconds elapsed{1000};
};

}  // namespace pillar::kube::testing
