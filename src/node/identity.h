// The identities export ACLs are built from (host NQN, initiator IQN, the
// node's addresses), read from the host and reported to the controller's
// node registry at start and whenever they change (seed 000: a re-IP'd node
// must be repaired, so the registry must hear about the new address).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/exec.h"
#include "common/fs.h"

namespace pillar::node {

struct NodeIdentityInfo {
  std::string node_id;
  std::string host_nqn;
  std::string initiator_iqn;
  std::vector<std::string> ip_addresses;  // sorted, unique
  bool operator==(const NodeIdentityInfo&) const = default;
};

struct InterfaceAddress {
  std::string ifname;
  std::string address;
};

// `ip -j addr show` output -> addresses. INVALID_ARGUMENT when not JSON.
StatusOr<std::vector<InterfaceAddress>> ParseIpAddrJson(std::string_view text);
// getifaddrs(3): the fallback when iproute2 is not installed.
StatusOr<std::vector<InterfaceAddress>> SystemInterfaceAddresses();

bool IsLoopbackIp(const std::string& ip);   // 127.0.0.0/8, ::1
bool IsLinkLocalIp(const std::string& ip);  // 169.254.0.0/16, fe80::/10

struct IdentityOptions {
  std::string node_id;
  std::string host_nqn_file = "/etc/nvme/hostnqn";
  std::string iscsi_initiator_file = "/etc/iscsi/initiatorname.iscsi";
  bool include_loopback = false;
  bool include_link_local = false;
  // When set, reported as-is instead of discovering the interfaces.
  std::vector<std::string> static_addresses;
};

class IdentitySource {
 public:
  using AddressLister = std::function<StatusOr<std::vector<InterfaceAddress>>()>;
  IdentitySource(Exec& exec, Fs& fs, IdentityOptions options,
                 AddressLister fallback = SystemInterfaceAddresses)
      : exec_(exec), fs_(fs), options_(std::move(options)), fallback_(std::move(fallback)) {}

  // A missing NQN / IQN file leaves that identity empty (the host may not use
  // that protocol); a malformed one is an error so a typo is not reported.
  StatusOr<NodeIdentityInfo> Read();

 private:
  StatusOr<std::vector<std::string>> Addresses();

  Exec& exec_;
  Fs& fs_;
  IdentityOptions options_;
  AddressLister fallback_;
};

class RegistryClient {
 public:
  virtual ~RegistryClient() = default;
  virtual Status Register(const NodeIdentityInfo& identity) = 0;
  // The node's own addresses changed: the connection the next report would
  // use may be bound to one that is gone (it would hang until its deadline),
  // so start the next report on a new one.
  virtual void Reset() {}
};

// One watch step at a time (the caller's loop paces it): reads the identity
// and reports it when it differs from the last one the registry accepted,
// so a failed report is retried on the next step.
class IdentityReporter {
 public:
  // An unchanged identity is re-reported every `refresh_ticks` ticks, so a
  // record overwritten out of order (a late, abandoned call) heals itself.
  IdentityReporter(IdentitySource& source, RegistryClient& registry, int refresh_ticks = 12)
      : source_(source), registry_(registry), refresh_ticks_(refresh_ticks) {}
  Status Tick();
  const std::optional<NodeIdentityInfo>& last_reported() const { return last_; }

 private:
  IdentitySource& source_;
  RegistryClient& registry_;
  int refresh_ticks_;
  int unchanged_ticks_ = 0;
  std::optional<NodeIdentityInfo> last_;
  std::optional<std::vector<std::string>> addresses_;  // as read at the last tick
};

}  // namespace pillar::node
