// A block-device attacher: connects this host to a remote target (NVMe-oF
// subsystem, iSCSI target), finds the local block device of the volume in
// sysfs, and disconnects. One implementation per protocol; the node service
// only sees this interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/connection_timing.h"
#include "common/credentials.h"
#include "common/protocol.h"
#include "common/status.h"

namespace pillar::node {

// Where a volume lives, from the volume / publish context (validated).
struct RemoteTarget {
  Protocol protocol = Protocol::kNvmeofTcp;
  std::string target_id;  // subsystem NQN | target IQN | exported path
  std::string address;    // numeric IP
  int port = 0;
  // pillar exports one namespace per subsystem, id 1, and one LUN per
  // target, 0: the target names the volume, these only name the device.
  int64_t nsid = 1;
  int64_t lun = 0;
  // From the volume context: nvme connect's reconnect delay, controller-loss
  // and keep-alive timeouts; the iSCSI node record's timeouts.
  ConnectionTiming timing;
  // auth=chap volumes: from the NodeStage secrets; never written to a stage
  // record or a log (a reconnect after a restart relies on what the kernel
  // or open-iscsi's node database already holds).
  Credentials credentials;

  // The whole connection (subsystem / session / export): protocol, target,
  // address and port. pillar gives every volume a target of its own, so no
  // two staged volumes ever have the same key.
  std::string ConnectionKey() const {
    return std::string(ProtocolName(protocol)) + "|" + target_id + "|" + address + "|" +
           std::to_string(port);
  }
};

struct DeviceHealth {
  bool connected = false;  // a live controller / session to the target exists
  std::string device;      // "/dev/nvme0n1" when present
  std::string problem;     // why it is unhealthy, empty when healthy
};

class BlockAttacher {
 public:
  virtual ~BlockAttacher() = default;
  // Connects when not connected, then waits for the device (rescanning a
  // connected target whose device is missing) until a deadline. Returns the
  // device path. Idempotent.
  virtual StatusOr<std::string> Attach(const RemoteTarget& t) = 0;
  // Disconnects the target; "not connected" is success.
  virtual Status Detach(const RemoteTarget& t) = 0;
  // Reads sysfs only: no command runs.
  virtual DeviceHealth Check(const RemoteTarget& t) = 0;
  // One self-healing step: reconnect a lost connection, rescan a connected
  // target whose device is missing. Never disconnects.
  virtual Status Heal(const RemoteTarget& t) = 0;
  // Asks the kernel to re-read the target's namespaces / LUNs (sizes after
  // an expansion, missing devices).
  virtual Status Rescan(const RemoteTarget& t) = 0;
};

struct AttachOptions {
  // How long Attach waits for the device after connecting.
  int64_t device_timeout_ms = 30000;
  int64_t poll_interval_ms = 500;
  // A connected target whose device is still missing after this long is
  // rescanned (and again every time this much more has passed).
  int64_t rescan_after_ms = 2000;
};

}  // namespace pillar::node
