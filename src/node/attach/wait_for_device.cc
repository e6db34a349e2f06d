#include "node/attach/wait_for_device.h"

#include "common/log.h"

namespace pillar::node {

StatusOr<std::string> ConnectAndWaitForDevice(Clock& clock, const AttachOptions& options,
                                              const AttachSteps& steps) {
  bool was_connected = steps.connected();
  if (!was_connected) RETURN_IF_ERROR(steps.connect());

  const auto start = clock.SteadyNow();
  const auto deadline = start + std::chrono::milliseconds(options.device_timeout_ms);
  const auto rescan_every = std::chrono::milliseconds(options.rescan_after_ms);
  auto next_rescan = was_connected ? start : start + rescan_every;
  int rounds = 0;
  int failed = 0;
  std::string last_failure;
  while (true) {
    if (auto dev = steps.find_device()) return *dev;
    auto now = clock.SteadyNow();
    if (now >= deadline) break;
    if (now >= next_rescan) {
      auto ran = steps.rescan();
      if (!ran.ok()) {
        ++rounds;
        ++failed;
        last_failure = ran.status().message();
        log::Warn(steps.rescan_name + " failed; still waiting for the device",
                  {{"target", steps.target}, {"error", last_failure}});
      } else if (*ran > 0) {
        ++rounds;
        log::Info("device missing on a connected target; rescanned",
                  {{"target", steps.target}, {"rescans", *ran}});
      }
      next_rescan = now + rescan_every;
    }
    clock.SleepFor(std::chrono::milliseconds(options.poll_interval_ms));
  }
  std::string failures =
      failed == 0 ? ""
                  : " (" + std::to_string(failed) + " failed, the last with: " + last_failure + ")";
  return DeadlineExceeded("no block device for " + steps.target + " after " +
                          std::to_string(options.device_timeout_ms / 1000) +
                          "s: " + steps.describe_connection() + ", " + std::to_string(rounds) +
                          " " + steps.rescan_name + " round(s) found nothing" + failures);
}

}  // namespace pillar::node
