// Time behind an interface so backoff, resync and fencing logic is testable.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace pillar {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::system_clock::time_point Now() = 0;
  virtual std::chrono::steady_clock::time_point SteadyNow() = 0;
  virtual void SleepFor(std::chrono::milliseconds d) = 0;
};

class SystemClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() override { return std::chrono::system_clock::now(); }
  std::chrono::steady_clock::time_point SteadyNow() override {
    return std::chrono::steady_clock::now();
  }
  void SleepFor(std::chrono::milliseconds d) override;
};

// RFC 3339 UTC with second precision, as Kubernetes writes timestamps.
std::string FormatRfc3339(std::chrono::system_clock::time_point t);
// "YYYY-MM-DDTHH:MM:SSZ" (what FormatRfc3339 writes and Kubernetes stores);
// nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& s);

}  // namespace pillar
