// The one attach loop of the block attachers: connect when not connected,
// then poll for the device until a deadline, rescanning a connected target
// whose device is missing (seed 003: a missed namespace / LUN notification).
// Each protocol supplies the steps; the timing and the error live here.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "node/attach/attacher.h"

namespace pillar::node {

struct AttachSteps {
  // Names the target in logs and in the timeout error
  // ("namespace 1 of subsystem nqn... at 10.0.0.1:4420").
  std::string target;
  // What a rescan is called in the timeout error ("nvme ns-rescan").
  std::string rescan_name;
  // This host already has a connection (or one being re-established).
  std::function<bool()> connected;
  std::function<Status()> connect;
  // The device path ("/dev/nvme0n1") when it is there.
  std::function<std::optional<std::string>()> find_device;
  // One rescan round: how many rescans ran (0 = nothing to rescan yet), or
  // why the round failed. A failure is logged and the wait goes on.
  std::function<StatusOr<int>()> rescan;
  // The connection as it stands, for the timeout error ("1 session(s)").
  std::function<std::string()> describe_connection;
};

// Connects unless `connected()`, then returns the device path once
// find_device() sees it. A target that was connected before is rescanned at
// once (its missing device is a missed notification); after a fresh connect
// the kernel's own scan gets options.rescan_after_ms first. Rescans repeat
// every rescan_after_ms, polls every poll_interval_ms, all on `clock`. After
// device_timeout_ms: DEADLINE_EXCEEDED naming the target, the connection and
// the rescans tried.
StatusOr<std::string> ConnectAndWaitForDevice(Clock& clock, const AttachOptions& options,
                                              const AttachSteps& steps);

}  // namespace pillar::node
