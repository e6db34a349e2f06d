#include "common/connection_timing.h"

#include <charconv>

namespace pillar {
namespace {

struct Key {
  const char* name;
  Protocol protocol;
  int min;
  int max;
  int default_value;
  std::optional<int> ConnectionTiming::*field;
};

// Ranges: a reconnect delay of at least a second (the kernel's own floor)
// and at most an hour; loss / replacement timeouts up to a day (0 would fail
// I/O at the first hiccup); keep-alive and NOP-out as the kernel and
// open-iscsi accept them (NOP-out interval 0 turns NOP-outs off).
constexpr Key kKeys[] = {
    {"nvmeReconnectDelay", Protocol::kNvmeofTcp, 1, 3600, kDefaultNvmeReconnectDelay,
     &ConnectionTiming::nvme_reconnect_delay},
    {"nvmeCtrlLossTimeout", Protocol::kNvmeofTcp, 1, 86400, kDefaultNvmeCtrlLossTimeout,
     &ConnectionTiming::nvme_ctrl_loss_tmo},
    {"nvmeKeepAliveTimeout", Protocol::kNvmeofTcp, 1, 3600, kDefaultNvmeKeepAliveTimeout,
     &ConnectionTiming::nvme_keep_alive_tmo},
    {"iscsiReplacementTimeout", Protocol::kIscsi, 1, 86400, kDefaultIscsiReplacementTimeout,
     &ConnectionTiming::iscsi_replacement_timeout},
    {"iscsiNoopOutInterval", Protocol::kIscsi, 0, 3600, kDefaultIscsiNoopOutInterval,
     &ConnectionTiming::iscsi_noop_out_interval},
    {"iscsiNoopOutTimeout", Protocol::kIscsi, 1, 3600, kDefaultIscsiNoopOutTimeout,
     &ConnectionTiming::iscsi_noop_out_timeout},
};

}  // namespace

bool IsConnectionTimingKey(std::string_view key) {
  for (const Key& k : kKeys) {
    if (key == k.name) return true;
  }
  return false;
}

StatusOr<ConnectionTiming> ParseConnectionTiming(const std::map<std::string, std::string>& params,
                                                 Protocol protocol, std::string_view prefix,
                                                 bool fill_defaults) {
  ConnectionTiming out;
  for (const Key& k : kKeys) {
    std::string field = std::string(prefix) + k.name;
    auto it = params.find(k.name);
    if (it == params.end()) {
      if (fill_defaults && k.protocol == protocol) out.*k.field = k.default_value;
      continue;
    }
    if (k.protocol != protocol) {
      return InvalidArgument(field + " applies to " + ProtocolName(k.protocol) + " only, not " +
                             ProtocolName(protocol));
    }
    const std::string& text = it->second;
    int value = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < k.min ||
        value > k.max) {
      return InvalidArgument(field + " \"" + text + "\" must be a whole number of seconds from " +
                             std::to_string(k.min) + " to " + std::to_string(k.max));
    }
    out.*k.field = value;
  }
  // The kernel would only cap it; a delay past the loss timeout never retries.
  if (out.nvme_reconnect_delay && out.nvme_ctrl_loss_tmo &&
      *out.nvme_reconnect_delay > *out.nvme_ctrl_loss_tmo) {
    return InvalidArgument(std::string(prefix) + "nvmeReconnectDelay (" +
                           std::to_string(*out.nvme_reconnect_delay) + ") must not exceed " +
                           std::string(prefix) + "nvmeCtrlLossTimeout (" +
                           std::to_string(*out.nvme_ctrl_loss_tmo) + ")");
  }
  return out;
}

void FormatConnectionTiming(const ConnectionTiming& timing,
                            std::map<std::string, std::string>* out) {
  for (const Key& k : kKeys) {
    if (const auto& v = timing.*k.field) (*out)[k.name] = std::to_string(*v);
  }
}

}  // namespace pillar
