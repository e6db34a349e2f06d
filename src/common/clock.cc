#include "common/clock.h"

#include <ctime>
#include <thread>

namespace pillar {

void SystemClock::SleepFor(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

std::string FormatRfc3339(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace pillar
