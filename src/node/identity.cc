#include "node/identity.h"

#include <arpa/inet.h>
#include <ifaddrs.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "common/log.h"
#include "common/validate.h"
#include "node/attach/iscsi.h"
#include "node/attach/sysfs_util.h"

namespace pillar::node {

StatusOr<std::vector<InterfaceAddress>> ParseIpAddrJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return InvalidArgument("ip -j addr: output is not a list");
  std::vector<InterfaceAddress> out;
  for (const auto& link : j) {
    if (!link.is_object()) continue;
    std::string ifname = link.value("ifname", "");
    auto infos = link.find("addr_info");
    if (infos == link.end() || !infos->is_array()) continue;
    for (const auto& a : *infos) {
      if (!a.is_object()) continue;
      auto local = a.find("local");
      if (local == a.end() || !local->is_string()) continue;
      out.push_back({ifname, local->get<std::string>()});
    }
  }
  return out;
}

StatusOr<std::vector<InterfaceAddress>> SystemInterfaceAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Internal(std::string("getifaddrs: ") + strerror(errno));
  std::vector<InterfaceAddress> out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                sizeof(text));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                sizeof(text));
    } else {
      continue;
    }
    out.push_back({i->ifa_name, text});
  }
  freeifaddrs(list);
  return out;
}

bool IsLoopbackIp(const std::string& ip) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, ip.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

bool IsLinkLocalIp(const std::string& ip) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 16) == 0xA9FE;
  if (inet_pton(AF_INET6, ip.c_str(), &v6) == 1) return IN6_IS_ADDR_LINKLOCAL(&v6);
  return false;
}

StatusOr<std::vector<std::string>> IdentitySource::Addresses() {
  std::vector<InterfaceAddress> found;
  if (!options_.static_addresses.empty()) {
    for (const auto& a : options_.static_addresses) found.push_back({"", a});
  } else {
    auto r = exec_.Run(Command{{"ip", "-j", "addr", "show"}, {}, std::chrono::seconds(10)});
    StatusOr<std::vector<InterfaceAddress>> parsed =
        r.ok() && r->exit_code == 0
            ? ParseIpAddrJson(r->out)
            : StatusOr<std::vector<InterfaceAddress>>(Unavailable("ip -j addr show failed"));
    if (!parsed.ok()) parsed = fallback_();
    if (!parsed.ok()) return parsed.status();
    found = std::move(parsed).value();
  }
  std::set<std::string> out;
  for (const auto& a : found) {
    // A zone suffix ("fe80::1%eth0") is not part of an ACL entry.
    std::string ip = a.address.substr(0, a.address.find('%'));
    if (!validate::IpAddress("address", ip).ok()) continue;
    if (IsLoopbackIp(ip) && !options_.include_loopback) continue;
    if (IsLinkLocalIp(ip) && !options_.include_link_local) continue;
    out.insert(CanonicalIp(ip));
  }
  return std::vector<std::string>(out.begin(), out.end());
}

StatusOr<NodeIdentityInfo> IdentitySource::Read() {
  NodeIdentityInfo id;
  id.node_id = options_.node_id;
  if (auto nqn = fs_.ReadFile(options_.host_nqn_file); nqn.ok()) {
    id.host_nqn = TrimSpace(*nqn);
    if (!id.host_nqn.empty()) {
      RETURN_IF_ERROR(validate::Nqn(options_.host_nqn_file, id.host_nqn));
    }
  } else if (nqn.status().code() != Code::kNotFound) {
    return nqn.status();
  }
  if (auto iqn = fs_.ReadFile(options_.iscsi_initiator_file); iqn.ok()) {
    id.initiator_iqn = ParseInitiatorName(*iqn);
    if (!id.initiator_iqn.empty()) {
      RETURN_IF_ERROR(validate::Iqn(options_.iscsi_initiator_file, id.initiator_iqn));
    }
  } else if (iqn.status().code() != Code::kNotFound) {
    return iqn.status();
  }
  ASSIGN_OR_RETURN(id.ip_addresses, Addresses());
  return id;
}

Status IdentityReporter::Tick() {
  ASSIGN_OR_RETURN(NodeIdentityInfo id, source_.Read());
  if (addresses_ && *addresses_ != id.ip_addresses) registry_.Reset();
  addresses_ = id.ip_addresses;
  if (last_ && *last_ == id && ++unchanged_ticks_ < refresh_ticks_) return Status::Ok();
  unchanged_ticks_ = 0;
  if (Status s = registry_.Register(id); !s.ok()) {
    // The call may still have been applied (or be applied later): what the
    // registry holds is unknown now, so the next tick reports again.
    last_.reset();
    return s;
  }
  log::Info("node identity reported", {{"nodeID", id.node_id},
                                       {"hostNQN", id.host_nqn},
                                       {"initiatorIQN", id.initiator_iqn},
                                       {"addresses", id.ip_addresses}});
  last_ = std::move(id);
  return Status::Ok();
}

}  // namespace pillar::node
