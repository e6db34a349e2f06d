// The kernel's own word that the node's addresses changed (rtnetlink
// address and link events), so a re-IP'd node reports its new address at
// once instead of at its next identity poll (issue 25: seed 000's rule must
// follow within seconds). The poll stays as the safety net: events can be
// lost (a full socket buffer) and a host may give no netlink at all.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>

#include "common/status.h"

namespace pillar::node {

// Whether a datagram read from an rtnetlink socket holds an address or link
// event (RTM_NEWADDR, RTM_DELADDR, RTM_NEWLINK, RTM_DELLINK). A malformed or
// truncated datagram holds none; an overrun (ENOBUFS, events lost) is the
// caller's to treat as a change.
bool HoldsAddressEvent(const void* data, size_t len);

class AddressWatch {
 public:
  // `on_change` runs on the watch's thread, once per datagram that holds an
  // event (and once after lost events): it should only wake someone.
  explicit AddressWatch(std::function<void()> on_change);
  ~AddressWatch();
  AddressWatch(const AddressWatch&) = delete;
  AddressWatch& operator=(const AddressWatch&) = delete;

  // Opens the socket (joined to the IPv4 and IPv6 address groups and the
  // link group) and starts the thread. UNAVAILABLE naming the call when the
  // host gives no rtnetlink socket: the caller goes on polling.
  Status Start();
  void Stop();

 private:
  void Loop();

  std::function<void()> on_change_;
  int fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop() wakes the thread's poll
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pillar::node
