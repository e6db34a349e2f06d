// How a consumer host rides out a lost connection to its target: the NVMe/TCP
// reconnect delay, controller-loss timeout and keep-alive, and open-iscsi's
// replacement timeout and NOP-out interval and timeout. A StorageClass
// decision (parameters of CreateVolume), recorded with the volume and carried
// to the node in the volume context under the same keys; the node applies it
// at connect / login. docs/architecture.md ("Connection timing") says what
// each trades and what happens when a timeout runs out.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/protocol.h"
#include "common/status.h"

namespace pillar {

struct ConnectionTiming {
  // nvmeof-tcp, seconds.
  std::optional<int> nvme_reconnect_delay;  // "nvmeReconnectDelay": --reconnect-delay
  std::optional<int> nvme_ctrl_loss_tmo;    // "nvmeCtrlLossTimeout": --ctrl-loss-tmo
  std::optional<int> nvme_keep_alive_tmo;   // "nvmeKeepAliveTimeout": --keep-alive-tmo
  // iscsi, seconds: open-iscsi node record settings.
  std::optional<int> iscsi_replacement_timeout;  // "iscsiReplacementTimeout"
  std::optional<int> iscsi_noop_out_interval;    // "iscsiNoopOutInterval"
  std::optional<int> iscsi_noop_out_timeout;     // "iscsiNoopOutTimeout"

  bool empty() const { return *this == ConnectionTiming{}; }
  bool operator==(const ConnectionTiming&) const = default;
};

// pillar's defaults: I/O stays queued through an agent restart, a target
// reload and a storage node reboot (ctrl-loss / replacement 600 s) and
// resumes within about a second of the export's return (reconnect delay 1 s;
// keep-alive and NOP-out 5 s notice a dead path without a false alarm under
// load).
inline constexpr int kDefaultNvmeReconnectDelay = 1;
inline constexpr int kDefaultNvmeCtrlLossTimeout = 600;
inline constexpr int kDefaultNvmeKeepAliveTimeout = 5;
inline constexpr int kDefaultIscsiReplacementTimeout = 600;
inline constexpr int kDefaultIscsiNoopOutInterval = 5;
inline constexpr int kDefaultIscsiNoopOutTimeout = 5;

// True for the keys ParseConnectionTiming reads (any protocol's).
bool IsConnectionTimingKey(std::string_view key);

// Reads the timing keys of `params` for `protocol`, each a decimal number of
// seconds in its range; INVALID_ARGUMENT "<prefix><key> ..." for a bad value,
// a key of another protocol, or a reconnect delay longer than the loss
// timeout. With `fill_defaults`, the protocol's unset fields get pillar's
// defaults (the controller's view of a recorded volume); without, only what
// is there (the node's view of a volume context). NFS has no keys.
StatusOr<ConnectionTiming> ParseConnectionTiming(const std::map<std::string, std::string>& params,
                                                 Protocol protocol, std::string_view prefix,
                                                 bool fill_defaults);

// Writes every set field under its key.
void FormatConnectionTiming(const ConnectionTiming& timing,
                            std::map<std::string, std::string>* out);

}  // namespace pillar
